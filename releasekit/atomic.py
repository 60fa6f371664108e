"""Crash- and concurrency-safe cache writes: one helper for every cache releasekit keeps.

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
"""

from __future__ import annotations

import contextlib
import fcntl
import fnmatch
import os
import secrets
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path

KILL_ENV = "RELEASEKIT_TEST_KILL_AT"
PAUSE_ENV = "RELEASEKIT_TEST_PAUSE_AT"
PAUSE_SECONDS_ENV = "RELEASEKIT_TEST_PAUSE_S"
_CHUNK = 1024 * 1024


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
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_stream(tmp: Path, chunks: Iterator[bytes], dest_name: str) -> None:
    with tmp.open("xb") as fh:
        for index, chunk in enumerate(chunks):
            fh.write(chunk)
            if index == 0:
                fh.flush()
                failpoint(f"cache-partial:{dest_name}")  # killed here: a half-written temporary file
        fh.flush()
        os.fsync(fh.fileno())


def write_bytes(dest: Path, data: bytes) -> Path:
    """``dest`` holds exactly ``data`` or what it held before; never a part of either."""
    half = len(data) // 2
    return _replace_with(dest, iter([data[:half], data[half:]]))


def copy_file(source: Path, dest: Path) -> Path:
    """``dest`` becomes a complete copy of ``source`` (or stays as it was)."""

    def chunks() -> Iterator[bytes]:
        # The first chunk is at most half the file: a kill after it leaves a partial copy.
        size = min(_CHUNK, max(1, source.stat().st_size // 2))
        with source.open("rb") as fh:
            while chunk := fh.read(size):
                yield chunk
                size = _CHUNK

    return _replace_with(dest, chunks())


def _replace_with(dest: Path, chunks: Iterator[bytes]) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_name(dest)
    try:
        _write_stream(tmp, chunks, dest.name)
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
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
