"""Open a component's mirror the way every plan command does (lock, check, compose).

Its own module so that ``locking.py`` (which composes trees for ``plan lock --compose``)
and ``compose.py`` (which opens mirrors) share it without importing each other.
"""

from __future__ import annotations

from pathlib import Path

from releasekit.git.mirror import Mirror
from releasekit.manifest import LoadedManifest
from releasekit.manifest.models import GitComponent


def open_mirror(
    comp: GitComponent, loaded: LoadedManifest, *, cache_dir: Path | None, allow_local: bool, fetch: bool
) -> Mirror:
    mirror = Mirror(comp.repo, cache_dir, allow_local=allow_local, base_dir=loaded.directory)
    return mirror.update() if fetch else mirror.ensure()
