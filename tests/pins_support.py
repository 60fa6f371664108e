"""A pins manifest and a git repository of release inputs made in a test: what the pins-audit tests
and the bounded-reader tests share."""

from __future__ import annotations

import subprocess
from pathlib import Path

MANIFEST = {
    "schema": "releasekit/v1",
    "name": "pins-test",
    "components": {
        "tvm": {"kind": "wheel", "requirement": "apache-tvm-ffi==0.1.12", "sha256": "to-be-locked"}
    },
    "toolchain": {"base_image": {"name": "x", "digest": "to-be-locked"}, "cuda_arch_list": ["12.0a"]},
    "pins": [
        {"package": "apache-tvm-ffi", "version": "0.1.12"},
        {"package": "flashinfer-python", "version": "0.6.2", "scopes": ["runtime"]},
    ],
}


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def commit_files(root: Path, files: dict[str, str], *, commit: bool = True) -> str:
    """Write the files into a git repository at ``root`` and commit them; the commit's SHA."""
    if not (root / ".git").exists():
        root.mkdir(parents=True, exist_ok=True)
        git(root, "init", "-q", "-b", "main")
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if not commit:
        return ""
    git(root, "add", "-A")
    git(root, "commit", "-q", "--allow-empty", "-m", "inputs")
    return git(root, "rev-parse", "HEAD")
