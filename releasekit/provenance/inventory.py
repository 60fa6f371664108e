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
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from releasekit.fatbin import FatbinReport, read_fatbin
from releasekit.provenance.hasher import Hasher, HashingError
from releasekit.provenance.hashthread import HashThread
from releasekit.provenance.tarstream import OTHER_KINDS, Buffer, ExportAborted, TarStream

CHUNK = 1024 * 1024
THREAD_BYTES = 4 * 1024 * 1024  # a file at least this large is hashed on the hashing thread
PREPARE_BYTES = 64 * 1024 * 1024  # a stream this long gets its hashers ready before a large file arrives
KEEP_CAP = 16 * 1024 * 1024  # metadata files kept in memory (RECORD, METADATA, dpkg lists)
_KEEP_NAMES = {"RECORD", "METADATA", "direct_url.json", "INSTALLER", "top_level.txt", "entry_points.txt"}
# An .egg-info directory's metadata (setuptools' older layout, Debian's python3-* packages): the
# requirements check reads its name, version and requirements.
_EGG_NAMES = {"PKG-INFO", "requires.txt"}


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
    keep_suffixes: tuple[str, ...] = (".pth", "_version.py", "version.py", "customize.py", ".egg-info")
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
                and (
                    (in_dist_info and name in _KEEP_NAMES)
                    or name.endswith(plan.keep_suffixes)
                    or (name in _EGG_NAMES and directory.endswith(".egg-info"))
                )
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
    stream = TarStream(chunks, plan.max_total_bytes, plan.deadline)
    files = inv.files
    max_file_bytes, hash_all, max_entries = plan.max_file_bytes, plan.hash_all, plan.max_entries
    stop_at_too_large = plan.stop_at_too_large
    blobs = plan.extra_digests
    md5_prefixes = plan.md5_prefixes if blobs else ()
    router = _Router(plan)
    # An accounting table (the locked base, the release layer): a sha256 of every file and
    # nothing else, so no file needs routing.
    table_only = hash_all and not blobs and plan.max_kept_bytes <= 0 and not plan.native_names
    feed = stream.feed
    offload_at = pool.min_bytes  # the hasher takes files from this size (0: none)
    prepare_at = PREPARE_BYTES
    while True:
        if stream.total >= prepare_at:
            pool.prepare()
            prepare_at = plan.max_total_bytes + 1
        member = stream.next_member()
        if member is None:
            break
        name, kind, regular, size, padded, link, mode, uid, gid, device = member
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
            files[path] = FileEntry(path, OTHER_KINDS[kind], link=device, mode=mode, uid=uid, gid=gid)
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
