"""Published vs rebuilt: image ID, layer diff IDs, the components' wheels, then the first differing file."""

from __future__ import annotations

import hashlib
import tarfile
from itertools import zip_longest
from pathlib import Path

from pydantic import BaseModel

from releasekit.bounded_read import WHEEL_MAX_BYTES, open_zip


class LayerComparison(BaseModel):
    index: int
    published: str | None
    rebuilt: str | None
    same: bool


class ComponentComparison(BaseModel):
    name: str
    wheel: str | None
    published_sha256: str | None
    rebuilt_sha256: str | None
    same: bool


class Difference(BaseModel):
    what: str  # image-config | layer | wheel | file
    component: str | None = None
    layer: int | None = None
    file: str | None = None
    published: str | None = None
    rebuilt: str | None = None
    message: str


def compare_layers(published: list[str] | None, rebuilt: list[str]) -> list[LayerComparison]:
    if published is None:
        return []
    return [
        LayerComparison(index=i, published=p, rebuilt=r, same=p == r)
        for i, (p, r) in enumerate(zip_longest(published, rebuilt))
    ]


def tar_files(path: Path) -> dict[str, str]:
    """path -> sha256 (regular files), ``link:<target>`` (links), ``dir`` (directories), with the mode."""
    out: dict[str, str] = {}
    with tarfile.open(path) as tar:
        for member in tar:
            name = member.name.lstrip("./")
            if member.isfile():
                handle = tar.extractfile(member)
                digest = hashlib.sha256(handle.read() if handle else b"").hexdigest()
                out[name] = f"{digest} {member.mode:o}"
            elif member.issym() or member.islnk():
                out[name] = f"link:{member.linkname} {member.mode:o}"
            elif member.isdir():
                out[name] = f"dir {member.mode:o}"
            else:
                out[name] = f"other {member.mode:o}"
    return out


def first_file_difference(
    published: dict[str, str], rebuilt: dict[str, str]
) -> tuple[str, str | None, str | None] | None:
    for name in sorted(set(published) | set(rebuilt)):
        if published.get(name) != rebuilt.get(name):
            return name, published.get(name), rebuilt.get(name)
    return None


def owner_of(path: str, wheels: dict[str, Path]) -> str | None:
    """The component whose wheel installs ``path`` (matched on the wheel member's path below site/dist-packages)."""
    for marker in ("/dist-packages/", "/site-packages/"):
        if marker in f"/{path}":
            rel = f"/{path}".split(marker, 1)[1]
            break
    else:
        return None
    top = rel.split("/", 1)[0]
    for component, wheel in wheels.items():
        with open_zip(wheel, limit=WHEEL_MAX_BYTES) as zf:
            names = zf.namelist()
        if rel in names or any(n.split("/", 1)[0] == top for n in names):
            return component
    return None
