"""Installed distributions and their RECORDs, read from the image's inventory (never from the probe).

Also the wheel side of the ``rpm -Vp`` comparison: the RECORD inside a built wheel file.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import re
from dataclasses import dataclass, field
from email.parser import HeaderParser
from pathlib import Path

from releasekit.bounded_read import WHEEL_MAX_BYTES, open_zip
from releasekit.digests import file_sha256
from releasekit.provenance.inventory import Inventory

# Files an installer writes or rewrites in .dist-info: they never match the wheel's copy.
INSTALLER_FILES = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}


def canonical_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class RecordRow:
    path: str  # as written in RECORD (relative to the site directory)
    algorithm: str | None
    digest: bytes | None
    size: int | None


@dataclass
class InstalledDist:
    name: str
    version: str
    site: str  # the site directory holding the .dist-info
    dist_info: str  # absolute path of the .dist-info directory
    record: list[RecordRow] | None  # None: no RECORD (e.g. a Debian-packaged dist)
    record_error: str | None = None
    direct_url: dict | None = None
    files: dict[str, RecordRow] = field(default_factory=dict)  # absolute image path -> row
    unsafe_paths: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return canonical_name(self.name)


def parse_record(text: str) -> list[RecordRow]:
    rows: list[RecordRow] = []
    for line in csv.reader(io.StringIO(text)):
        if not line or not line[0]:
            continue
        path = line[0]
        algorithm = digest = size = None
        if len(line) > 1 and line[1]:
            algorithm, _, encoded = line[1].partition("=")
            try:
                digest = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
            except (ValueError, TypeError):
                digest = b""
        if len(line) > 2 and line[2].strip().isdigit():
            size = int(line[2])
        rows.append(RecordRow(path, algorithm, digest, size))
    return rows


def record_target(site: str, record_path: str) -> str | None:
    """Where a RECORD path lands in the image, or None when it escapes the root or is absolute.

    ``../../../bin/x`` is legitimate (console scripts); only leaving ``/`` is refused.
    """
    if record_path.startswith("/") or "\x00" in record_path or "\\" in record_path:
        return None
    parts = record_path.split("/")
    if "" not in parts and "." not in parts and ".." not in parts:
        return f"{site}/{record_path}"  # the common case, without the walk below
    resolved = [p for p in site.split("/") if p]
    for part in parts:
        if part in ("", "."):
            continue
        if part == "..":
            if not resolved:
                return None
            resolved.pop()
        else:
            resolved.append(part)
    return "/" + "/".join(resolved)


def installed_distributions(inv: Inventory, sites: list[str]) -> list[InstalledDist]:
    found: list[InstalledDist] = []
    seen: set[str] = set()
    for site in sites:
        real_site = inv.resolve(site) or site
        if real_site in seen:
            continue
        seen.add(real_site)
        for name in inv.listdir(real_site):
            if not name.endswith(".dist-info"):
                continue
            dist_info = f"{real_site}/{name}"
            metadata = inv.read(f"{dist_info}/METADATA")
            if metadata is None:
                continue
            headers = HeaderParser().parsestr(metadata.decode("utf-8", errors="replace"))
            dist = InstalledDist(
                name=headers.get("Name", name.split("-")[0]),
                version=headers.get("Version", ""),
                site=real_site,
                dist_info=dist_info,
                record=None,
            )
            raw_record = inv.read(f"{dist_info}/RECORD")
            if raw_record is not None:
                try:
                    dist.record = parse_record(raw_record.decode("utf-8"))
                except (UnicodeDecodeError, csv.Error) as exc:
                    dist.record_error = str(exc)
                for row in dist.record or []:
                    target = record_target(real_site, row.path)
                    if target is None:
                        dist.unsafe_paths.append(row.path)
                    else:
                        dist.files[target] = row
            raw_direct = inv.read(f"{dist_info}/direct_url.json")
            if raw_direct is not None:
                try:
                    value = json.loads(raw_direct)
                    dist.direct_url = value if isinstance(value, dict) else None
                except (UnicodeDecodeError, json.JSONDecodeError):
                    dist.direct_url = {"unparseable": True}
            found.append(dist)
    return found


@dataclass
class WheelRecord:
    filename: str
    sha256: str
    rows: dict[str, RecordRow]  # RECORD path -> row
    dist_info: str  # e.g. demo_pkg-1.0.dist-info


def read_wheel_record(
    path: Path, max_bytes: int = 64 * 1024 * 1024, *, within: Path | None = None
) -> WheelRecord:
    """The wheel's RECORD and sha256. The wheel is opened through ``bounded_read`` (a regular file, inside
    ``within`` when given, at most ``WHEEL_MAX_BYTES`` on its stat): anything else raises
    ``UnsafeFileError`` (exit 2) before a byte is read."""
    with open_zip(path, limit=WHEEL_MAX_BYTES, within=within) as archive:
        records = [n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/RECORD")]
        if len(records) != 1:
            raise ValueError(f"{path.name}: expected one .dist-info/RECORD, found {len(records)}")
        info = archive.getinfo(records[0])
        if info.file_size > max_bytes:
            raise ValueError(f"{path.name}: RECORD is larger than {max_bytes} bytes")
        text = archive.read(records[0]).decode("utf-8")
    rows = {row.path: row for row in parse_record(text)}
    digest = file_sha256(path, max_bytes=WHEEL_MAX_BYTES, within=within)
    return WheelRecord(path.name, digest, rows, records[0].split("/", 1)[0])
