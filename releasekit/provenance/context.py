"""Everything the checks look at, gathered once: image facts, probe report, inventory, expectations.

``VerifyContext`` is frozen: the verifier gathers everything first and builds it once, and
no check (nor the verifier) changes it afterwards.
"""

from __future__ import annotations

import functools
import hashlib
import posixpath
from dataclasses import dataclass, field
from typing import Any

from releasekit.provenance.accounting import Expected
from releasekit.provenance.expected import ExpectedComponent
from releasekit.provenance.image import ImageFacts, ProbeRun
from releasekit.provenance.installed import InstalledDist, WheelRecord, canonical_name
from releasekit.provenance.inventory import Inventory
from releasekit.provenance.reproduce import Reproduction
from releasekit.records.build import BuildRecord
from releasekit.records.lock import Lock


@dataclass(frozen=True)
class VerifyContext:
    image: ImageFacts
    lock: Lock
    lock_sha256: str
    manifest: Any | None  # releasekit.manifest.Manifest
    record: BuildRecord | None
    components: dict[str, ExpectedComponent]
    wheels: dict[str, WheelRecord]  # component name -> the wheel the build wrote
    wheel_errors: dict[str, str]
    probe: ProbeRun
    inventory: Inventory
    sites: list[str]  # site directories (resolved), in sys.path order
    sys_path: list[str]  # every sys.path directory (resolved), in order
    stdlib: list[str]
    dists: list[InstalledDist]
    dpkg_owned: set[str] = field(default_factory=set)
    dpkg_md5: dict[str, str] = field(default_factory=dict)
    allow_local_repos: bool = False
    cache_dir: str | None = None
    # Verification by reproduction: what the lock and manifest rebuild, and the engine's own view
    # of the candidate (its config and layer digests), never the candidate's files or build.json.
    reproduction: Reproduction | None = None
    image_config: dict[str, Any] = field(default_factory=dict)
    layers: list[str] = field(default_factory=list)
    expected_files: dict[str, Expected] | None = None
    limits: list[str] = field(default_factory=list)  # bounds the verifier hit (each a sentence)
    # False when the image's filesystem could not be read (the export aborted): only the checks that
    # need no files apply then.
    filesystem_read: bool = True
    # The image config's architecture (amd64, arm64, ...): the platform of its requirement markers.
    architecture: str = ""

    def dist_for(self, component: ExpectedComponent) -> InstalledDist | None:
        if not component.distribution:
            return None
        key = canonical_name(component.distribution)
        matches = [d for d in self.dists if d.key == key]
        # The first on sys.path is the one Python imports.
        matches.sort(key=lambda d: self.sites.index(d.site) if d.site in self.sites else len(self.sites))
        return matches[0] if matches else None

    def owner_of(self, path: str) -> InstalledDist | None:
        for dist in self.dists:
            if path in dist.files:
                return dist
        return None

    @functools.cached_property
    def record_owned(self) -> frozenset[str]:
        return frozenset(p for d in self.dists for p in d.files)

    def owned(self, path: str) -> bool:
        if path in self.dpkg_owned or path in self.record_owned:
            return True
        # Byte-code caches are written at install or first import; they are owned when their source is.
        directory, name = posixpath.split(path)
        if posixpath.basename(directory) == "__pycache__" and name.endswith(".pyc"):
            source = posixpath.join(posixpath.dirname(directory), name.split(".", 1)[0] + ".py")
            return source in self.dpkg_owned or source in self.record_owned
        return False

    def dpkg_intact(self, path: str) -> bool | None:
        """None: dpkg has no checksum for it; else whether its md5 matches dpkg's."""
        expected = self.dpkg_md5.get(path)
        if expected is None:
            return None
        entry = self.inventory.get(path)
        if entry is not None and entry.md5 is not None:
            return entry.md5 == expected
        data = self.inventory.read(path)
        if data is None:
            return None  # not read (outside the Python roots): nothing to say
        return hashlib.md5(data).hexdigest() == expected  # noqa: S324 - dpkg's own checksum format


class NeedsImageFiles:
    """Mixin for a check that judges the image's files: it applies only when they were read."""

    not_applied_reason = "the image's filesystem could not be read"

    def applies(self, ctx: VerifyContext) -> bool:
        return ctx.filesystem_read
