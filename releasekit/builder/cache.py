"""The build cache: a wheel is reused only when everything it was made from is the same.

The key is the sha256 of a canonical JSON of (commit, tree, build recipe, toolchain,
cache format). An entry holds the wheel, its log and a small JSON record; the wheel's
sha256 is checked again on every hit, so a tampered cache is a miss, not a bad release.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import sys
from pathlib import Path

from pydantic import BaseModel

from releasekit.builder.wheel import BuiltWheel
from releasekit.digests import file_sha256
from releasekit.manifest.models import BuildRecipe
from releasekit.records.lock import LockedGitComponent, LockedToolchain, canonical_json
from releasekit.records.safe_io import copy_atomic, no_space

# Bump when the way wheels are built or normalised changes: old entries then miss.
CACHE_FORMAT = "releasekit.build-cache/v2"  # v2: NVCC_APPEND_FLAGS=--objdir-as-tempdir in native builds


def default_cache_dir() -> Path:
    root = os.environ.get("RELEASEKIT_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "releasekit") / "build"


def wheel_key(
    comp: LockedGitComponent,
    recipe: BuildRecipe,
    toolchain: LockedToolchain,
    arches: list[str],
    builder_image: str | None = None,
) -> str:
    material = {
        "format": CACHE_FORMAT,
        "commit": comp.commit,
        "tree": comp.tree,
        "source_date_epoch": comp.commit_time,
        "recipe": recipe.model_dump(mode="json"),
        "arches": arches if recipe.native else [],
        "builder_image": builder_image,
        "toolchain": {
            "cuda": toolchain.cuda,
            "pytorch": toolchain.pytorch,
            "nccl": toolchain.nccl,
            # A venv build is made from this interpreter: another Python is another toolchain.
            "python": None if builder_image else f"{sys.version_info.major}.{sys.version_info.minor}",
        },
    }
    return hashlib.sha256(canonical_json(material)).hexdigest()


class CacheEntry(BaseModel):
    key: str
    wheel: BuiltWheel


class BuildCache:
    def __init__(self, root: Path | None = None, *, enabled: bool = True) -> None:
        self.root = root or default_cache_dir()
        self.enabled = enabled

    def _dir(self, kind: str, key: str) -> Path:
        return self.root / kind / key[:2] / key

    def get_wheel(self, key: str, dest_dir: Path, log_dest: Path) -> BuiltWheel | None:
        if not self.enabled:
            return None
        entry_dir = self._dir("wheels", key)
        try:
            entry = CacheEntry.model_validate_json((entry_dir / "entry.json").read_text())
        except (OSError, ValueError):
            return None
        cached = entry_dir / entry.wheel.filename
        if not cached.is_file() or file_sha256(cached) != entry.wheel.sha256:
            return None
        dest_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(cached, dest_dir / cached.name)
        log_dest.parent.mkdir(parents=True, exist_ok=True)
        log = entry_dir / "build.log"
        text = log.read_text(encoding="utf-8") if log.is_file() else ""
        log_dest.write_text(
            f"# cache hit {key}: not rebuilt; log of the original build follows\n{text}", encoding="utf-8"
        )
        return entry.wheel.model_copy(update={"path": str(dest_dir / cached.name)})

    def put_wheel(self, key: str, wheel: BuiltWheel, log: Path) -> None:
        # Written even with --no-cache: a forced rebuild refreshes the entry for the next run.
        entry_dir = self._dir("wheels", key)
        tmp = entry_dir.with_name(entry_dir.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            shutil.copyfile(wheel.path, tmp / wheel.filename)
            if log.is_file():
                shutil.copyfile(log, tmp / "build.log")
            (tmp / "entry.json").write_text(CacheEntry(key=key, wheel=wheel).model_dump_json(indent=2))
        except OSError as exc:  # a full disk: no half-written entry left behind
            shutil.rmtree(tmp, ignore_errors=True)
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise no_space(entry_dir, exc) from None
            raise
        shutil.rmtree(entry_dir, ignore_errors=True)
        tmp.rename(entry_dir)

    def get_file(self, kind: str, key: str, name: str) -> Path | None:
        if not self.enabled:
            return None
        path = self._dir(kind, key) / name
        return path if path.is_file() else None

    def put_file(self, kind: str, key: str, name: str, source: Path) -> Path:
        entry_dir = self._dir(kind, key)
        copy_atomic(source, entry_dir / name)  # whole or absent, even when the disk fills mid-copy
        return entry_dir / name
