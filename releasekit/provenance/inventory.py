"""The image's filesystem as the verifier sees it: a path table with hashes, read once from a tar stream.

Nothing is extracted. Every member name is normalised to an absolute POSIX path inside
a virtual root; names with ``..`` or that escape the root are refused (and reported).
Symlinks are recorded, never followed on the host; ``resolve`` follows them inside the
virtual tree only, the way the container would. Regular files under the Python roots are
hashed (sha256 for RECORD, git blob sha1 for ``.py`` sources) as they stream past; small
metadata files are kept in memory; native extensions of components are spooled to an
anonymous temporary file just long enough to read their ``.nv_fatbin``.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
import tempfile
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from releasekit.fatbin import FatbinReport, read_fatbin
from releasekit.provenance.hasher import Hasher, HashingError
from releasekit.provenance.hashthread import HashThread

CHUNK = 1024 * 1024
THREAD_BYTES = 4 * 1024 * 1024  # a file at least this large is hashed on the hashing thread
PREPARE_BYTES = 64 * 1024 * 1024  # a stream this long gets its hashers ready before a large file arrives
Buffer = bytes | bytearray | memoryview  # what a chunk's slice is
KEEP_CAP = 16 * 1024 * 1024  # metadata files kept in memory (RECORD, METADATA, dpkg lists)
_KEEP_NAMES = {"RECORD", "METADATA", "direct_url.json", "INSTALLER", "top_level.txt", "entry_points.txt"}


class ExportAborted(Exception):
    """The stream broke a limit (time, total size): the image cannot be verified."""


@dataclass(slots=True)
class FileEntry:
    path: str
    kind: str  # file | dir | symlink | hardlink | other
    size: int = 0
    link: str | None = None
    sha256: bytes | None = None
    blob: str | None = None  # git blob id, for .py files
    md5: str | None = None  # for files dpkg may own: its md5sums are the reference
    mode: int = 0  # permission bits (0o7777), for the file-level accounting
    uid: int = 0
    gid: int = 0


@dataclass
class ReadPlan:
    """What to hash and keep while the stream passes."""

    python_roots: list[str]
    native_names: set[str] = field(default_factory=set)  # top-level names whose .so files get a fatbin read
    keep_suffixes: tuple[str, ...] = (".pth", "_version.py", "version.py", "customize.py")
    # Debian's Python lives here; dpkg's md5sums verify it the way RECORD verifies pip's files.
    md5_prefixes: tuple[str, ...] = ("/usr/lib/python3",)
    # A candidate's file above this stops the read at its header (EXPORT_ABORTED naming it): a file that
    # large is not verified, and reading past it would cost time in proportion to its apparent size
    # (a sparse file costs the attacker no disk). The locked base and the release layer (accounting
    # tables) are read to the end, their large files listed as too large.
    max_file_bytes: int = 4 * 1024**3
    stop_at_too_large: bool = False
    max_total_bytes: int = 256 * 1024**3
    deadline: float | None = None  # time.monotonic() value
    # Full-image accounting: a sha256 of every regular file, not only those under the Python roots.
    hash_all: bool = False
    # git blob ids of .py files under the Python roots (compared with git) and md5 of Debian's Python
    # files (compared with dpkg's md5sums); a read that only builds an accounting table (the locked
    # base, the release layer) needs only sha256.
    extra_digests: bool = True
    max_kept_bytes: int = 128 * 1024 * 1024  # all kept metadata files together (the rest is not kept)
    max_entries: int = 5_000_000  # paths in the table
    # Files of at least this many bytes are hashed on a thread of this process while the reader
    # goes on (hashthread.py). None: THREAD_BYTES on a host with 2 or more
    # cores; 0: never.
    hash_thread_bytes: int | None = None
    # The ring that file bytes wait in for that thread (copied there, its pages faulted in by the
    # thread while it is idle); mapped once a stream passes PREPARE_BYTES or a large file arrives.
    hash_thread_ring_bytes: int = 256 * 1024 * 1024

    def thread_bytes(self) -> int:
        if self.hash_thread_bytes is not None:
            return max(0, self.hash_thread_bytes)
        return THREAD_BYTES if (os.cpu_count() or 1) >= 2 else 0

    def hasher(self) -> Hasher:
        """The hashing thread for the largest files (with ``thread_bytes()`` 0 it declines every file)."""
        return HashThread(self.thread_bytes(), self.hash_thread_ring_bytes, self.deadline)

    def under_root(self, path: str) -> str | None:
        for root in self.python_roots:
            if path == root or path.startswith(root.rstrip("/") + "/"):
                return root
        if "/site-packages/" in path or "/dist-packages/" in path:
            return path.split("-packages/", 1)[0] + "-packages"
        return None


@dataclass
class Inventory:
    files: dict[str, FileEntry] = field(default_factory=dict)
    contents: dict[str, bytes] = field(default_factory=dict)
    fatbins: dict[str, FatbinReport] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)  # unsafe member names
    too_large: list[str] = field(default_factory=list)
    total_bytes: int = 0
    hashed_bytes: int = 0
    kept_bytes: int = 0
    limits: list[str] = field(default_factory=list)  # limits hit while reading (each a sentence)
    _children: dict[str, list[str]] | None = field(default=None, repr=False)

    def children(self, directory: str) -> list[str]:
        """Names directly inside ``directory`` (no symlink resolution): a per-directory index, built once."""
        if self._children is None:
            index: dict[str, list[str]] = {}
            for path in self.files:
                parent, _, name = path.rpartition("/")
                index.setdefault(parent or "/", []).append(name)
            self._children = index
        return self._children.get(directory.rstrip("/") or "/", [])

    def resolve(self, path: str, *, follow_last: bool = True) -> str | None:
        """The path with every symlink followed inside the image (None: a loop or too deep)."""
        parts = [p for p in path.split("/") if p]
        done: list[str] = []
        hops = 0
        while parts:
            part = parts.pop(0)
            if part == ".":
                continue
            if part == "..":
                if done:
                    done.pop()
                continue
            candidate = "/" + "/".join([*done, part])
            entry = self.files.get(candidate)
            if entry is not None and entry.kind == "symlink" and (parts or follow_last):
                hops += 1
                if hops > 40:
                    return None
                target = entry.link or ""
                if target.startswith("/"):
                    done = []
                parts = [p for p in target.split("/") if p] + parts
                continue
            done.append(part)
        return "/" + "/".join(done)

    def get(self, path: str) -> FileEntry | None:
        entry = self.files.get(path)
        if entry is not None and entry.kind != "symlink":
            return entry
        real = self.resolve(path)
        return self.files.get(real) if real else None

    def read(self, path: str) -> bytes | None:
        if path in self.contents:
            return self.contents[path]
        real = self.resolve(path)
        return self.contents.get(real) if real else None

    def listdir(self, directory: str) -> list[str]:
        real = self.resolve(directory) or directory
        return sorted(set(self.children(real)))


def safe_member_path(name: str) -> str | None:
    """An archive member name as an absolute path in the virtual root, or None when unsafe."""
    if "\x00" in name or name.startswith("/"):
        return None
    plain = name[2:] if name.startswith("./") else name
    plain = plain.rstrip("/")
    if (
        plain
        and "//" not in plain
        and "." not in (plain[0], plain[-1])
        and "/." not in plain
        and "./" not in plain
    ):
        return "/" + plain  # the usual form, with nothing to normalise (the general case below agrees)
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        return None
    return "/" + "/".join(parts)


class _Router:
    """Where one regular file goes: (its Python root, kept in memory, its fatbin read).

    The root and the ``.dist-info`` / dpkg ``info`` membership are the same for every file of a
    directory, so they are looked up once per directory; a root that is the file itself (a
    ``.zip`` on sys.path) is checked per file.
    """

    __slots__ = ("_plan", "_dirs", "_exact")

    def __init__(self, plan: ReadPlan) -> None:
        self._plan = plan
        self._dirs: dict[str, tuple[str | None, bool, bool]] = {}
        self._exact = set(plan.python_roots)

    def route(self, path: str) -> tuple[str | None, bool, bool]:
        plan = self._plan
        directory, _, name = path.rpartition("/")
        shared = self._dirs.get(directory)
        if shared is None:
            probe = directory + "/x"  # any name in the directory
            shared = self._dirs[directory] = (
                plan.under_root(probe),
                ".dist-info/" in probe,
                probe.startswith("/var/lib/dpkg/info/"),
            )
        root, in_dist_info, in_dpkg_info = shared
        if path in self._exact:
            root = plan.under_root(path)
        keep = (
            (
                root is not None
                and ((in_dist_info and name in _KEEP_NAMES) or name.endswith(plan.keep_suffixes))
            )
            or name in ("sitecustomize.py", "usercustomize.py")
            or path == "/var/lib/dpkg/status"
            or (in_dpkg_info and name.endswith((".list", ".md5sums")))
        )
        native = root is not None and bool(plan.native_names) and _is_native(path, root, plan)
        return root, keep, native


def _bytecode(path: str) -> bool:
    return path.endswith(".pyc") and "/__pycache__/" in path


def _is_native(path: str, root: str, plan: ReadPlan) -> bool:
    if not (path.endswith(".so") or ".so." in path.rpartition("/")[2]):
        return False
    top = path[len(root) + 1 :].split("/", 1)[0]
    top = top.split(".", 1)[0]
    return top in plan.native_names


class _Sink:
    """Where one regular file's bytes go while they stream past: hashes, a kept copy, a spool."""

    __slots__ = ("sha", "blob", "md5", "kept", "spool", "update")

    def __init__(
        self,
        size: int,
        *,
        path: str,
        plan: ReadPlan,
        inv: Inventory,
        keep: bool,
        native: bool,
        hash_it: bool,
        blob_it: bool,
    ) -> None:
        if hash_it and size > plan.max_file_bytes:
            inv.too_large.append(path)
            hash_it = keep = native = False
        self.sha = hashlib.sha256() if hash_it else None
        self.blob = None
        if hash_it and blob_it and path.endswith(".py"):
            self.blob = hashlib.sha1(b"blob %d\0" % size)  # git's object id of the file's bytes
        self.md5 = (
            hashlib.md5() if hash_it and plan.extra_digests and path.startswith(plan.md5_prefixes) else None
        )  # noqa: S324 - dpkg's format
        if keep and inv.kept_bytes + size > plan.max_kept_bytes:
            if not any(m.startswith("kept-bytes") for m in inv.limits):
                inv.limits.append(
                    f"kept-bytes: metadata files above {plan.max_kept_bytes} bytes in all were not kept "
                    f"(first: {path})"
                )
            keep = False
        self.kept = bytearray() if keep and size <= KEEP_CAP else None
        if self.kept is not None:
            inv.kept_bytes += size
        self.spool = tempfile.TemporaryFile() if native else None  # noqa: SIM115 - closed in finish/close
        updates: list[Callable[[Buffer], object]] = [
            u
            for u in (
                self.sha.update if self.sha is not None else None,
                self.blob.update if self.blob is not None else None,
                self.md5.update if self.md5 is not None else None,
                self.kept.extend if self.kept is not None else None,
                self.spool.write if self.spool is not None else None,
            )
            if u is not None
        ]
        self.update: Callable[[Buffer], object] | None
        if not updates:
            self.update = None
        elif len(updates) == 1:
            self.update = updates[0]  # the common case (hash only): no call in between
        else:

            def update(data: Buffer) -> None:
                for u in updates:
                    u(data)

            self.update = update

    def finish(self, path: str, size: int, inv: Inventory, entry: FileEntry) -> None:
        try:
            if self.sha is not None:
                entry.sha256 = self.sha.digest()
                inv.hashed_bytes += size  # the directory walk recounts this after its threads finish
            if self.blob is not None:
                entry.blob = self.blob.hexdigest()
            if self.md5 is not None:
                entry.md5 = self.md5.hexdigest()
            if self.kept is not None:
                inv.contents[path] = bytes(self.kept)
            if self.spool is not None:
                self.spool.seek(0)
                report = read_fatbin(self.spool)
                if report is not None:
                    inv.fatbins[path] = report
        finally:
            self.close()

    def close(self) -> None:
        if self.spool is not None:
            self.spool.close()
            self.spool = None


def _consume(
    read: Callable[[int], bytes],
    size: int,
    *,
    path: str,
    plan: ReadPlan,
    inv: Inventory,
    entry: FileEntry,
    keep: bool,
    native: bool,
    hash_it: bool,
    blob_it: bool = True,
) -> None:
    """One file of a directory tree, read through ``read``."""
    sink = _Sink(
        size, path=path, plan=plan, inv=inv, keep=keep, native=native, hash_it=hash_it, blob_it=blob_it
    )
    try:
        remaining = size
        while remaining > 0 and sink.update is not None:
            data = read(min(CHUNK, remaining))
            if not data:
                break
            remaining -= len(data)
            sink.update(data)
        sink.finish(path, size, inv, entry)
    finally:
        sink.close()


# --- the tar stream ----------------------------------------------------------------------------
#
# Our own reader, strict where tarfile is lenient (tarfile ends quietly at a bad header after
# the first one, reads short data as the end of a file, and turns unknown types into plain
# entries): every header's checksum is verified, numeric fields are octal or base-256 and
# nothing else, the stream must end with a zero block followed by zeros only, and an entry
# type that could carry data we do not account for (sparse files, volume headers, unknown
# types, data on a link or a directory) stops the read. File data goes from the stream's
# chunks straight into hashlib as memoryview slices, with no copy per entry.

BLOCK = 512
_ZERO_BLOCK = bytes(BLOCK)
_META_CAP = 1024 * 1024  # pax / GNU long-name data: far above any real path
_POSIX_MAGIC = b"ustar\x00"  # ustar and pax: a prefix field at 345:500
_GNU_MAGIC = b"ustar  \x00"  # GNU: 345:500 holds times and sparse data, never a prefix
_REGULAR = (b"0", b"\x00", b"7")
_OTHER_KINDS = {b"3": "chr", b"4": "blk", b"6": "fifo"}
# pax keywords that change what the table records; a global header may not set them
_PAX_ENTRY_KEYS = ("path", "linkpath", "size", "uid", "gid")
_OCTAL = b"01234567"


class _Stream:
    """A forward-only view of the stream's chunks: exact takes for headers, slices for data."""

    __slots__ = ("_chunks", "_plan", "buf", "view", "off", "total")

    def __init__(self, chunks: Iterable[bytes], plan: ReadPlan) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._plan = plan
        self.buf = b""
        self.view = memoryview(self.buf)
        self.off = 0
        self.total = 0  # bytes received

    @property
    def pos(self) -> int:  # bytes consumed
        return self.total - (len(self.buf) - self.off)

    def _fill(self) -> bool:
        for chunk in self._chunks:
            if not chunk:
                continue
            self.total += len(chunk)
            if self.total > self._plan.max_total_bytes:
                raise ExportAborted(f"the image's filesystem exceeds {self._plan.max_total_bytes} bytes")
            if self._plan.deadline is not None and time.monotonic() > self._plan.deadline:
                raise ExportAborted("reading the image's filesystem ran past its time limit")
            self.buf, self.view, self.off = chunk, memoryview(chunk), 0
            return True
        return False

    def take(self, n: int, what: str) -> bytes:
        """Exactly ``n`` bytes as one object (headers, pax records, long names)."""
        end = self.off + n
        if end <= len(self.buf):
            data = self.buf[self.off : end]
            self.off = end
            return bytes(data)
        parts: list[bytes] = []
        need = n
        while need:
            avail = len(self.buf) - self.off
            if not avail:
                if not self._fill():
                    raise _truncated(self.pos, what)
                continue
            step = min(avail, need)
            parts.append(bytes(self.buf[self.off : self.off + step]))
            self.off += step
            need -= step
        return b"".join(parts)

    def feed(self, n: int, update: Callable[[Buffer], object] | None, what: str) -> None:
        """``n`` bytes to ``update`` as slices of the chunks (or skipped when it is None)."""
        while n:
            avail = len(self.buf) - self.off
            if not avail:
                if not self._fill():
                    raise _truncated(self.pos, what)
                continue
            step = avail if avail < n else n
            if update is not None:
                update(self.view[self.off : self.off + step])
            self.off += step
            n -= step

    def feed_hashes(self, n: int, padded: int, sha: Any, blob: Any, what: str) -> None:
        """A small file's bytes into its hashes here, then its padding skipped."""
        end = self.off + n
        if end + padded <= len(self.buf):  # the usual case: the file lies inside this chunk
            data = self.view[self.off : end]
            sha.update(data)
            if blob is not None:
                blob.update(data)
            self.off = end + padded
            return
        if blob is None:
            self.feed(n, sha.update, what)
        else:
            self.feed(n, lambda data: (sha.update(data), blob.update(data)), what)
        self.feed(padded, None, what)

    def rest_is_zero(self) -> bool:
        while True:
            if self.buf.count(0, self.off) != len(self.buf) - self.off:
                return False
            self.off = len(self.buf)
            if not self._fill():
                return True


def _truncated(pos: int, what: str) -> ExportAborted:
    return ExportAborted(f"the image's filesystem stream is truncated at byte {pos} (in {what})")


def _corrupt(pos: int, why: str) -> ExportAborted:
    return ExportAborted(f"the image's filesystem stream is corrupt at byte {pos}: {why}")


def _text(raw: bytes) -> str:
    end = raw.find(0)
    return (raw if end < 0 else raw[:end]).decode("utf-8", "surrogateescape")


def _number(field: bytes, pos: int, what: str) -> int:
    """A numeric header field: octal digits (space/NUL padded) or GNU base-256."""
    if field[-1] == 0 and field.translate(None, _OCTAL) == b"\x00":
        return int(field[:-1], 8)  # the usual form: octal digits and one NUL
    first = field[0]
    if first == 0x80 or first == 0xFF:
        n = int.from_bytes(field[1:], "big")
        return n - (1 << (8 * (len(field) - 1))) if first == 0xFF else n
    end = field.find(0)
    digits = (field if end < 0 else field[:end]).strip()
    if not digits:
        return 0
    if digits.translate(None, _OCTAL):
        raise _corrupt(pos, f"the {what} field is not an octal number ({bytes(field)!r})")
    return int(digits, 8)


def _unsigned_sum(header: bytes) -> int:
    """The checksum the header should carry: its bytes summed, the checksum field counted as spaces."""
    # Every byte < 128 (the usual header): the sum is below 65521, so adler-32's low half is 1 + the sum.
    total = (zlib.adler32(header) & 0xFFFF) - 1 if header.isascii() else sum(header)
    return 256 + total - sum(header[148:156])


def _signed_sum(header: bytes) -> int:
    return 256 + sum(struct.unpack_from("148b8x356b", header))  # some tars sum signed bytes


# The form every common writer uses for mode, uid, gid, size, mtime and the checksum.
_USUAL_NUMBERS = re.compile(
    rb"([0-7]{7})\x00([0-7]{7})\x00([0-7]{7})\x00([0-7]{11})\x00[0-7]{11}\x00([0-7]{6})\x00 "
)


def _pax_records(data: bytes, pos: int) -> dict[str, str]:
    """``"%d %s=%s\\n"`` records; only NUL padding may follow the last one."""
    out: dict[str, str] = {}
    at = 0
    while at < len(data):
        if data[at] == 0 and data.count(0, at) == len(data) - at:
            break
        space = data.find(b" ", at, at + 24)
        length_text = data[at:space] if space > at else b""
        if not length_text.isdigit():
            raise _corrupt(pos, "a pax record has no length")
        length = int(length_text)
        record = data[space + 1 : at + length]
        if length <= space + 1 - at or at + length > len(data) or not record.endswith(b"\n"):
            raise _corrupt(pos, "a pax record's length does not match its contents")
        key, eq, value = record[:-1].partition(b"=")
        if not eq or not key:
            raise _corrupt(pos, "a pax record has no keyword")
        out[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
        at += length
    return out


def _pax_number(pax: dict[str, str], key: str, pos: int, default: int) -> int:
    value = pax.get(key)
    if value is None:
        return default
    if not value.isascii() or not value.isdigit():
        raise _corrupt(pos, f"the pax {key} {value[:40]!r} is not a number")
    return int(value)


def inventory_from_tar(chunks: Iterable[bytes], plan: ReadPlan) -> Inventory:
    pool = plan.hasher()
    pending_links: list[tuple[FileEntry, FileEntry]] = []
    try:
        inv = _read_tar(chunks, plan, pool, pending_links)
        pool.close()
    except HashingError as exc:
        raise ExportAborted(f"hashing the image's files failed: {exc}") from None
    finally:
        pool.abort()
    for link, original in pending_links:  # hard links to files the hashing thread hashed
        link.sha256, link.blob = original.sha256, original.blob
    return inv


def _digests_into(entry: FileEntry) -> Callable[[bytes, bytes], None]:
    def sink(sha256: bytes, sha1: bytes) -> None:
        # May run on the hashing thread: the blob id first, so a sha256 that is set means both are.
        if sha1:
            entry.blob = sha1.hex()
        entry.sha256 = sha256

    return sink


def _read_tar(
    chunks: Iterable[bytes],
    plan: ReadPlan,
    pool: Hasher,
    pending_links: list[tuple[FileEntry, FileEntry]],
) -> Inventory:
    inv = Inventory()
    stream = _Stream(chunks, plan)
    files = inv.files
    long_name: str | None = None
    long_link: str | None = None
    pax: dict[str, str] | None = None
    max_file_bytes, hash_all, max_entries = plan.max_file_bytes, plan.hash_all, plan.max_entries
    stop_at_too_large = plan.stop_at_too_large
    blobs = plan.extra_digests
    md5_prefixes = plan.md5_prefixes if blobs else ()
    router = _Router(plan)
    # An accounting table (the locked base, the release layer): a sha256 of every file and
    # nothing else, so no file needs routing.
    table_only = hash_all and not blobs and plan.max_kept_bytes <= 0 and not plan.native_names
    take, feed = stream.take, stream.feed
    offload_at = pool.min_bytes  # the hasher takes files from this size (0: none)
    prepare_at = PREPARE_BYTES
    while True:
        if stream.total >= prepare_at:
            pool.prepare()
            prepare_at = plan.max_total_bytes + 1
        header = take(BLOCK, "a header")
        at = stream.pos - BLOCK
        if header == _ZERO_BLOCK:
            if long_name is not None or long_link is not None or pax is not None:
                raise _corrupt(at, "the archive ends after an extended header, before its entry")
            if not stream.rest_is_zero():
                raise _corrupt(stream.pos, "data follows the end-of-archive marker")
            break
        magic = header[257:265]
        posix = magic[:6] == _POSIX_MAGIC
        if not posix and magic != _GNU_MAGIC:
            raise _corrupt(at, "not a ustar, pax or GNU tar header" if at else "not a tar stream")
        usual = _USUAL_NUMBERS.match(header, 100, 157)
        if usual is not None:  # octal with one NUL each: mode, uid, gid, size, (mtime), checksum
            mode_text, uid_text, gid_text, size_text, sum_text = usual.groups()
            size, checksum = int(size_text, 8), int(sum_text, 8)
        else:
            mode_text = uid_text = gid_text = None
            size, checksum = _number(header[124:136], at, "size"), _number(header[148:156], at, "checksum")
        if checksum != _unsigned_sum(header) and checksum != _signed_sum(header):
            raise _corrupt(at, "the header checksum does not match")
        kind = header[156:157]
        if size < 0:
            raise _corrupt(at, f"negative size {size}")
        padded = -size % BLOCK
        if kind in (b"x", b"X", b"g", b"L", b"K"):
            if size > _META_CAP:
                raise _corrupt(at, f"an extended header of {size} bytes")
            data = take(size, "an extended header")
            feed(padded, None, "an extended header")
            if kind == b"L" or kind == b"K":
                if (long_name if kind == b"L" else long_link) is not None:
                    raise _corrupt(at, "two GNU long-name headers for one entry")
                if kind == b"L":
                    long_name = _text(data)
                else:
                    long_link = _text(data)
                continue
            records = _pax_records(data, at)
            if any(k.startswith("GNU.sparse.") for k in records):
                raise _corrupt(at, "a GNU sparse file (never in an image export)")
            if kind == b"g":
                bad = [k for k in _PAX_ENTRY_KEYS if k in records]
                if bad:
                    raise _corrupt(at, f"a global pax header sets {', '.join(bad)} for every entry")
                continue
            if pax is not None:
                raise _corrupt(at, "two pax extended headers for one entry")
            pax = records
            continue
        # An entry: its name, link target and size, with any extended header applied.
        name = _text(header[0:100])
        if posix and header[345] != 0:
            name = _text(header[345:500]) + "/" + name
        regular = kind in _REGULAR
        link = "" if regular and long_link is None and pax is None else _text(header[157:257])
        if uid_text is not None and gid_text is not None:
            uid, gid = int(uid_text, 8), int(gid_text, 8)
        else:
            uid, gid = _number(header[108:116], at, "uid"), _number(header[116:124], at, "gid")
        if pax is not None:
            if "path" in pax:
                if long_name is not None:
                    raise _corrupt(at, "both a pax path and a GNU long name")
                name = pax["path"]
            if "linkpath" in pax:
                if long_link is not None:
                    raise _corrupt(at, "both a pax linkpath and a GNU long link")
                link = pax["linkpath"]
            size = _pax_number(pax, "size", at, size)
            padded = -size % BLOCK
            uid = _pax_number(pax, "uid", at, uid)
            gid = _pax_number(pax, "gid", at, gid)
        if long_name is not None:
            name = long_name
        if long_link is not None:
            link = long_link
        long_name = long_link = pax = None
        if kind == b"\x00" and name.endswith("/"):
            kind = b"5"  # a v7 directory
            regular = False
        if not regular:
            if kind not in (b"1", b"2", b"5") and kind not in _OTHER_KINDS:
                what = "a GNU sparse file" if kind == b"S" else f"unknown entry type {kind!r}"
                raise _corrupt(at, f"{what} ({name[:200]!r}): its data cannot be accounted for")
            if size:
                raise _corrupt(
                    at, f"a non-file entry ({name[:200]!r}, type {kind!r}) carries {size} bytes of data"
                )
            if kind == b"5":
                name = name.rstrip("/")
        mode = (int(mode_text, 8) if mode_text is not None else _number(header[100:108], at, "mode")) & 0o7777
        path = safe_member_path(name)
        if path is None:
            if len(inv.refused) < 1000:
                inv.refused.append(name[:300])
            if regular:
                feed(size + padded, None, name[:200])
            continue
        if len(files) >= max_entries:
            raise ExportAborted(f"the image's filesystem has more than {max_entries} paths")
        if regular:
            if size > max_file_bytes and stop_at_too_large:
                inv.too_large.append(path)
                raise ExportAborted(
                    f"{path} is {size} bytes, over the per-file limit of {max_file_bytes} bytes:"
                    " reading stopped at its header (not verified; its bytes were not streamed)"
                )
            entry = FileEntry(path, "file", size, None, None, None, None, mode, uid, gid)
            files[path] = entry
            inv.total_bytes += size
            if table_only:
                root, keep, native = None, False, False
            else:
                root, keep, native = router.route(path)
                if root is not None and not hash_all and _bytecode(path):
                    root = None  # no reference hash exists for byte-code; ownership needs no bytes
            if (
                (root is not None or hash_all)
                and not keep
                and not native
                and size <= max_file_bytes
                and not path.startswith(md5_prefixes)
            ):
                # hashes and nothing else (most files): what _Sink would do, without building one
                inv.hashed_bytes += size
                want_blob = blobs and root is not None and path.endswith(".py")
                if offload_at and size >= offload_at and pool.begin(size, want_blob, _digests_into(entry)):
                    feed(size, pool.write, path)
                    pool.end()
                    feed(padded, None, path)
                    continue
                sha = hashlib.sha256()
                blob = hashlib.sha1(b"blob %d\0" % size) if want_blob else None
                stream.feed_hashes(size, padded, sha, blob, path)
                entry.sha256 = sha.digest()
                if blob is not None:
                    entry.blob = blob.hexdigest()
            elif root is not None or keep or hash_all:
                sink = _Sink(
                    size,
                    path=path,
                    plan=plan,
                    inv=inv,
                    keep=keep,
                    native=native,
                    hash_it=root is not None or hash_all,
                    blob_it=blobs and root is not None,
                )
                try:
                    feed(size, sink.update, path)
                    sink.finish(path, size, inv, entry)
                finally:
                    sink.close()
                feed(padded, None, path)
            else:
                feed(size + padded, None, path)
        elif kind == b"2":
            files[path] = FileEntry(path, "symlink", link=link, mode=mode, uid=uid, gid=gid)
        elif kind == b"1":
            target = safe_member_path(link)
            original = files.get(target) if target else None
            if target is None or original is None:
                inv.refused.append(name[:300])
                continue
            sha256 = original.sha256  # read once: the hashing thread may set it meanwhile
            files[path] = FileEntry(
                path, "file", original.size, None, sha256, original.blob, original.md5, mode, uid, gid
            )
            if original.kind == "file" and sha256 is None:
                pending_links.append((files[path], original))  # the hashing thread may still be hashing it
            if target in inv.contents:
                inv.contents[path] = inv.contents[target]
        elif kind == b"5":
            files[path] = FileEntry(path, "dir", mode=mode, uid=uid, gid=gid)
        else:
            other = _OTHER_KINDS[kind]
            device = None
            if other != "fifo":
                device = (
                    f"{_number(header[329:337], at, 'devmajor')}:{_number(header[337:345], at, 'devminor')}"
                )
            files[path] = FileEntry(path, other, link=device, mode=mode, uid=uid, gid=gid)
    return inv


def _walk_directory(
    root: str, plan: ReadPlan, inv: Inventory
) -> list[tuple[str, str, FileEntry, bool, bool, bool]]:
    """Every entry under ``root`` into ``inv`` (as if ``root`` were ``/``); the files to read, as jobs."""
    router = _Router(plan)
    jobs: list[tuple[str, str, FileEntry, bool, bool, bool]] = []
    stack = [(os.path.abspath(root), "")]
    while stack:
        real_dir, virtual_dir = stack.pop()
        with os.scandir(real_dir) as listing:
            for item in listing:
                path = f"{virtual_dir}/{item.name}"
                if item.is_symlink():
                    inv.files[path] = FileEntry(path, "symlink", link=os.readlink(item.path))
                elif item.is_dir(follow_symlinks=False):
                    inv.files[path] = FileEntry(path, "dir")
                    stack.append((item.path, path))
                elif item.is_file(follow_symlinks=False):
                    size = item.stat(follow_symlinks=False).st_size
                    entry = FileEntry(path, "file", size)
                    inv.files[path] = entry
                    inv.total_bytes += size
                    py_root, keep, native = router.route(path)
                    if py_root is not None and _bytecode(path):
                        py_root = None
                    if py_root is not None or keep:
                        jobs.append((item.path, path, entry, keep, native, py_root is not None))
                else:
                    inv.files[path] = FileEntry(path, "other")
    return jobs


def inventory_from_directory(root: str, plan: ReadPlan, *, workers: int | None = None) -> Inventory:
    """The same table for a directory on this machine (the benchmark's installed environment).

    Paths are reported as if ``root`` were ``/``. Symlinks are recorded, never followed.
    Files are hashed on a small thread pool: hashlib releases the GIL on large buffers,
    so hashing runs on every core while one thread walks the tree.
    """
    inv = Inventory()
    jobs = _walk_directory(root, plan, inv)

    def run(job: tuple[str, str, FileEntry, bool, bool, bool]) -> None:
        real, path, entry, keep, native, hash_it = job
        with open(real, "rb", buffering=0) as handle:
            _consume(
                handle.read,
                entry.size,
                path=path,
                plan=plan,
                inv=inv,
                entry=entry,
                keep=keep,
                native=native,
                hash_it=hash_it,
            )

    # Big files first, so one large file does not end up alone on one thread at the end. Each
    # thread takes the next job from one shared iterator (a list iterator's next() is atomic under
    # the GIL): one future per thread, not one per file (15,000 futures cost more than the hashing).
    jobs.sort(key=lambda job: job[2].size, reverse=True)
    pending = iter(jobs)

    def drain() -> None:
        for job in pending:
            run(job)

    threads = workers or min(8, os.cpu_count() or 2)
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for future in [pool.submit(drain) for _ in range(threads)]:
            future.result()
    inv.hashed_bytes = sum(e.size for e in inv.files.values() if e.sha256 is not None)
    return inv
