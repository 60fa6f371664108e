"""Base images made on this machine: there is no registry to pull from.

A minimal Debian bookworm with python3 and pip is bootstrapped with mmdebstrap and
``docker import``-ed once per machine, then found by tag. Its digest, for the lock and
the labels, is the image ID: the sha256 of its config, which is what the engine can
verify locally (a registry manifest digest does not exist for an imported image).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from pydantic import BaseModel

from releasekit.child_env import child_env
from releasekit.docker_engine import Engine
from releasekit.errors import EnvironmentProblem

DEFAULT_BASE = "releasekit/base-python:bookworm"
PACKAGES = ("python3", "python3-venv", "python3-pip")


class BaseImage(BaseModel):
    name: str
    image_id: str
    created: bool  # made by this call (False: found by tag)


def ensure_base_image(engine: Engine, name: str = DEFAULT_BASE, suite: str = "bookworm") -> BaseImage:
    """Find ``name`` in the engine, or bootstrap it (about a minute, needs Debian's mirror)."""
    found = engine.image_id(name)
    if found:
        return BaseImage(name=name, image_id=found, created=False)
    if shutil.which("mmdebstrap") is None:
        raise EnvironmentProblem(
            f"base image {name} is missing and mmdebstrap is not installed",
            hint="apt-get install mmdebstrap, or run scripts/setup.sh",
        )
    repository, _, tag = name.rpartition(":")
    with tempfile.TemporaryDirectory(prefix="releasekit-base-") as tmp:
        rootfs = Path(tmp) / "rootfs.tar"
        cmd = [
            "mmdebstrap",
            "--quiet",
            "--variant=minbase",
            f"--include={','.join(PACKAGES)}",
            # Docs and caches make the base bigger and the tests slower; nothing needs them.
            "--dpkgopt=path-exclude=/usr/share/doc/*",
            "--dpkgopt=path-exclude=/usr/share/man/*",
            "--dpkgopt=path-exclude=/usr/share/locale/*",
            "--customize-hook=rm -rf $1/var/cache/apt/* $1/var/lib/apt/lists/*",
            suite,
            str(rootfs),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=child_env())
        if proc.returncode != 0:
            tail = " ".join(proc.stderr.strip().splitlines()[-2:])[:300]
            raise EnvironmentProblem(
                f"mmdebstrap could not make base image {name}: {tail}",
                hint="it needs root and Debian's apt mirror",
            )
        image_id = engine.import_rootfs(rootfs, repository or name, tag or "latest")
    return BaseImage(name=name, image_id=image_id, created=True)
