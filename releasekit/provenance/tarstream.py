"""The tar stream of an image export: headers, pax records and GNU long names, read strictly.

Our own reader, strict where tarfile is lenient (tarfile ends quietly at a bad header after
the first one, reads short data as the end of a file, and turns unknown types into plain
entries): every header's checksum is verified, numeric fields are octal or base-256 and
nothing else, the stream must end with a zero block followed by zeros only, and an entry
type that could carry data we do not account for (sparse files, volume headers, unknown
types, data on a link or a directory) stops the read. File data goes from the stream's
chunks straight into hashlib as memoryview slices, with no copy per entry.

``provenance/inventory.py`` builds the path table from the members this reader yields.
"""

from __future__ import annotations

import re
import struct
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

Buffer = bytes | bytearray | memoryview  # what a chunk's slice is


class ExportAborted(Exception):
    """The stream broke a limit (time, total size): the image cannot be verified."""


# One entry's header as the table needs it, its data still in the stream: (name as the archive
# spells it, typeflag (a v7 directory is b"5"), regular, size, padding to the next 512-byte
# block, link target ("" for a plain file), mode, uid, gid, "major:minor" of a device or None).
# A plain tuple: the reader builds one per entry, and a NamedTuple's constructor costs more.
Member = tuple[str, bytes, bool, int, int, str, int, int, int, str | None]


BLOCK = 512
ZERO_BLOCK = bytes(BLOCK)
_META_CAP = 1024 * 1024  # pax / GNU long-name data: far above any real path
_POSIX_MAGIC = b"ustar\x00"  # ustar and pax: a prefix field at 345:500
_GNU_MAGIC = b"ustar  \x00"  # GNU: 345:500 holds times and sparse data, never a prefix
_REGULAR = (b"0", b"\x00", b"7")
OTHER_KINDS = {b"3": "chr", b"4": "blk", b"6": "fifo"}
# pax keywords that change what the table records; a global header may not set them
_PAX_ENTRY_KEYS = ("path", "linkpath", "size", "uid", "gid")
_OCTAL = b"01234567"


class TarStream:
    """A forward-only view of the stream's chunks: exact takes for headers, slices for data."""

    __slots__ = ("_chunks", "_max_total_bytes", "_deadline", "buf", "view", "off", "total")

    def __init__(self, chunks: Iterable[bytes], max_total_bytes: int, deadline: float | None) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._max_total_bytes = max_total_bytes
        self._deadline = deadline  # time.monotonic()
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
            if self.total > self._max_total_bytes:
                raise ExportAborted(f"the image's filesystem exceeds {self._max_total_bytes} bytes")
            if self._deadline is not None and time.monotonic() > self._deadline:
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

    def next_member(self) -> Member | None:
        """The next entry's header, with its GNU long names and pax records applied; None at the end.

        Its data is left in the stream for the caller to feed (``size`` bytes, then ``padded``).
        """
        long_name: str | None = None
        long_link: str | None = None
        pax: dict[str, str] | None = None
        while True:
            header = self.take(BLOCK, "a header")
            at = self.pos - BLOCK
            if header == ZERO_BLOCK:
                if long_name is not None or long_link is not None or pax is not None:
                    raise _corrupt(at, "the archive ends after an extended header, before its entry")
                if not self.rest_is_zero():
                    raise _corrupt(self.pos, "data follows the end-of-archive marker")
                return None
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
                size, checksum = (
                    _number(header[124:136], at, "size"),
                    _number(header[148:156], at, "checksum"),
                )
            if checksum != _unsigned_sum(header) and checksum != _signed_sum(header):
                raise _corrupt(at, "the header checksum does not match")
            kind = header[156:157]
            if size < 0:
                raise _corrupt(at, f"negative size {size}")
            padded = -size % BLOCK
            if kind in (b"x", b"X", b"g", b"L", b"K"):
                if size > _META_CAP:
                    raise _corrupt(at, f"an extended header of {size} bytes")
                data = self.take(size, "an extended header")
                self.feed(padded, None, "an extended header")
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
            if kind == b"\x00" and name.endswith("/"):
                kind = b"5"  # a v7 directory
                regular = False
            if not regular:
                if kind not in (b"1", b"2", b"5") and kind not in OTHER_KINDS:
                    what = "a GNU sparse file" if kind == b"S" else f"unknown entry type {kind!r}"
                    raise _corrupt(at, f"{what} ({name[:200]!r}): its data cannot be accounted for")
                if size:
                    raise _corrupt(
                        at, f"a non-file entry ({name[:200]!r}, type {kind!r}) carries {size} bytes of data"
                    )
                if kind == b"5":
                    name = name.rstrip("/")
            mode = (
                int(mode_text, 8) if mode_text is not None else _number(header[100:108], at, "mode")
            ) & 0o7777
            device = None
            if kind in (b"3", b"4"):
                device = (
                    f"{_number(header[329:337], at, 'devmajor')}:{_number(header[337:345], at, 'devminor')}"
                )
            return name, kind, regular, size, padded, link, mode, uid, gid, device

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
