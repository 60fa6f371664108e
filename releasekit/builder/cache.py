"""The build cache: a wheel is reused only when everything it was made from is the same.

The key is the sha256 of a canonical JSON of (commit, tree, build recipe, toolchain,
cache format). An entry holds the wheel, its log and a small JSON record; the wheel's
sha256 is checked again on every hit, so a tampered cache is a miss, not a bad release.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel

from releasekit import atomic
from releasekit.builder.wheel import BuiltWheel
from releasekit.digests import file_sha256
from releasekit.manifest.models import BuildRecipe
from releasekit.records.lock import LockedGitComponent, LockedToolchain, canonical_json

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
    *,
    network: bool = False,
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
            # Every build names the image its sandbox ran (a venv recipe: the base image, whose Python
            # builds it); a key without one (none is made now) would name this interpreter.
            "python": None if builder_image else f"{sys.version_info.major}.{sys.version_info.minor}",
        },
    }
    if network:  # built with a network (the manifest's grant): never the same entry as one built without
        material["network"] = True
    return hashlib.sha256(canonical_json(material)).hexdigest()


class CacheEntry(BaseModel):
    key: str
    wheel: BuiltWheel


class BuildCache:
    """Entries under ``<root>/<kind>/<key[:2]>/<key>/``, each a directory made complete, then renamed into place.

    ``entry(kind, key)`` is the per-entry lock (``releasekit.atomic.entry_lock``) a caller holds
    around "look up, and on a miss make and store": two builds sharing the cache make an entry
    once, and the second finds it. A killed writer leaves only a temporary name, swept by the
    next writer of that entry.
    """

    def __init__(self, root: Path | None = None, *, enabled: bool = True) -> None:
        self.root = root or default_cache_dir()
        self.enabled = enabled

    def _dir(self, kind: str, key: str) -> Path:
        return self.root / kind / key[:2] / key

    @contextmanager
    def entry(self, kind: str, key: str) -> Iterator[None]:
        """Hold the lock of one entry (even with the cache disabled: a forced rebuild still refreshes it)."""
        with atomic.entry_lock(self._dir(kind, key)):
            yield

    def get_wheel(self, key: str, dest_dir: Path, log_dest: Path) -> BuiltWheel | None:
        if not self.enabled:
            return None
        entry_dir = self._dir("wheels", key)
        try:
            entry = CacheEntry.model_validate_json((entry_dir / "entry.json").read_text())
        except (OSError, ValueError):
            return None
        cached = entry_dir / entry.wheel.filename
        if not cached.is_file():
            return None
        dest_dir.mkdir(parents=True, exist_ok=True)
        copied = dest_dir / cached.name
        shutil.copyfile(cached, copied)
        # Checked on the copy the build goes on with, not on the entry it came from.
        if file_sha256(copied) != entry.wheel.sha256:
            copied.unlink()
            return None
        log_dest.parent.mkdir(parents=True, exist_ok=True)
        log = entry_dir / "build.log"
        text = log.read_text(encoding="utf-8") if log.is_file() else ""
        log_dest.write_text(
            f"# cache hit {key}: not rebuilt; log of the original build follows\n{text}", encoding="utf-8"
        )
        return entry.wheel.model_copy(update={"path": str(copied)})

    def put_wheel(self, key: str, wheel: BuiltWheel, log: Path) -> None:
        # Written even with --no-cache: a forced rebuild refreshes the entry for the next run.
        files = {wheel.filename: Path(wheel.path)}
        if log.is_file():
            files["build.log"] = log
        self._put(
            "wheels", key, files, {"entry.json": CacheEntry(key=key, wheel=wheel).model_dump_json(indent=2)}
        )

    def get_files(self, kind: str, key: str, names: list[str]) -> dict[str, Path] | None:
        """The entry's files by name, or None (disabled, absent, or any file missing: a miss)."""
        if not self.enabled:
            return None
        entry_dir = self._dir(kind, key)
        found = {name: entry_dir / name for name in names}
        return found if all(path.is_file() for path in found.values()) else None

    def put_files(self, kind: str, key: str, files: dict[str, Path]) -> dict[str, Path]:
        """Store ``files`` (name -> source) as one entry, visible only once every file is complete."""
        entry_dir = self._put(kind, key, files, {})
        return {name: entry_dir / name for name in files}

    def _put(self, kind: str, key: str, files: dict[str, Path], texts: dict[str, str]) -> Path:
        entry_dir = self._dir(kind, key)
        atomic.sweep_temporaries(entry_dir)
        tmp = atomic.new_entry_dir(entry_dir)
        try:
            for name, source in files.items():
                atomic.copy_file(source, tmp / name)
            for name, text in texts.items():
                atomic.write_bytes(tmp / name, text.encode("utf-8"))
            return atomic.publish_dir(tmp, entry_dir)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
