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
import posixpath
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from releasekit.fatbin import FatbinReport, read_fatbin

CHUNK = 1024 * 1024
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
    max_file_bytes: int = 8 * 1024**3
    max_total_bytes: int = 256 * 1024**3
    deadline: float | None = None  # time.monotonic() value
    # Full-image accounting: a sha256 of every regular file, not only those under the Python roots.
    hash_all: bool = False
    max_kept_bytes: int = 128 * 1024 * 1024  # all kept metadata files together (the rest is not kept)
    max_entries: int = 5_000_000  # paths in the table

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
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        return None
    return "/" + "/".join(parts)


class _ChunkReader:
    """A forward-only file object over an iterator of byte chunks.

    tarfile's stream mode re-slices its whole buffer on every read (quadratic in its block
    size), so the tar is read in plain mode over this reader: it answers ``tell`` and seeks
    forward (skipping) or back within the current chunk, which is all tarfile does when each
    member's data is read in order. Reads slice the current chunk; whole chunks pass uncopied.
    """

    def __init__(self, chunks: Iterable[bytes], plan: ReadPlan) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._plan = plan
        self._cur = b""
        self._off = 0
        self.total = 0  # bytes received from the stream
        self.pos = 0  # bytes consumed

    def _next(self) -> bool:
        try:
            chunk = next(self._chunks)
        except StopIteration:
            return False
        self.total += len(chunk)
        if self.total > self._plan.max_total_bytes:
            raise ExportAborted(f"the image's filesystem exceeds {self._plan.max_total_bytes} bytes")
        if self._plan.deadline is not None and time.monotonic() > self._plan.deadline:
            raise ExportAborted("reading the image's filesystem ran past its time limit")
        self._cur, self._off = chunk, 0
        return True

    def read(self, size: int = -1) -> bytes:
        need = size if size >= 0 else 1 << 62
        parts: list[bytes] = []
        got = 0
        while got < need:
            avail = len(self._cur) - self._off
            if avail <= 0:
                if not self._next():
                    break
                continue
            take = min(avail, need - got)
            if self._off == 0 and take == len(self._cur):
                parts.append(self._cur)
            else:
                parts.append(self._cur[self._off:self._off + take])
            self._off += take
            got += take
        self.pos += got
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def tell(self) -> int:
        return self.pos

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        target = offset if whence == 0 else self.pos + offset
        if whence not in (0, 1):
            raise OSError("a stream cannot seek from its end")
        if target < self.pos:
            back = self.pos - target
            if back > self._off:
                raise OSError("a stream cannot seek back past its current chunk")
            self._off -= back
            self.pos = target
            return target
        while self.pos < target:
            avail = len(self._cur) - self._off
            if avail <= 0:
                if not self._next():
                    break
                continue
            step = min(avail, target - self.pos)
            self._off += step
            self.pos += step
        return self.pos


def _wants_keep(path: str, plan: ReadPlan, in_root: bool) -> bool:
    name = posixpath.basename(path)
    if in_root and (name in _KEEP_NAMES and ".dist-info/" in path):
        return True
    if in_root and name.endswith(plan.keep_suffixes):
        return True
    if name in ("sitecustomize.py", "usercustomize.py"):
        return True
    if path == "/var/lib/dpkg/status":
        return True
    return path.startswith("/var/lib/dpkg/info/") and name.endswith((".list", ".md5sums"))


def _bytecode(path: str) -> bool:
    return path.endswith(".pyc") and "/__pycache__/" in path


def _is_native(path: str, root: str, plan: ReadPlan) -> bool:
    if not (path.endswith(".so") or ".so." in posixpath.basename(path)):
        return False
    top = path[len(root) + 1:].split("/", 1)[0]
    top = top.split(".", 1)[0]
    return top in plan.native_names


def _consume(read: Callable[[int], bytes], size: int, *, path: str, plan: ReadPlan, inv: Inventory,
             entry: FileEntry, keep: bool, native: bool, hash_it: bool, blob_it: bool = True) -> None:
    if hash_it and size > plan.max_file_bytes:
        inv.too_large.append(path)
        hash_it = keep = native = False
    sha = hashlib.sha256() if hash_it else None
    blob = None
    if hash_it and blob_it and path.endswith(".py"):
        blob = hashlib.sha1(b"blob %d\0" % size)  # git's object id of the file's bytes
    md5 = hashlib.md5() if hash_it and path.startswith(plan.md5_prefixes) else None  # noqa: S324 - dpkg's format
    if keep and inv.kept_bytes + size > plan.max_kept_bytes:
        if not any(m.startswith("kept-bytes") for m in inv.limits):
            inv.limits.append(f"kept-bytes: metadata files above {plan.max_kept_bytes} bytes in all were not kept "
                              f"(first: {path})")
        keep = False
    kept = bytearray() if keep and size <= KEEP_CAP else None
    if kept is not None:
        inv.kept_bytes += size
    spool = tempfile.TemporaryFile() if native else None  # noqa: SIM115 - closed in finally
    try:
        remaining = size
        while remaining > 0:
            data = read(min(CHUNK, remaining))
            if not data:
                break
            remaining -= len(data)
            if sha is not None:
                sha.update(data)
            if blob is not None:
                blob.update(data)
            if md5 is not None:
                md5.update(data)
            if kept is not None:
                kept.extend(data)
            if spool is not None:
                spool.write(data)
        if sha is not None:
            entry.sha256 = sha.digest()
            inv.hashed_bytes += size  # the directory walk recounts this after its threads finish
        if blob is not None:
            entry.blob = blob.hexdigest()
        if md5 is not None:
            entry.md5 = md5.hexdigest()
        if kept is not None:
            inv.contents[path] = bytes(kept)
        if spool is not None:
            spool.seek(0)
            report = read_fatbin(spool)
            if report is not None:
                inv.fatbins[path] = report
    finally:
        if spool is not None:
            spool.close()


def inventory_from_tar(chunks: Iterable[bytes], plan: ReadPlan) -> Inventory:
    inv = Inventory()
    reader = _ChunkReader(chunks, plan)
    try:
        tar = tarfile.open(fileobj=reader, mode="r:")  # type: ignore[call-overload]  # noqa: SIM115
    except tarfile.TarError as exc:
        raise ExportAborted(f"the image's filesystem is not a tar stream: {exc}") from None
    with tar:
        try:
            while (member := tar.next()) is not None:
                tar.members.clear()  # tarfile keeps every header it read: the inventory is the table
                path = safe_member_path(member.name)
                if path is None:
                    if len(inv.refused) < 1000:
                        inv.refused.append(member.name[:300])
                    continue
                if len(inv.files) >= plan.max_entries:
                    raise ExportAborted(f"the image's filesystem has more than {plan.max_entries} paths")
                mode, uid, gid = member.mode & 0o7777, member.uid, member.gid
                if member.issym():
                    inv.files[path] = FileEntry(path, "symlink", link=member.linkname, mode=mode, uid=uid, gid=gid)
                elif member.islnk():
                    target = safe_member_path(member.linkname)
                    original = inv.files.get(target) if target else None
                    if original is None:
                        inv.refused.append(member.name[:300])
                        continue
                    inv.files[path] = FileEntry(path, "file", original.size, None, original.sha256, original.blob,
                                                original.md5, mode, uid, gid)
                    if target in inv.contents:
                        inv.contents[path] = inv.contents[target]
                elif member.isdir():
                    inv.files[path] = FileEntry(path, "dir", mode=mode, uid=uid, gid=gid)
                elif member.isreg():
                    entry = FileEntry(path, "file", member.size, mode=mode, uid=uid, gid=gid)
                    inv.files[path] = entry
                    inv.total_bytes += member.size
                    root = plan.under_root(path)
                    keep = _wants_keep(path, plan, root is not None)
                    native = root is not None and _is_native(path, root, plan)
                    if root is not None and _bytecode(path) and not plan.hash_all:
                        root = None  # no reference hash exists for byte-code; ownership needs no bytes
                    if root is not None or keep or plan.hash_all:
                        if member.sparse is not None:
                            inv.refused.append(member.name[:300])  # GNU sparse: never in an image export
                            continue
                        reader.seek(member.offset_data)
                        _consume(reader.read, member.size, path=path, plan=plan, inv=inv, entry=entry,
                                 keep=keep, native=native, hash_it=root is not None or plan.hash_all,
                                 blob_it=root is not None)
                else:
                    kind = "chr" if member.ischr() else "blk" if member.isblk() else "fifo" if member.isfifo() else "other"
                    inv.files[path] = FileEntry(path, kind, link=f"{member.devmajor}:{member.devminor}"
                                                if kind in ("chr", "blk") else None, mode=mode, uid=uid, gid=gid)
        except tarfile.TarError as exc:
            raise ExportAborted(f"the image's filesystem stream is corrupt: {exc}") from None
    return inv


def inventory_from_directory(root: str, plan: ReadPlan, *, workers: int | None = None) -> Inventory:
    """The same table for a directory on this machine (the benchmark's installed environment).

    Paths are reported as if ``root`` were ``/``. Symlinks are recorded, never followed.
    Files are hashed on a small thread pool: hashlib releases the GIL on large buffers,
    so hashing runs on every core while one thread walks the tree.
    """
    inv = Inventory()
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
                    py_root = plan.under_root(path)
                    keep = _wants_keep(path, plan, py_root is not None)
                    native = py_root is not None and _is_native(path, py_root, plan)
                    if py_root is not None and _bytecode(path):
                        py_root = None
                    if py_root is not None or keep:
                        jobs.append((item.path, path, entry, keep, native, py_root is not None))
                else:
                    inv.files[path] = FileEntry(path, "other")

    def run(job: tuple[str, str, FileEntry, bool, bool, bool]) -> None:
        real, path, entry, keep, native, hash_it = job
        with open(real, "rb", buffering=0) as handle:
            _consume(handle.read, entry.size, path=path, plan=plan, inv=inv, entry=entry,
                     keep=keep, native=native, hash_it=hash_it)

    # Big files first, so one large file does not end up alone on one thread at the end.
    jobs.sort(key=lambda job: job[2].size, reverse=True)
    with ThreadPoolExecutor(max_workers=workers or min(8, os.cpu_count() or 2)) as pool:
        for _ in pool.map(run, jobs, chunksize=64):
            pass
    inv.hashed_bytes = sum(e.size for e in inv.files.values() if e.sha256 is not None)
    return inv
