"""Comparing two runs' records: byte for byte, apart from the fields documented as times.

The list mirrors docs/architecture.md ("Byte-stable records"): every other byte of a record
must be the same when a stage runs twice on the same inputs.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

# record file -> the dotted paths of its time fields (``*`` = every item of a list or mapping).
TIME_FIELDS: dict[str, tuple[str, ...]] = {
    "provenance.intoto.json": (
        "predicate.runDetails.metadata.invocationId",
        "predicate.runDetails.metadata.startedOn",
        "predicate.runDetails.metadata.finishedOn",
    ),
    "verification_summary.json": ("predicate.timeVerified",),
    # run.log_tail: the suite's own last lines, which end with pytest's "in 0.09s".
    "test receipt": ("started_at", "duration_s", "run.seconds", "run.log_tail"),
    "receipt": (
        "started_at",
        "finished_at",
        "duration_s",
        "startup_s",
        "checks.*.duration_s",
        "processes.*.ready_s",
        "interleaved_baseline.startup_s",
        "interleaved_baseline.checks.*.duration_s",
    ),
}


def _drop(data: object, parts: list[str]) -> None:
    if not parts or not isinstance(data, dict | list):
        return
    head, rest = parts[0], parts[1:]
    if head == "*":
        for item in data.values() if isinstance(data, dict) else data:
            _drop(item, rest)
    elif isinstance(data, dict) and head in data:
        if rest:
            _drop(data[head], rest)
        else:
            data[head] = "<time>"


def without_times(text: bytes, kind: str) -> object:
    data = copy.deepcopy(json.loads(text))
    for path in TIME_FIELDS[kind]:
        _drop(data, path.split("."))
    return data


def assert_same_record(first: Path, second: Path, kind: str | None = None) -> None:
    """The same bytes; for a record with time fields, the same JSON once those are set aside."""
    a, b = first.read_bytes(), second.read_bytes()
    kind = kind or first.name
    if kind not in TIME_FIELDS:
        assert a == b, f"{first.name} differs between two runs on the same inputs ({first} vs {second})"
        return
    assert without_times(a, kind) == without_times(b, kind), (
        f"{first.name} differs apart from its time fields"
    )


def archive_bytes(outdir: Path) -> dict[str, bytes]:
    """Every file under ``outdir/archive/`` (the release source archive) by its relative path."""
    top = outdir / "archive"
    found = {str(p.relative_to(top)): p.read_bytes() for p in sorted(top.rglob("*")) if p.is_file()}
    assert any(name.endswith(".bundle") for name in found), found.keys()
    return found
