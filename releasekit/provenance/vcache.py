"""The verifier's own cache: nothing the builder wrote, and every entry checked by content on each read.

verify-provenance rebuilds the release to compare it with the candidate. The build cache
(``$RELEASEKIT_CACHE/build``) is written by the build being checked, so by anyone who controls
that build: a wheel, a release layer or a base config planted there under the right key would
be "reproduced" as is, and the candidate that carries it would verify. So the reproduction never
opens that directory. It builds into a private directory that this process makes
(``mkdtemp``: mode 0700, a fresh name) and removes at exit, and it keeps, in this process's
memory, the sha256 of every entry it writes there. A read hashes the entry again and takes it
only when it equals that digest; anything else is a miss, rebuilt. A new process starts empty,
so ``releasekit verify-provenance`` always rebuilds every wheel and reinstalls the release
layer; repeated runs in one process (the demo, the tests, several images in a loop) build once
and still read only bytes they verified. ``--no-cache`` gives a run a cache of its own.

The base image's config and layer list and its file table are kept in memory only (no file),
keyed by the image ID, after they were read from the Docker Engine and checked against it
(``provenance/reproduce.py``: ``checked_base``).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from releasekit.builder.cache import BuildCache
from releasekit.builder.image import BaseLayers
from releasekit.builder.wheel import BuiltWheel
from releasekit.digests import file_sha256

if TYPE_CHECKING:
    from releasekit.provenance.accounting import Expected


class VerifierCache(BuildCache):
    """A BuildCache in a directory only this process made, whose entries are checked by content on every read."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, enabled=True)
        self._digests: dict[tuple[str, str, str], str] = {}  # (kind, key, name) -> sha256 written
        self.bases: dict[str, BaseLayers] = {}  # base image ID -> its checked config and layers
        self.base_tables: dict[str, dict[str, Expected]] = {}  # base image ID -> its export's table

    def get_wheel(self, key: str, dest_dir: Path, log_dest: Path) -> BuiltWheel | None:
        want = self._digests.get(("wheels", key, ""))
        if want is None:
            return None
        wheel = super().get_wheel(key, dest_dir, log_dest)
        if wheel is None or wheel.sha256 != want or file_sha256(Path(wheel.path)) != want:
            return None  # the copy about to be used is not what this process built: rebuild
        return wheel

    def put_wheel(self, key: str, wheel: BuiltWheel, log: Path) -> None:
        digest = file_sha256(Path(wheel.path))
        super().put_wheel(key, wheel.model_copy(update={"sha256": digest}), log)
        self._digests[("wheels", key, "")] = digest

    def get_files(self, kind: str, key: str, names: list[str]) -> dict[str, Path] | None:
        found = super().get_files(kind, key, names)
        if found is None:
            return None
        for name, path in found.items():
            want = self._digests.get((kind, key, name))
            if want is None or file_sha256(path) != want:
                return None  # not what this process wrote: rebuild
        return found

    def put_files(self, kind: str, key: str, files: dict[str, Path]) -> dict[str, Path]:
        digests = {name: file_sha256(source) for name, source in files.items()}
        stored = super().put_files(kind, key, files)
        for name, digest in digests.items():
            self._digests[(kind, key, name)] = digest
        return stored


_shared: VerifierCache | None = None


def _private_root() -> Path:
    root = Path(tempfile.mkdtemp(prefix="releasekit-verifier-cache-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


@contextmanager
def verifier_cache(*, fresh: bool) -> Iterator[VerifierCache]:
    """This process's verifier cache, or (``fresh``: ``--no-cache``) an empty one for this run alone."""
    global _shared
    if fresh:
        with tempfile.TemporaryDirectory(prefix="releasekit-verifier-cache-") as tmp:
            yield VerifierCache(Path(tmp))
        return
    if _shared is None:
        _shared = VerifierCache(_private_root())
    yield _shared
