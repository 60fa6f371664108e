"""A hashing helper process: sha256 (and git blob ids) of file pieces the reader puts in shared memory.

Started by ``hashpool.HashPool`` as ``python -I -S hashworker.py FD SIZE``: FD is a memfd of
SIZE bytes shared with the reader (a ring of file pieces). Requests arrive on stdin, one
fixed-size record per piece, in the order the reader wrote them; every request gets one
fixed-size response on stdout, in the same order, so the reader knows which part of the ring
is free again. The last piece of a file carries the file's digests back. It imports nothing
from releasekit (it runs from its path, without site-packages), so it starts in a few ms.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import struct
import sys
from typing import Any

# file number, flags, ring offset, length, file size
REQUEST = struct.Struct("<IBQQQ")
# file number, sha256 (zeros until the last piece), git blob sha1 (zeros without BLOB)
RESPONSE = struct.Struct("<I32s20s")
FIRST, LAST, BLOB = 1, 2, 4
_NO_SHA1 = bytes(20)


def serve(ring_fd: int, ring_size: int, requests: int, responses: int) -> None:
    ring = mmap.mmap(ring_fd, ring_size, mmap.MAP_SHARED, mmap.PROT_READ)
    view = memoryview(ring)
    open_files: dict[int, tuple[Any, Any]] = {}
    pending = b""
    size = REQUEST.size
    while True:
        data = os.read(requests, size * 512)
        if not data:
            break
        pending += data
        count = len(pending) // size
        out = []
        for number, flags, offset, length, file_size in REQUEST.iter_unpack(pending[: count * size]):
            if flags & FIRST:
                open_files[number] = (
                    hashlib.sha256(),
                    hashlib.sha1(b"blob %d\0" % file_size) if flags & BLOB else None,
                )
            sha, blob = open_files[number]
            piece = view[offset : offset + length]
            sha.update(piece)
            if blob is not None:
                blob.update(piece)
            piece.release()
            if flags & LAST:
                del open_files[number]
                out.append(
                    RESPONSE.pack(number, sha.digest(), blob.digest() if blob is not None else _NO_SHA1)
                )
            else:
                out.append(RESPONSE.pack(number, b"", b""))
        pending = pending[count * size :]
        payload = b"".join(out)
        while payload:
            payload = payload[os.write(responses, payload) :]
    view.release()
    ring.close()


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]), 0, 1)
