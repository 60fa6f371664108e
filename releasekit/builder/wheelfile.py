"""Reading and normalising built wheels.

Build backends stamp the wall clock into zip entries and list files in directory
order; normalising rewrites only the zip container (sorted entries, fixed timestamps
and permissions) and never a file's bytes, so the wheel's RECORD stays valid.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import re
import time
import zipfile
from email.parser import HeaderParser
from pathlib import Path

from pydantic import BaseModel

from releasekit.bounded_read import WHEEL_MAX_BYTES, open_zip
from releasekit.digests import file_sha256

# Zip cannot express times before 1980; SOURCE_DATE_EPOCH values before that are clamped.
ZIP_EPOCH = 315532800


class WheelInfo(BaseModel):
    filename: str
    distribution: str
    version: str
    sha256: str
    files: list[str]


def _sort_key(name: str) -> tuple[int, str]:
    # The wheel spec wants .dist-info last so that installers can stream; RECORD at the very end.
    if name.endswith(".dist-info/RECORD"):
        return (2, name)
    if name.split("/", 1)[0].endswith(".dist-info"):
        return (1, name)
    return (0, name)


def normalise(path: Path, source_date_epoch: int) -> None:
    """Rewrite ``path`` in place as a deterministic zip."""
    stamp = time.gmtime(max(source_date_epoch, ZIP_EPOCH))[:6]
    with open_zip(path, limit=WHEEL_MAX_BYTES) as src:
        entries = [(info, src.read(info)) for info in src.infolist() if not info.is_dir()]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as dst:
        for info, data in sorted(entries, key=lambda e: _sort_key(e[0].filename)):
            executable = bool((info.external_attr >> 16) & 0o111)
            out = zipfile.ZipInfo(info.filename, date_time=stamp)
            out.external_attr = ((0o100755 if executable else 0o100644) & 0xFFFF) << 16
            out.compress_type = zipfile.ZIP_DEFLATED
            out.create_system = 3  # Unix, whatever the backend's platform claimed
            dst.writestr(out, data, compresslevel=6)
    path.write_bytes(buf.getvalue())


def inspect(path: Path) -> WheelInfo:
    with open_zip(path, limit=WHEEL_MAX_BYTES) as zf:
        names = zf.namelist()
        meta_name = next((n for n in names if re.match(r"^[^/]+\.dist-info/METADATA$", n)), None)
        if meta_name is None:
            raise ValueError(f"{path.name}: no .dist-info/METADATA")
        meta = HeaderParser().parsestr(zf.read(meta_name).decode("utf-8"))
    return WheelInfo(
        filename=path.name,
        distribution=str(meta["Name"]),
        version=str(meta["Version"]),
        sha256=file_sha256(path),
        files=sorted(names),
    )


def record_mismatches(path: Path) -> list[str]:
    """Files whose bytes disagree with the wheel's own RECORD (empty: consistent)."""
    problems: list[str] = []
    with open_zip(path, limit=WHEEL_MAX_BYTES) as zf:
        record_name = next((n for n in zf.namelist() if n.endswith(".dist-info/RECORD")), None)
        if record_name is None:
            return ["no RECORD"]
        rows = list(csv.reader(io.StringIO(zf.read(record_name).decode("utf-8"))))
        listed = set()
        for row in rows:
            if not row or row[0] == record_name:
                continue
            name, digest = row[0], row[1]
            listed.add(name)
            if not digest:
                problems.append(f"{name}: no hash in RECORD")
                continue
            algo, _, expected = digest.partition("=")
            if name not in zf.namelist():
                problems.append(f"{name}: listed in RECORD but missing")
                continue
            actual = base64.urlsafe_b64encode(hashlib.new(algo, zf.read(name)).digest()).rstrip(b"=").decode()
            if actual != expected:
                problems.append(f"{name}: hash differs from RECORD")
        problems += [f"{n}: not in RECORD" for n in zf.namelist() if n not in listed and n != record_name]
    return problems


def read_member(path: Path, suffix: str) -> bytes | None:
    """The bytes of the first member whose name ends with ``suffix``."""
    with open_zip(path, limit=WHEEL_MAX_BYTES) as zf:
        for name in zf.namelist():
            if name.endswith(suffix):
                return zf.read(name)
    return None
