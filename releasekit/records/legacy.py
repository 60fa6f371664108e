"""Today's tool's files, parsed here: the ONE place that reads them (``json.loads``).

The validation receipt (``*.validation-receipt.<name>-rN.json``: the qualified image, the
source composition and the measured numbers, ``evidence``) is modelled here, since the
pipeline reads it (a baseline for ``validate``, headlines for the publish gate). The merge
manifest and the integration lock, which only ``releasekit import`` reads, are modelled in
``releasekit/legacy/models.py`` and parsed through :func:`read_legacy_file`.

Each reader refuses a file that is not that format with one line (``InputError``, exit 2).
Fields releasekit does not use are kept (``extra="allow"``) but never interpreted.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from releasekit.bounded_read import RECORD_MAX_BYTES, read_bounded
from releasekit.errors import InputError
from releasekit.records.base import strict_json

SHA1 = r"^[0-9a-f]{40}$"


class LegacyModel(BaseModel):
    """A file of today's tool: fields releasekit does not use are kept, never interpreted."""

    model_config = ConfigDict(extra="allow")


class LegacyValidationReceipt(LegacyModel):
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


M = TypeVar("M", bound=BaseModel)


def raw_tree(path: Path) -> Any:
    """The JSON tree of a file already read through its model: what ``manifest import`` accounts
    for leaf by leaf (every field is carried or reported)."""
    return strict_json(_bounded(path), f"{path}: file of today's tool")


def _bounded(path: Path) -> str:
    return read_bounded(path, RECORD_MAX_BYTES, within=path.parent).decode("utf-8")


def read_legacy_file(path: Path, model: type[M], what: str) -> M:
    """``path`` read through ``model``; anything else is one line (``InputError``, exit 2)."""
    try:
        text = _bounded(path)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a JSON {what} of today's tool: {exc}") from None
    # Today's tool's files come from outside: duplicate keys (one PR silently dropped), deep
    # nesting, huge numbers and millions of values are refused, as the manifest loader does.
    raw = strict_json(text, f"{path}: {what} of today's tool")
    if isinstance(raw, dict) and raw.get("schema_version") not in (None, 1):
        raise InputError(f"{path}: {what} schema_version {raw.get('schema_version')} is not supported (1 is)")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise InputError(f"{path}: not a {what} of today's tool: {where}: {err['msg']}") from None


def read_validation_receipt(path: Path) -> LegacyValidationReceipt:
    return read_legacy_file(path, LegacyValidationReceipt, "validation receipt")


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
