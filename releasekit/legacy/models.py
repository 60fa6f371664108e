"""The merge manifest and the integration lock of today's tool, as typed models (``shared/reference/``
holds one of each); only ``releasekit import`` reads them.

- the merge manifest (``*.manifest.<component>.<name>.json``): repository, base ref, the
  PRs to merge in order, reviewed exclusions (whose reason may say which PR superseded it);
- the integration lock (``*.integration.lock.<name>-rN.json``): the base commit, each PR's
  head as merged, the composed tree and the patch's sha256.

They are parsed by ``records/legacy.py:read_legacy_file`` (the one reader of today's files,
which also models the validation receipt the pipeline reads).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from releasekit.records.legacy import SHA1, LegacyModel, read_legacy_file


class LegacyPR(LegacyModel):
    number: int = Field(ge=1)
    head: str = Field(pattern=SHA1)
    title: str = Field(min_length=1)


class LegacyExclusion(LegacyModel):
    number: int = Field(ge=1)
    head: str = Field(pattern=SHA1)
    disposition: str
    reason: str = Field(min_length=1)

    def superseded_by(self, planned: set[int]) -> int | None:
        """The planned PR this one went into, when the reason says so (``Superseded by PR #280``,
        ``Included ... in PR #254``, ``consolidated in PR #229``); None otherwise."""
        if self.disposition.lower() != "superseded":
            return None
        for m in re.finditer(
            r"\b(?:superseded by|included\b[^.]*?\bin|consolidated in|retained in)\s+PR\s+#(\d+)",
            self.reason,
            re.IGNORECASE,
        ):
            number = int(m.group(1))
            if number in planned:
                return number
        return None


class LegacyMergeManifest(LegacyModel):
    schema_version: Literal[1]
    name: str = Field(min_length=1)
    repository: str = Field(min_length=1)
    base_ref: str = Field(min_length=1)
    pull_requests: list[LegacyPR]
    reviewed_exclusions: list[LegacyExclusion] = Field(default_factory=list)


class LegacyLockBase(LegacyModel):
    repository: str
    ref: str
    commit: str = Field(pattern=SHA1)


class LegacyLockPR(LegacyModel):
    number: int = Field(ge=1)
    ref: str
    head: str = Field(pattern=SHA1)
    title: str | None = None
    disposition: str


class LegacyLockResult(LegacyModel):
    tree: str = Field(pattern=SHA1)
    patch: str | None = None
    patch_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")


class LegacyLockManifestRef(LegacyModel):
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class LegacyIntegrationLock(LegacyModel):
    schema_version: Literal[1]
    name: str = Field(min_length=1)
    base: LegacyLockBase
    manifest: LegacyLockManifestRef
    pull_requests: list[LegacyLockPR]
    result: LegacyLockResult


def json_leaves(data: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Every leaf of parsed JSON as ``(dotted path, value)``; list items are named by index.

    An empty object or list is a leaf of its own.
    """
    if isinstance(data, dict | list) and data:
        items = data.items() if isinstance(data, dict) else enumerate(data)
        out: list[tuple[str, Any]] = []
        for key, sub in items:
            out.extend(json_leaves(sub, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return [(prefix, data)]


def read_merge_manifest(path: Path) -> LegacyMergeManifest:
    return read_legacy_file(path, LegacyMergeManifest, "reference merge manifest")


def read_integration_lock(path: Path) -> LegacyIntegrationLock:
    return read_legacy_file(path, LegacyIntegrationLock, "integration lock")
