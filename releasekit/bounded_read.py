"""Reading files of a release directory that an attacker may have prepared.

A release directory (and an archive or bundle given to ``reproduce``) is input: anything in it
may be a FIFO that blocks ``open()`` forever, a device, a socket, a symbolic link to a file
outside the directory, or a sparse file of many GiB that costs nothing on disk. Every reader
of such a directory goes through this module:

- :func:`open_regular` looks before it opens (``lstat``; a symbolic link is followed only when it
  stays inside ``within``), refuses anything that is not a regular file, checks the size limit on
  ``stat`` (so the time to refuse does not grow with the apparent size), then opens with
  ``O_NONBLOCK | O_NOFOLLOW`` and checks with ``fstat`` that it opened the file it looked at.
- :func:`read_bounded` reads at most a limit (bounded memory, whatever the file claims).
- :func:`open_zip` sizes a zip's central directory from its end record (zip64's too) and walks its
  headers before ``zipfile`` reads it (entries and directory bytes capped), and refuses two
  entries of one name (an installer keeps the last).

Writing into such a directory is ``releasekit/atomic.py``'s (the one writer), which refuses a
link or special file at the target with the same :class:`UnsafeFileError`.

Every refusal is an :class:`UnsafeFileError` (exit 2, one line naming the path). This module
imports nothing of releasekit but ``errors``, so the configuration (``manifest/``), ``digests``
and ``records`` all read through it without depending on each other.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import struct
import zipfile
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
# A JSONL evaluation or prompt set named by validation.datasets (GSM8K's test split is under 1 MiB).
DATASET_MAX_BYTES = 256 * MIB
# A zip's (wheel's) central directory: the largest real wheels (CUDA libraries, torch) hold tens of
# thousands of entries in a few MiB of directory.
ZIP_MAX_ENTRIES = 200_000
ZIP_MAX_DIRECTORY_BYTES = 64 * MIB

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


def kind_of(mode: int) -> str:
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
        raise UnsafeFileError(f"{path}: {kind_of(st.st_mode)}, not a regular file; refused")
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


class ZipRefused(UnsafeFileError):
    """A zip whose directory is over its limits, malformed, or names one entry twice; ``reason`` is
    the message without the file's name."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}; refused")
        self.reason = reason


# zipfile's own layouts: the end record, the zip64 locator and end record, a central header.
_END = struct.Struct("<4s4H2LH")
_LOCATOR64 = struct.Struct("<4sLQL")
_END64 = struct.Struct("<4sQ2H2L4Q")
_CENTRAL = struct.Struct("<4s4B4HL2L5H2L")


def _end_record(handle: BinaryIO, size: int) -> tuple[int, int, int] | None:
    """(entries, directory bytes, directory start) as ``zipfile`` will find them (the same search:
    the record at the very end, else the last signature in the final 64 KiB; a zip64 locator just
    before it wins); None where ``zipfile`` finds no end record either (it refuses the file)."""
    handle.seek(max(size - _END.size - (1 << 16), 0))
    tail = handle.read()
    where = len(tail) - _END.size
    if not (where >= 0 and tail[where:].startswith(b"PK\x05\x06") and tail[-2:] == b"\0\0"):
        where = tail.rfind(b"PK\x05\x06")
    if where < 0 or len(tail) - where < _END.size:
        return None
    end = _END.unpack_from(tail, where)
    location = size - len(tail) + where
    entries, directory, extra = end[4], end[5], 0
    if location >= _LOCATOR64.size + _END64.size:
        handle.seek(location - _LOCATOR64.size - _END64.size)
        block = handle.read(_END64.size + _LOCATOR64.size)
        locator = _LOCATOR64.unpack_from(block, _END64.size)
        end64 = _END64.unpack_from(block)
        if locator[0] == b"PK\x06\x07" and end64[0] == b"PK\x06\x06":
            entries, directory, extra = end64[7], end64[8], _END64.size + _LOCATOR64.size
    return entries, directory, location - directory - extra


def _walk_directory(data: bytes, path: Path, max_entries: int) -> None:
    """Count the central headers as ``zipfile`` will walk them, refusing past ``max_entries``."""
    at = count = 0
    while at + _CENTRAL.size <= len(data):
        header = _CENTRAL.unpack_from(data, at)
        if header[0] != b"PK\x01\x02":
            return  # zipfile says what is wrong
        count += 1
        if count > max_entries:
            raise ZipRefused(path, f"its zip directory holds over {max_entries} entries")
        at += _CENTRAL.size + header[12] + header[13] + header[14]


def open_zip(
    path: Path,
    *,
    limit: int,
    within: Path | None = None,
    max_entries: int = ZIP_MAX_ENTRIES,
    max_directory_bytes: int = ZIP_MAX_DIRECTORY_BYTES,
) -> zipfile.ZipFile:
    """The zip ``path`` (a regular file, see :func:`open_regular`), its directory sized from its end
    record and counted before ``zipfile`` builds an entry of it; two entries of one name are refused.
    Over a limit: :class:`ZipRefused`; not a zip: ``zipfile.BadZipFile`` as ``zipfile`` raises it."""
    handle = open(open_regular(path, limit=limit, within=within), "rb")  # noqa: SIM115 - the zip owns it
    try:
        found = _end_record(handle, os.fstat(handle.fileno()).st_size)
        if found is not None:
            entries, directory, start = found
            if entries > max_entries:
                raise ZipRefused(path, f"its zip directory claims {entries} entries, over {max_entries}")
            if directory > max_directory_bytes:
                raise ZipRefused(path, f"its zip directory is {directory} B, over {max_directory_bytes} B")
            handle.seek(max(start, 0))
            _walk_directory(handle.read(directory), path, max_entries)
            handle.seek(0)
        archive = _OwnedZip(handle)
    except BaseException:
        handle.close()
        raise
    seen: set[str] = set()
    for name in archive.namelist():
        if name in seen:
            archive.close()
            raise ZipRefused(path, f"it holds two entries named {name[:200]!r}")
        seen.add(name)
    return archive


class _OwnedZip(zipfile.ZipFile):
    """A ``ZipFile`` over a handle it closes with itself."""

    def __init__(self, handle: BinaryIO) -> None:
        self._handle = handle
        super().__init__(handle)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._handle.close()


__all__ = [
    "DATASET_MAX_BYTES",
    "GIB",
    "MIB",
    "RECORD_MAX_BYTES",
    "TEXT_MAX_BYTES",
    "WHEEL_MAX_BYTES",
    "ZIP_MAX_DIRECTORY_BYTES",
    "ZIP_MAX_ENTRIES",
    "UnsafeFileError",
    "ZipRefused",
    "check_regular",
    "open_regular",
    "open_zip",
    "read_bounded",
]
