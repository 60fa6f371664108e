"""Today's tool's files, as typed models: the ONE place that reads them.

Three files of the tool people use today (``shared/reference/`` holds one of each):

- the merge manifest (``*.manifest.<component>.<name>.json``): repository, base ref, the
  PRs to merge in order, reviewed exclusions (whose reason may say which PR superseded it);
- the integration lock (``*.integration.lock.<name>-rN.json``): the base commit, each PR's
  head as merged, the composed tree and the patch's sha256;
- the validation receipt (``*.validation-receipt.<name>-rN.json``): the qualified image,
  the source composition and the measured numbers (``evidence``).

Each reader refuses a file that is not that format with one line (``InputError``, exit 2).
Fields releasekit does not use are kept (``extra="allow"``) but never interpreted.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from releasekit.bounded_read import RECORD_MAX_BYTES, read_bounded
from releasekit.errors import InputError

_SHA1 = r"^[0-9a-f]{40}$"


class _Legacy(BaseModel):
    model_config = ConfigDict(extra="allow")


class LegacyPR(_Legacy):
    number: int = Field(ge=1)
    head: str = Field(pattern=_SHA1)
    title: str = Field(min_length=1)


class LegacyExclusion(_Legacy):
    number: int = Field(ge=1)
    head: str = Field(pattern=_SHA1)
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


class LegacyMergeManifest(_Legacy):
    schema_version: Literal[1]
    name: str = Field(min_length=1)
    repository: str = Field(min_length=1)
    base_ref: str = Field(min_length=1)
    pull_requests: list[LegacyPR]
    reviewed_exclusions: list[LegacyExclusion] = Field(default_factory=list)


class LegacyLockBase(_Legacy):
    repository: str
    ref: str
    commit: str = Field(pattern=_SHA1)


class LegacyLockPR(_Legacy):
    number: int = Field(ge=1)
    ref: str
    head: str = Field(pattern=_SHA1)
    title: str | None = None
    disposition: str


class LegacyLockResult(_Legacy):
    tree: str = Field(pattern=_SHA1)
    patch: str | None = None
    patch_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")


class LegacyLockManifestRef(_Legacy):
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class LegacyIntegrationLock(_Legacy):
    schema_version: Literal[1]
    name: str = Field(min_length=1)
    base: LegacyLockBase
    manifest: LegacyLockManifestRef
    pull_requests: list[LegacyLockPR]
    result: LegacyLockResult


class LegacyValidationReceipt(_Legacy):
    schema_version: Literal[1]
    status: str
    image: str
    image_id: str | None = None
    registry_digest: str | None = None
    validated_at: str | None = None
    source_composition: dict[str, Any] = Field(default_factory=dict)
    runtime_packages: dict[str, str] = Field(default_factory=dict)
    evidence: dict[str, Any] = Field(default_factory=dict)

    def metrics(self) -> dict[str, float]:
        """Every number of ``evidence`` as ``<profile>.<name>[.<key>]`` (e.g. ``mtp0.decode_tps.c1``).

        A list's numbers are named by their index (``...64000_runs.0``); strings and booleans
        are left out: a baseline holds numbers only.
        """
        return {name: value for _, name, value in self.metric_leaves()}

    def metric_leaves(self) -> list[tuple[str, str, float]]:
        """``(field path in the receipt, metric name, value)`` for every number of ``evidence``."""
        out: list[tuple[str, str, float]] = []

        def walk(path: str, prefix: str, value: Any) -> None:
            if isinstance(value, bool):
                return
            if isinstance(value, int | float):
                out.append((path, prefix, float(value)))
            elif isinstance(value, dict | list):
                items = value.items() if isinstance(value, dict) else enumerate(value)
                for key, sub in items:
                    part = re.sub(r"[^a-z0-9_]+", "_", str(key).lower()).strip("_") or "_"
                    walk(f"{path}.{key}", f"{prefix}.{part}" if prefix else part, sub)

        walk("evidence", "", self.evidence)
        return out


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


M = TypeVar("M", bound=BaseModel)


def raw_tree(path: Path) -> Any:
    """The JSON tree of a file already read through its model: what ``manifest import`` accounts
    for leaf by leaf (every field is carried or reported)."""
    return json.loads(_bounded(path))


def _bounded(path: Path) -> str:
    return read_bounded(path, RECORD_MAX_BYTES, within=path.parent).decode("utf-8")


def _read(path: Path, model: type[M], what: str) -> M:
    try:
        raw = json.loads(_bounded(path))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not a JSON {what} of today's tool: {exc}") from None
    if isinstance(raw, dict) and raw.get("schema_version") not in (None, 1):
        raise InputError(f"{path}: {what} schema_version {raw.get('schema_version')} is not supported (1 is)")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise InputError(f"{path}: not a {what} of today's tool: {where}: {err['msg']}") from None


def read_merge_manifest(path: Path) -> LegacyMergeManifest:
    return _read(path, LegacyMergeManifest, "reference merge manifest")


def read_integration_lock(path: Path) -> LegacyIntegrationLock:
    return _read(path, LegacyIntegrationLock, "integration lock")


def read_validation_receipt(path: Path) -> LegacyValidationReceipt:
    return _read(path, LegacyValidationReceipt, "validation receipt")


# Receipt statuses that mean the cell passed (today's tool writes "qualified").
LEGACY_PASSING = frozenset({"passed", "pass", "qualified", "ok", "success"})


class Headline(BaseModel):
    """One number a receipt reports, as RELEASE.md shows it: a gated metric with its baseline, or a measurement."""

    name: str
    value: int | float | str | None = None
    unit: str | None = None
    baseline: int | float | None = None
    passed: bool | None = None

    @classmethod
    def from_legacy(cls, item: dict[str, Any]) -> Headline | None:
        """A metric object of today's tool (``name``/``metric``, ``value``/``measured``, ``baseline[_value]``)."""
        name = item.get("name") or item.get("metric")
        value = item.get("value", item.get("measured"))
        if name is None or value is None or isinstance(value, bool):
            return None
        baseline = item.get("baseline_value", item.get("baseline"))
        unit = item.get("unit")
        return cls(
            name=str(name),
            value=value if isinstance(value, int | float) else str(value),
            unit=str(unit) if unit else None,
            baseline=baseline
            if isinstance(baseline, int | float) and not isinstance(baseline, bool)
            else None,
        )


class LegacyReceiptFacts(BaseModel):
    """The few facts the publish gate reads from a receipt of today's tool (no ``schema`` key)."""

    cell: str | None
    image_id: str | None
    lock_sha256: str | None
    passed: bool
    env: dict[str, str] = Field(default_factory=dict)
    args: list[str] = Field(default_factory=list)
    metrics: list[Headline] = Field(default_factory=list)


def legacy_receipt_facts(data: dict[str, Any]) -> LegacyReceiptFacts:
    """Read a receipt of today's tool leniently: its cell, image, lock, pass/fail and runtime.

    Raises ``ValueError`` (one line) when the runtime it records has the wrong shape.
    """
    cell = data.get("cell") or data.get("cell_id")
    if isinstance(cell, dict):
        cell = cell.get("id")
    lock = data.get("lock")
    lock_sha = data.get("lock_sha256") or (lock.get("sha256") if isinstance(lock, dict) else None)
    passed = data.get("passed")
    if passed is None:
        passed = str(data.get("status", "")).lower() in LEGACY_PASSING
    found = data.get("runtime")
    runtime: dict[str, Any] = found if isinstance(found, dict) else {}
    env = runtime.get("env", data.get("env", {})) or {}
    args = runtime.get("args", data.get("args", [])) or []
    if not isinstance(env, dict) or not isinstance(args, list):
        raise ValueError("runtime.env must be an object and runtime.args a list")
    found_metrics = data.get("metrics")
    items = [m for m in found_metrics if isinstance(m, dict)] if isinstance(found_metrics, list) else []
    metrics = [h for h in map(Headline.from_legacy, items) if h is not None]
    return LegacyReceiptFacts(
        cell=str(cell) if cell else None,
        image_id=str(data["image_id"]) if data.get("image_id") else None,
        lock_sha256=str(lock_sha) if lock_sha else None,
        passed=passed is True,
        env={str(k): str(v) for k, v in env.items()},
        args=[str(a) for a in args],
        metrics=metrics,
    )
