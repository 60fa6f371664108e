"""Crash- and concurrency-safe file writes: the one writer, for caches and release directories alike.

A releasekit process may be killed at any instant (SIGKILL, a CI job cancelled, a full
disk), and two releasekit processes may share one ``$RELEASEKIT_CACHE``. The rules every
cache follows, all implemented here:

- **Complete before visible.** A file is written under a temporary name in the same
  directory (``.<name>.<pid>.<random>.tmp``), flushed and fsynced, then ``os.replace``-d
  into place; an entry of several files is a directory written the same way and renamed
  into place whole (``publish_dir``). A killed writer leaves only a temporary name, which
  no reader looks at: a half-written entry is a miss, never a partial file.
- **One lock per entry, not one for the cache.** ``entry_lock(path)`` takes an exclusive
  ``flock`` on ``<path>.lock`` (the kernel drops it when the holder dies, so a killed
  process never leaves a lock behind). Callers hold it around "look up, and on a miss
  make and store": a second process asking for the same entry waits, then finds it.
  Different entries (another wheel, another layer, another git mirror) never wait on
  each other.

``failpoint(name)`` is how the crash tests reach a named instant: with
``RELEASEKIT_TEST_KILL_AT`` naming the point (comma-separated names, ``fnmatch``
patterns) the process SIGKILLs itself there; with ``RELEASEKIT_TEST_PAUSE_AT`` it
sleeps ``RELEASEKIT_TEST_PAUSE_S`` seconds (default 1), which makes two processes
overlap inside the same critical section. Unset, a failpoint does nothing.

Release files (``write_atomic``/``copy_atomic``, which every record, statement, SBOM and
output goes through) are written by the same ``_replace_with``: a target that is a symbolic
link or not a regular file is refused (``UnsafeFileError``, exit 2), and a full disk is a
``NoSpaceError`` (exit 2, one line) with nothing half-written left. Only this module replaces,
renames or links files and fsyncs directories; ``tests/test_architecture.py`` holds it to that.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import fnmatch
import os
import secrets
import shutil
import signal
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from releasekit.bounded_read import UnsafeFileError, kind_of, open_regular
from releasekit.errors import InputError

KILL_ENV = "RELEASEKIT_TEST_KILL_AT"
PAUSE_ENV = "RELEASEKIT_TEST_PAUSE_AT"
PAUSE_SECONDS_ENV = "RELEASEKIT_TEST_PAUSE_S"
_CHUNK = 1024 * 1024


class NoSpaceError(InputError):
    """The file system is full: nothing half-written was left behind."""


def _named(env: str, name: str) -> bool:
    wanted = os.environ.get(env, "")
    return bool(wanted) and any(fnmatch.fnmatchcase(name, p.strip()) for p in wanted.split(",") if p.strip())


def failpoint(name: str) -> None:
    """A named instant the crash tests can kill the process at (or pause it at); nothing otherwise."""
    if _named(PAUSE_ENV, name):
        time.sleep(float(os.environ.get(PAUSE_SECONDS_ENV, "1")))
    if _named(KILL_ENV, name):
        os.kill(os.getpid(), signal.SIGKILL)


def temp_name(dest: Path) -> Path:
    """A temporary name beside ``dest`` (same directory, so same filesystem): unique per writer."""
    return dest.with_name(f".{dest.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def check_writable(path: Path) -> None:
    """Refuse a write target that exists and is a symbolic link or not a regular file."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeFileError(f"{path}: {kind_of(st.st_mode)}, not a regular file; refusing to write there")


def no_space(path: Path) -> NoSpaceError:
    return NoSpaceError(f"no space left on device writing {path} (nothing half-written was left)")


def _replace_with(dest: Path, chunks: Iterator[bytes], *, point: str, mode: int = 0o644) -> Path:
    """The one place a file is replaced: every writer below (and every module's) ends here."""
    check_writable(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_name(dest)
    # O_EXCL | O_NOFOLLOW: a file or link planted under the temporary name is never written through.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        with open(fd, "wb") as fh:
            for index, chunk in enumerate(chunks):
                fh.write(chunk)
                if index == 0:
                    fh.flush()
                    failpoint(f"{point}:{dest.name}")  # killed here: a half-written temporary file
            fh.flush()
            os.fsync(fh.fileno())
        check_writable(dest)  # planted meanwhile: still refused (os.replace would replace a link itself)
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(dest.parent)
    return dest


def write_bytes(dest: Path, data: bytes) -> Path:
    """``dest`` (a cache file) holds exactly ``data`` or what it held before; never a part of either."""
    half = len(data) // 2
    return _replace_with(dest, iter([data[:half], data[half:]]), point="cache-partial")


def copy_file(source: Path, dest: Path) -> Path:
    """``dest`` (a cache file) becomes a complete copy of ``source`` (or stays as it was)."""

    def chunks() -> Iterator[bytes]:
        # The first chunk is at most half the file: a kill after it leaves a partial copy.
        size = min(_CHUNK, max(1, source.stat().st_size // 2))
        with source.open("rb") as fh:
            while chunk := fh.read(size):
                yield chunk
                size = _CHUNK

    return _replace_with(dest, chunks(), point="cache-partial")


# The files this process put in place outside a run's work directory and the temporary directory,
# and the directories its stages committed into: what an interrupt keeps (``kept_so_far``, which the
# CLI's interrupt line names).
_KEPT: list[Path] = []
_COMMITTED: list[Path] = []


def _scratch(path: Path) -> bool:
    """A run's work directory, or one of releasekit's own temporary directories (``releasekit-*``)."""
    if any(part.startswith(".") and "-run." in part and part.endswith(".tmp") for part in path.parts):
        return True
    temp = Path(tempfile.gettempdir())
    return path.is_relative_to(temp) and path.relative_to(temp).parts[0].startswith("releasekit-")


def _release_write(path: Path, chunks: Iterator[bytes], mode: int) -> None:
    try:
        _replace_with(path, chunks, point="release-partial", mode=mode)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise no_space(path) from None
        raise
    if not _scratch(path):
        _KEPT.append(path)


def kept_so_far() -> str:
    """What an interrupted command leaves of its own writing: "nothing written", or the files it wrote."""
    if _COMMITTED:
        return f"kept this run's complete records in {_COMMITTED[-1]}"
    if not _KEPT:
        return "nothing written"
    more = f" and {len(_KEPT) - 1} more" if len(_KEPT) > 1 else ""
    return f"kept what it had written: {_KEPT[0]}{more}"


def write_atomic(path: Path, data: bytes | str, *, mode: int = 0o644) -> None:
    """Replace the release file ``path`` with ``data`` in one step; ``str`` is written as UTF-8.

    A full disk is a :class:`NoSpaceError` (exit 2, one line), with nothing half-written left."""
    _release_write(path, iter([data.encode("utf-8") if isinstance(data, str) else data]), mode)


def copy_atomic(source: Path, path: Path, *, mode: int = 0o644) -> None:
    """Replace ``path`` with a copy of the regular file ``source`` in one step, as :func:`write_atomic` does
    (a cache entry or an output is the whole file or absent, even when the disk fills up mid-copy)."""

    def chunks() -> Iterator[bytes]:
        with open(open_regular(source), "rb") as src:
            while chunk := src.read(_CHUNK):
                yield chunk

    _release_write(path, chunks(), mode)


def move_dir_into_place(tmp: Path, dest: Path) -> Path:
    """Rename the complete, new directory ``tmp`` to ``dest`` (which must not exist), durably."""
    os.rename(tmp, dest)
    fsync_dir(dest.parent)
    return dest


def new_entry_dir(dest: Path) -> Path:
    """An empty temporary directory beside ``dest``, to fill and then ``publish_dir``."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_name(dest)
    tmp.mkdir()
    return tmp


def publish_dir(tmp: Path, dest: Path) -> Path:
    """Make the complete directory ``tmp`` visible as ``dest`` in one rename.

    An older ``dest`` (a refreshed entry) is swapped with it in one step where the kernel can
    (``renameat2``), else renamed aside first: a reader sees the old entry or the new one (in
    the fallback, for an instant, none), never a mixture.
    """
    for path in tmp.rglob("*"):
        if path.is_file():
            with path.open("rb") as fh:
                os.fsync(fh.fileno())
    fsync_dir(tmp)
    failpoint(f"cache-publish:{dest.parent.parent.name}")
    if dest.exists() and _exchange(tmp, dest):
        # Swapped in one step: a reader holding dest's path never finds it missing.
        fsync_dir(dest.parent)
        shutil.rmtree(tmp, ignore_errors=True)  # now the old entry
        return dest
    old: Path | None = None
    if dest.exists():
        old = temp_name(dest)
        os.replace(dest, old)
    os.replace(tmp, dest)
    fsync_dir(dest.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return dest


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux ``renameat2(RENAME_EXCHANGE)``); False where that is not available."""
    import ctypes
    import errno

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False  # the kernel or this filesystem cannot: fall back to rename-aside
    raise OSError(code, os.strerror(code), str(b))


def sweep_temporaries(dest: Path) -> None:
    """Remove what killed writers of ``dest`` left beside it (its temporary names only).

    Call with ``dest``'s ``entry_lock`` held: then no live writer owns one of them.
    """
    with contextlib.suppress(OSError):
        for path in dest.parent.glob(f".{dest.name}.*.tmp"):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


@contextlib.contextmanager
def entry_lock(path: Path) -> Iterator[None]:
    """Exclusive ``flock`` on ``<path>.lock`` for the ``with`` block; released by the kernel if we die."""
    lock = path.with_name(path.name + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# -- one run per release directory (issue 44) -------------------------------------------------------
#
# A stage that writes a release directory writes this run's files into a work directory beside
# them (``.<stage>-run.<pid>.<random>.tmp``, a temporary name no reader looks at) and, once they
# are all complete, commits them: its own earlier files and the later stages' records are removed
# first (the one whose presence means "done" before the others), then the new files are renamed in,
# that one last. A run that fails or is interrupted before the commit leaves the directory as it
# was; SIGINT and SIGTERM are held for the few renames of the commit, so only SIGKILL can land inside
# it, and then the directory holds the earlier stages' records and, at most, some of this run's
# files without the record that would vouch for them (no reader takes those; the next run of the
# stage removes them).


def _work_prefix(stage: str) -> str:
    return f".{stage}-run."


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def begin_run(directory: Path, stage: str) -> Path:
    """An empty work directory in ``directory`` for this run of ``stage``; what killed runs of the
    stage left there (their process is gone) is removed first."""
    directory.mkdir(parents=True, exist_ok=True)
    if not directory.is_dir():
        raise UnsafeFileError(f"{directory}: not a directory; refusing to write the release there")
    prefix = _work_prefix(stage)
    for left in directory.glob(f"{prefix}*.tmp"):
        pid = left.name[len(prefix) :].split(".")[0]
        if left.is_dir() and not left.is_symlink() and pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(left, ignore_errors=True)
    work = directory / f"{prefix}{os.getpid()}.{secrets.token_hex(4)}.tmp"
    work.mkdir()
    return work


def abandon_run(work: Path, *, keep: tuple[str, ...] = ()) -> None:
    """A run that did not finish: its work directory goes, the release directory stays as it was.

    ``keep``: entries left in the work directory (a failed build's ``logs``, which its error names);
    the next run of the stage removes them with the rest of the work directory."""
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
        return
    with contextlib.suppress(OSError):
        for path in work.iterdir():
            if path.name not in keep:
                with contextlib.suppress(OSError):
                    _remove(path)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


@contextlib.contextmanager
def interrupts_held() -> Iterator[list[int]]:
    """SIGINT and SIGTERM held (recorded, not acted on) for the ``with`` block, in the main thread;
    the caller decides what a held one means once the block is done."""
    held: list[int] = []
    wanted = (signal.SIGINT, signal.SIGTERM)
    try:
        before = {s: signal.signal(s, lambda signum, _frame: held.append(signum)) for s in wanted}
    except ValueError:  # not the main thread: nothing to hold
        yield held
        return
    try:
        yield held
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def commit_run(work: Path, directory: Path, *, remove: list[str], last: str) -> None:
    """Replace this stage's files in ``directory`` with the complete ones in ``work``.

    ``remove``: names in ``directory`` that must not outlive this commit (this stage's earlier
    files and the later stages' records), removed after ``last`` (the record whose presence means
    this run is done) and before the new files come in, ``last`` last. A SIGINT/SIGTERM that
    arrived meanwhile is raised once all is in place (``kept_so_far`` says so)."""
    names = sorted(p.name for p in work.iterdir())
    with interrupts_held() as held:
        for path in [directory / last, *(directory / n for n in remove if n != last)]:
            _remove(path)  # a planted link is removed, never followed
        fsync_dir(directory)
        for name in [n for n in names if n != last]:
            failpoint(f"run-commit:{name}")
            _remove(directory / name)
            os.replace(work / name, directory / name)
        if last in names:
            failpoint(f"run-commit:{last}")
            os.replace(work / last, directory / last)
        fsync_dir(directory)
        shutil.rmtree(work, ignore_errors=True)
        _COMMITTED.append(directory)
    if held:
        raise KeyboardInterrupt
