"""A real (minimal) wheel written by a test: PEP 427's dist-info METADATA, WHEEL and a RECORD that
lists every file with its hash, so plan lock's wheel check accepts it."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def write_wheel(
    directory: Path,
    dist: str,
    version: str,
    tag: str = "py3-none-any",
    *,
    files: dict[str, bytes] | None = None,
    metadata: str | None = None,
    wheel: str | None = None,
    record: str | None = None,
    filename: str | None = None,
) -> Path:
    """``directory/<dist>-<version>-<tag>.whl``; ``metadata``, ``wheel`` and ``record`` replace the
    matching member's text (to make a wheel that disagrees with its name)."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = f"{dist.replace('-', '_')}-{version}"
    info = f"{stem}.dist-info"
    members = dict(files or {f"{dist.replace('-', '_')}/__init__.py": f"TAG = {tag!r}\n".encode()})
    members[f"{info}/METADATA"] = (
        metadata if metadata is not None else f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n"
    ).encode()
    members[f"{info}/WHEEL"] = (
        wheel
        if wheel is not None
        else f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: {'true' if tag.endswith('-any') else 'false'}\nTag: {tag}\n"
    ).encode()
    rows = [f"{name},{record_hash(data)},{len(data)}" for name, data in members.items()]
    members[f"{info}/RECORD"] = (
        record if record is not None else "\n".join([*rows, f"{info}/RECORD,,"]) + "\n"
    ).encode()
    path = directory / (filename or f"{stem}-{tag}.whl")
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path
