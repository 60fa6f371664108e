"""Reading and writing files of a release directory that an attacker may have prepared.

A release directory (and an archive or bundle given to ``reproduce``) is input: anything in it
may be a FIFO that blocks ``open()`` forever, a device, a socket, a symbolic link to a file
outside the directory, or a sparse file of many GiB that costs nothing on disk. Every reader
and writer of such a directory goes through this module:

- :func:`open_regular` looks before it opens (``lstat``; a symbolic link is followed only when it
  stays inside ``within``), refuses anything that is not a regular file, checks the size limit on
  ``stat`` (so the time to refuse does not grow with the apparent size), then opens with
  ``O_NONBLOCK | O_NOFOLLOW`` and checks with ``fstat`` that it opened the file it looked at.
- :func:`read_bounded` reads at most a limit (bounded memory, whatever the file claims).
- :func:`write_atomic` writes a temporary file created with ``O_CREAT | O_EXCL | O_NOFOLLOW``
  under a unique name in the target's directory, fsyncs it, then ``os.replace``s it onto the
  target; a target that is a symbolic link or not a regular file is refused. On any error
  (``ENOSPC`` included) the temporary file is removed: the target is the old file or the new
  one, never half of one.

Every refusal is an :class:`UnsafeFileError` (exit 2, one line naming the path).
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from releasekit.errors import InputError

MIB = 1 << 20
GIB = 1 << 30
# The default bound of one record file (a JSON release file); record kinds may set their own.
RECORD_MAX_BYTES = 64 * MIB
# One wheel of the release directory's wheels/ (a vLLM wheel is a few hundred MiB).
WHEEL_MAX_BYTES = 4 * GIB
# RELEASE.md, a DSSE envelope, a statement read back.
TEXT_MAX_BYTES = 64 * MIB

_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISLNK, "a symbolic link"),
)


class UnsafeFileError(InputError):
    """A file of a release directory that is not a regular file inside it, or is over its size limit."""


class NoSpaceError(InputError):
    """The file system is full: nothing half-written was left behind."""


def _kind(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except (ValueError, OSError, RuntimeError):
        return False
    return True


def check_regular(path: Path, *, limit: int | None = None, within: Path | None = None) -> os.stat_result:
    """The ``stat`` of ``path`` when it is a regular file (or a symbolic link to one inside ``within``;
    with ``within`` None a link is followed wherever it leads), under ``limit`` bytes. Raises
    :class:`UnsafeFileError` otherwise, ``FileNotFoundError`` when there is nothing there."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        if within is not None and not _inside(path, within):
            raise UnsafeFileError(
                f"{path}: a symbolic link leading outside {within} (to {os.readlink(path)}); refused"
            )
        st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeFileError(f"{path}: {_kind(st.st_mode)}, not a regular file; refused")
    if limit is not None and st.st_size > limit:
        raise UnsafeFileError(f"{path}: {st.st_size} bytes, over the limit of {limit} bytes; refused")
    return st


def open_regular(path: Path, *, limit: int | None = None, within: Path | None = None) -> int:
    """A read-only descriptor of the regular file ``path`` (see :func:`check_regular`), never blocking
    in ``open()``; the caller closes it (``open(fd, "rb")`` takes it over)."""
    st = check_regular(path, limit=limit, within=within)
    target = path.resolve() if path.is_symlink() else path
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(target, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeFileError(f"{path}: became a symbolic link while opened; refused") from None
        raise
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            raise UnsafeFileError(f"{path}: replaced while it was opened; refused")
        if limit is not None and now.st_size > limit:
            raise UnsafeFileError(f"{path}: {now.st_size} bytes, over the limit of {limit} bytes; refused")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bounded(path: Path, limit: int, *, within: Path | None = None) -> bytes:
    """The bytes of the regular file ``path``, refused (before reading) when over ``limit`` bytes; never
    more than ``limit`` bytes are read, even from a file that grows meanwhile."""
    with open(open_regular(path, limit=limit, within=within), "rb", buffering=0) as handle:
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0 and (chunk := handle.read(min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
    data = b"".join(chunks)
    if len(data) > limit:
        raise UnsafeFileError(f"{path}: grew over the limit of {limit} bytes while read; refused")
    return data


def check_writable(path: Path) -> None:
    """Refuse a write target that exists and is a symbolic link or not a regular file."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeFileError(f"{path}: {_kind(st.st_mode)}, not a regular file; refusing to write there")


def no_space(path: Path, exc: OSError) -> NoSpaceError:
    return NoSpaceError(f"no space left on device writing {path} (nothing half-written was left)")


def write_atomic(path: Path, data: bytes | str, *, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` in one step (see the module's docstring); ``str`` is written as UTF-8."""
    payload = data.encode("utf-8") if isinstance(data, str) else data

    def fill(handle: BinaryIO) -> None:
        view = memoryview(payload)
        while view:
            view = view[handle.write(view) :]

    _replace_with(path, fill, mode)


def copy_atomic(source: Path, path: Path, *, mode: int = 0o644) -> None:
    """Replace ``path`` with a copy of the regular file ``source`` in one step, as :func:`write_atomic` does
    (a cache entry or an output is the whole file or absent, even when the disk fills up mid-copy)."""

    def fill(handle: BinaryIO) -> None:
        with open(open_regular(source), "rb") as src:
            shutil.copyfileobj(src, handle, 1 << 20)

    _replace_with(path, fill, mode)


def _replace_with(path: Path, fill: Callable[[BinaryIO], None], mode: int) -> None:
    check_writable(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        with open(fd, "wb", closefd=True) as handle:
            fill(handle)
            handle.flush()
            os.fsync(handle.fileno())
        check_writable(path)  # planted meanwhile: still refused (os.replace would replace a link itself)
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise no_space(path, exc) from None
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


__all__ = [
    "GIB",
    "MIB",
    "RECORD_MAX_BYTES",
    "TEXT_MAX_BYTES",
    "WHEEL_MAX_BYTES",
    "NoSpaceError",
    "UnsafeFileError",
    "check_regular",
    "check_writable",
    "copy_atomic",
    "no_space",
    "open_regular",
    "read_bounded",
    "write_atomic",
]
