"""Repositories whose configuration releasekit wrote in this process: the only places git runs.

A git process reads the configuration of the repository it runs in (``config``, the files it
includes, ``info/attributes``, ``commondir``), and several keys there make git run a program:
``core.alternateRefsCommand``, ``core.sshCommand``, ``core.fsmonitor``, ``diff.external``,
drivers, ``credential.helper``, ``remote.*.uploadpack``, ``include.path`` to more of them. The
mirrors ``build`` leaves in ``$RELEASEKIT_CACHE/git`` and the ``--mirror`` copies are written by
whoever can write there, so releasekit never runs git inside them. It makes a *private*
repository instead (a new temporary directory, ``config``, ``HEAD`` and ``packed-refs`` written
here) that borrows the untrusted repository's objects through ``objects/info/alternates``, and
copies that repository's refs as data:

- ``checked_object_dirs``: the object directory and every one it borrows from, each a
  directory (a link resolved, and leading to one), each ``info/alternates`` a regular file read
  with a bound (a FIFO or a device there would hang git), at most ``MAX_OBJECT_DIRS`` of them;
- ``read_refs`` / ``read_head``: ``packed-refs`` and loose refs parsed here (regular files,
  bounded, names checked like ``git check-ref-format``, values object ids), never by a git
  process in that repository;
- ``write_refs``: how releasekit stores refs into a cache entry (``packed-refs``, whole file),
  so the next process reads them the same way.

Objects are data whose names are their hashes: what a locked commit is made of is hashed
against its name before it is used (``git/objects.py``); the private configuration turns off the
object indexes git would trust without hashing (commit-graph, multi-pack-index).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
import weakref
from collections.abc import Mapping
from pathlib import Path

from releasekit import atomic
from releasekit.bounded_read import MIB, UnsafeFileError, check_regular, kind_of, read_bounded
from releasekit.errors import InputError
from releasekit.git.runner import Git

# git itself follows alternates five levels deep; a handful of directories is what a mirror needs.
MAX_OBJECT_DIRS = 16
# Loose objects and packs of one object directory (a mirror that was never repacked: some hundred thousand).
MAX_OBJECT_FILES = 2_000_000
ALTERNATES_MAX_BYTES = 64 * 1024
# A forge mirror with every pull request's head holds some hundred thousand refs (~10 MiB); a
# 255 MiB packed-refs took 2.6 GB to read (issue 43), so the caps are a few times the real size.
PACKED_REFS_MAX_BYTES = 32 * MIB
MAX_REFS = 500_000
LOOSE_REF_MAX_BYTES = 4096
# A work tree's index (a vLLM checkout's is a few MiB).
INDEX_MAX_BYTES = 1024 * MIB
MAX_LOOSE_REFS = MAX_REFS
_OID = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_BAD_REF = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")

# The whole configuration of a private repository. Besides the layout: no automatic gc or
# maintenance (nothing rewrites borrowed objects), and no commit-graph or multi-pack-index, which
# git would believe about parents and object offsets without hashing anything.
PRIVATE_CONFIG = (
    "[core]\n"
    "\trepositoryformatversion = 0\n"
    "\tfilemode = true\n"
    "\tbare = true\n"
    "\tcommitGraph = false\n"
    "\tmultiPackIndex = false\n"
    "[gc]\n"
    "\tauto = 0\n"
    "[maintenance]\n"
    "\tauto = false\n"
    "[uploadpack]\n"
    "\tallowAnySHA1InWant = true\n"
)


def valid_ref_name(name: str) -> bool:
    """What ``git check-ref-format`` accepts under ``refs/`` (and nothing that reads as an option)."""
    if not name.startswith("refs/") or len(name) > 1024 or _BAD_REF.search(name):
        return False
    if ".." in name or "@{" in name or "//" in name or name.endswith(("/", ".", ".lock")):
        return False
    return not any(part.startswith(".") or part.endswith(".lock") for part in name.split("/"))


def _is_real_dir(path: Path) -> bool:
    """A directory itself, not a link to one (where releasekit walks or deletes)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _is_dir(path: Path) -> bool:
    """A directory, or a link to one (a snapshot's ``objects`` may be a link into a shared store)."""
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except OSError:
        return False


def checked_object_dirs(objects: Path, where: str) -> list[Path]:
    """``objects`` and the object directories it borrows (``info/alternates``, recursively), checked.

    Each is a directory (a link is resolved, and must lead to one); each ``info/alternates`` is a
    regular file of at most ``ALTERNATES_MAX_BYTES`` (a FIFO or a device there would hang git). An ``objects`` that does not exist gives ``[]`` (a cache
    entry not made yet); anything else wrong is an InputError naming ``where``.
    """
    if not os.path.lexists(objects):
        return []
    found: list[Path] = []
    todo = [Path(os.path.abspath(objects))]
    while todo:
        named = todo.pop(0)
        if not os.path.lexists(named) and found:
            continue  # a borrowed directory that is gone: git skips it too, and so a lost object fails when read
        if not _is_dir(named):
            raise InputError(f"{where}: object directory {named} is not a directory")
        here = Path(os.path.realpath(named))  # a loop through links is seen as the same directory
        if here in found:
            continue
        if len(found) == MAX_OBJECT_DIRS:
            raise InputError(
                f"{where}: more than {MAX_OBJECT_DIRS} object directories through info/alternates"
            )
        found.append(here)
        _check_object_files(here, where)
        listing = here / "info" / "alternates"
        if not os.path.lexists(listing):
            continue
        try:
            text = read_bounded(listing, ALTERNATES_MAX_BYTES).decode("utf-8")
        except UnsafeFileError as exc:
            raise InputError(f"{where}: {exc}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"{where}: cannot read {listing}: {type(exc).__name__}") from None
        for line in text.splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                todo.append(Path(os.path.normpath(here / line)))
    return found


def _check_object_files(objects: Path, where: str) -> None:
    """Every file git may open in the object directory ``objects`` (loose objects, packs and their
    indexes, ``multi-pack-index``, commit-graphs, ``info/*``) is a regular file, or a link to one:
    looked at with ``stat``, never opened (a FIFO in place of a pack ``.idx`` or a loose object
    hung git, issue 43). Three levels are all git reads (``pack/``, ``info/commit-graphs/``)."""
    todo, seen = [(objects, 0)], 0
    while todo:
        directory, depth = todo.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                seen += 1
                if seen > MAX_OBJECT_FILES:
                    raise InputError(f"{where}: more than {MAX_OBJECT_FILES} files in {objects}")
                if entry.is_dir(follow_symlinks=False):
                    if depth < 2:
                        todo.append((Path(entry.path), depth + 1))
                    continue
                try:
                    mode = os.stat(entry.path).st_mode
                except OSError:
                    continue  # a dangling link: git cannot open it either
                if not stat.S_ISREG(mode) and not (depth == 0 and stat.S_ISDIR(mode)):
                    raise InputError(f"{where}: {entry.path}: {kind_of(mode)}, not a regular file; refused")


# The control files git opens whole with a blocking ``open()``: a FIFO there would hang it, a link to
# /dev/zero make it read forever. A real one is far below these (packed-refs of a big fork: tens of MiB).
CONTROL_FILES = {
    "HEAD": LOOSE_REF_MAX_BYTES,
    "config": MIB,
    "commondir": LOOSE_REF_MAX_BYTES,
    "packed-refs": PACKED_REFS_MAX_BYTES,
    "shallow": LOOSE_REF_MAX_BYTES * 256,
}


def check_git_dir(gitdir: Path, where: str) -> None:
    """Before anything opens ``gitdir`` (a cache entry, a ``--mirror``): its control files regular and
    bounded (looked at with ``lstat``, never opened) and its object directories checked."""
    for name, limit in CONTROL_FILES.items():
        path = gitdir / name
        if os.path.lexists(path):
            try:
                check_regular(path, limit=limit)
            except UnsafeFileError as exc:
                raise InputError(f"{where}: {exc}") from None
            except OSError as exc:
                raise InputError(f"{where}: cannot read {path}: {type(exc).__name__}") from None
    checked_object_dirs(gitdir / "objects", where)


def git_dir_of(source: Path, where: str) -> Path:
    """The git directory of a repository on disk: the path itself (bare) or its ``.git`` directory."""
    for candidate in (source, source / ".git"):
        if _is_dir(candidate) and (candidate / "HEAD").is_file() and _is_dir(candidate / "objects"):
            return candidate
    raise InputError(f"{where}: {source} is not a git repository (bare or with a .git directory)")


def _read_small(path: Path, limit: int, where: str) -> str | None:
    """A regular file's text (None when absent), refused when it is anything else or over ``limit``."""
    if not os.path.lexists(path):
        return None
    try:
        return read_bounded(path, limit).decode("utf-8")
    except UnsafeFileError as exc:
        raise InputError(f"{where}: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{where}: cannot read {path}: {type(exc).__name__}") from None


def _read_bytes(path: Path, limit: int, where: str) -> bytes | None:
    """A regular file's bytes (None when absent), refused when it is anything else or over ``limit``."""
    if not os.path.lexists(path):
        return None
    try:
        return read_bounded(path, limit)
    except UnsafeFileError as exc:
        raise InputError(f"{where}: {exc}") from None
    except OSError as exc:
        raise InputError(f"{where}: cannot read {path}: {type(exc).__name__}") from None


def _loose_refs(gitdir: Path, where: str) -> dict[str, str]:
    """Loose refs under ``refs/``: regular files holding an object id (symbolic refs are skipped)."""
    found: dict[str, str] = {}
    top = gitdir / "refs"
    if not _is_real_dir(top):
        return found
    todo = [(top, "refs")]
    seen = 0
    while todo:
        directory, prefix = todo.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                seen += 1
                if seen > MAX_LOOSE_REFS:
                    raise InputError(f"{where}: more than {MAX_LOOSE_REFS} entries under refs/")
                name = f"{prefix}/{entry.name}"
                if entry.is_dir(follow_symlinks=False):
                    if name.count("/") < 64:
                        todo.append((Path(entry.path), name))
                    continue
                if not entry.is_file(follow_symlinks=False) or not valid_ref_name(name):
                    continue  # a lock file, a link, a FIFO: never opened
                text = _read_small(Path(entry.path), LOOSE_REF_MAX_BYTES, where) or ""
                value = text.strip()
                if _OID.match(value):
                    found[name] = value
    return found


def read_refs(gitdir: Path, where: str) -> dict[str, str]:
    """Every ref of the repository at ``gitdir`` (``packed-refs``, then loose refs over them): name -> id.

    Read as data: nothing runs in that repository. Names git would refuse and values that are
    no object id are left out; a ``reftable`` repository is refused (its refs are not files).
    """
    if os.path.lexists(gitdir / "reftable"):
        raise InputError(f"{where}: {gitdir} keeps its refs in a reftable; releasekit reads files refs only")
    refs: dict[str, str] = {}
    packed = _read_small(gitdir / "packed-refs", PACKED_REFS_MAX_BYTES, where) or ""
    if packed.count("\n") > MAX_REFS:
        raise InputError(f"{where}: {gitdir / 'packed-refs'} holds more than {MAX_REFS} refs; refused")
    for line in packed.splitlines():
        if not line or line[0] in "#^":
            continue
        oid, _, name = line.partition(" ")
        if _OID.match(oid) and valid_ref_name(name):
            refs[name] = oid
    refs.update(_loose_refs(gitdir, where))
    return refs


def read_head(gitdir: Path, where: str) -> str | None:
    """What ``HEAD`` names: a branch (``refs/heads/…``), an object id (detached) or None."""
    text = (_read_small(gitdir / "HEAD", LOOSE_REF_MAX_BYTES, where) or "").strip()
    if text.startswith("ref: "):
        target = text[5:].strip()
        return target if target.startswith("refs/heads/") and valid_ref_name(target) else None
    return text if _OID.match(text) else None


def read_shallow(gitdir: Path, where: str) -> list[str]:
    """The commits ``gitdir``'s ``shallow`` file names (roots whose parents it lacks), read as data."""
    text = _read_small(gitdir / "shallow", CONTROL_FILES["shallow"], where) or ""
    roots = text.split()
    bad = next((root for root in roots if not _OID.match(root)), None)
    if bad is not None:
        raise InputError(f"{where}: {gitdir / 'shallow'} names {bad[:80]!r}, not an object id")
    return sorted(set(roots))


def write_shallow(gitdir: Path, roots: list[str]) -> None:
    """Store ``roots`` as ``gitdir``'s ``shallow`` file (none when empty)."""
    path = gitdir / "shallow"
    if roots:
        atomic.write_bytes(path, "".join(f"{root}\n" for root in sorted(set(roots))).encode())
    elif os.path.lexists(path):
        path.unlink()


def _packed_refs_text(refs: Mapping[str, str]) -> bytes:
    # Sorted by bytes, as the "sorted" trait promises; no peeled lines (git peels tags itself).
    lines = [f"{oid} {name}\n" for name, oid in sorted(refs.items(), key=lambda item: item[0].encode())]
    return ("# pack-refs with: sorted \n" + "".join(lines)).encode()


def _head_text(head: str | None) -> bytes:
    if head is not None and _OID.match(head):
        return f"{head}\n".encode()
    return f"ref: {head or 'refs/heads/main'}\n".encode()


def write_refs(gitdir: Path, refs: Mapping[str, str], head: str | None) -> None:
    """Store ``refs`` (and ``head``, when given) into the repository at ``gitdir`` as plain files.

    One ``packed-refs`` replaces the whole set, then the loose refs (which would shadow it) go:
    how releasekit keeps a cache entry's refs without running git there.
    """
    atomic.write_bytes(gitdir / "packed-refs", _packed_refs_text(refs))
    top = gitdir / "refs"
    if _is_real_dir(top):
        for child in sorted(top.iterdir()):
            if _is_real_dir(child):
                shutil.rmtree(child)
            else:
                child.unlink()
    for sub in ("heads", "tags"):
        (top / sub).mkdir(parents=True, exist_ok=True)
    if head is not None:
        atomic.write_bytes(gitdir / "HEAD", _head_text(head))


MAX_SHALLOW_ROOTS = 10_000


def _present(git: Git, oids: list[str]) -> set[str]:
    """The commits among ``oids`` that the repository holds (one ``cat-file --batch-check``)."""
    out = git.run("cat-file", "--batch-check", input="".join(f"{o}\n" for o in oids).encode())
    return {parts[0] for parts in (line.split() for line in out.splitlines()) if parts[1:2] == ["commit"]}


def true_roots(gitdir: Path, roots: list[str]) -> list[str]:
    """Of ``roots``, those a shallow list may name: commits present with a parent absent (what a
    history-less bundle leaves, git/bundle.py). ``gitdir`` is a private repository of this process
    with no ``shallow`` file; whatever ``shallow`` file a mirror or cache entry holds, only these
    roots reach git."""
    wanted = sorted(set(roots))
    if not wanted:
        return []
    if len(wanted) > MAX_SHALLOW_ROOTS:
        raise InputError(f"{gitdir}: more than {MAX_SHALLOW_ROOTS} shallow roots")
    git = Git(gitdir, bare=True)
    present = sorted(_present(git, wanted))
    if not present:
        return []
    listed = git.run(
        "rev-list",
        "--no-walk=unsorted",
        "--parents",
        "--stdin",
        input="".join(f"{c}\n" for c in present).encode(),
    )
    parents = {line.split()[0]: line.split()[1:] for line in listed.splitlines() if line.strip()}
    every = sorted({p for ps in parents.values() for p in ps})
    held = _present(git, every) if every else set()
    return [c for c in present if any(p not in held for p in parents.get(c, []))]


class PrivateRepo:
    """A bare repository in a new temporary directory: configuration, HEAD and refs written here,
    objects borrowed from checked object directories. Removed when garbage-collected or at exit."""

    def __init__(
        self,
        object_dirs: list[Path],
        refs: Mapping[str, str],
        head: str | None,
        shallow: list[str] | None = None,
    ) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="releasekit-git-"))
        self._cleanup = weakref.finalize(self, shutil.rmtree, self.path, True)
        (self.path / "objects" / "pack").mkdir(parents=True)
        (self.path / "config").write_text(PRIVATE_CONFIG, encoding="utf-8")
        self.object_dirs: list[Path] = []
        self._fill(object_dirs, refs, head, shallow or [])

    def _fill(
        self, object_dirs: list[Path], refs: Mapping[str, str], head: str | None, shallow: list[str]
    ) -> None:
        self.object_dirs = list(object_dirs)
        (self.path / "objects" / "info").mkdir(exist_ok=True)
        listing = "".join(f"{d}\n" for d in self.object_dirs)
        (self.path / "objects" / "info" / "alternates").write_text(listing, encoding="utf-8")
        shutil.rmtree(self.path / "refs", ignore_errors=True)
        for sub in ("refs/heads", "refs/tags"):
            (self.path / sub).mkdir(parents=True)
        (self.path / "packed-refs").write_bytes(_packed_refs_text(refs))
        (self.path / "HEAD").write_bytes(_head_text(head))
        # A history-less bundle's commit is a shallow root (git/bundle.py): without the list,
        # git would walk into parents the objects do not hold. Only such roots are kept: a root
        # whose parents are there would cut the history short (a planted ``shallow``, issue 43).
        write_shallow(self.path, [])
        write_shallow(self.path, true_roots(self.path, shallow))

    @staticmethod
    def _read(gitdir: Path, where: str) -> tuple[list[Path], dict[str, str], str | None, list[str]]:
        if not os.path.lexists(gitdir):
            return [], {}, None, []
        objects = checked_object_dirs(gitdir / "objects", where)
        return objects, read_refs(gitdir, where), read_head(gitdir, where), read_shallow(gitdir, where)

    @classmethod
    def of(cls, gitdir: Path, where: str) -> PrivateRepo:
        """A private repository with the objects and refs of the (untrusted) repository ``gitdir``."""
        return cls(*cls._read(gitdir, where))

    def refresh(self, gitdir: Path, where: str) -> None:
        """Copy ``gitdir``'s objects list and refs again, in place (a ``Git`` made earlier stays valid)."""
        self._fill(*self._read(gitdir, where))

    def remove(self) -> None:
        self._cleanup()


# The configuration of a repository read in place, copied into its private repository as data:
# ``git config --file`` reads it there without following its includes and runs nothing.
THEIR_CONFIG = "config.theirs"
_IN_PLACE: list[PrivateRepo] = []


def _linked_git_dir(directory: Path, where: str) -> tuple[Path, Path] | None:
    """(git directory, common directory) of a linked work tree, whose ``.git`` is a ``gitdir:`` file."""
    text = (
        _read_small(directory / ".git", LOOSE_REF_MAX_BYTES, where)
        if (directory / ".git").is_file()
        else None
    )
    if not text or not text.startswith("gitdir: "):
        return None
    gitdir = Path(os.path.normpath(directory / text[len("gitdir: ") :].strip()))
    common = gitdir
    pointer = _read_small(gitdir / "commondir", LOOSE_REF_MAX_BYTES, where)
    if pointer:
        common = Path(os.path.normpath(gitdir / pointer.strip()))
    return gitdir, common


def read_in_place(directory: Path, where: str) -> PrivateRepo:
    """A repository on disk that the user named (``--repo DIR``: a work tree or a bare repository),
    read through a private repository: its objects borrowed, its refs, HEAD and configuration copied.

    Work-tree files are not part of it: what is read is commits (``rev-parse``, ``log``, ``ls-tree``,
    ``cat-file``), as every reader of ``--repo`` does.
    """
    linked = _linked_git_dir(directory, where)
    if linked is not None:
        gitdir, common = linked
        if not (_is_dir(common / "objects") and (gitdir / "HEAD").is_file()):
            raise InputError(f"{where}: {directory} is not a git repository (bare or with a .git directory)")
    else:
        gitdir = common = git_dir_of(directory, where)
    refs = read_refs(common, where)
    if common != gitdir:
        refs.update(read_refs(gitdir, where))  # a linked work tree's own refs (bisect, worktree refs)
    view = PrivateRepo(
        checked_object_dirs(common / "objects", where),
        refs,
        read_head(gitdir, where),
        read_shallow(common, where),
    )
    theirs = _read_small(common / "config", PACKED_REFS_MAX_BYTES, where)
    (view.path / THEIR_CONFIG).write_text(theirs or "", encoding="utf-8")
    # What ``git status`` of the work tree needs besides objects: its index and excludes, as data.
    index = _read_bytes(gitdir / "index", INDEX_MAX_BYTES, where)
    if index is not None:
        (view.path / "index").write_bytes(index)
        # git trusts an entry's stat data only when it is older than the index file ("racily
        # clean"): the copy keeps the original's time, so an edit made in the same second shows.
        st = os.lstat(gitdir / "index")
        os.utime(view.path / "index", ns=(st.st_atime_ns, st.st_mtime_ns))
    exclude = _read_small(common / "info" / "exclude", PACKED_REFS_MAX_BYTES, where)
    if exclude is not None:
        (view.path / "info").mkdir(exist_ok=True)
        (view.path / "info" / "exclude").write_text(exclude, encoding="utf-8")
    _IN_PLACE.append(view)  # kept for the process: its ``Git`` may be handed anywhere
    return view
