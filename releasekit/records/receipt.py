"""``receipts/<cell-id>.json``: what one validation cell measured, bound to the image, the lock and the cell.

The validate stage writes one per cell; publish reads these files (never validate's internals),
so the schema is versioned and strict, and additive only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final, Literal

from pydantic import Field

from releasekit.bounded_read import read_bounded
from releasekit.errors import InputError
from releasekit.findings import FindingList
from releasekit.manifest.validation import Cell
from releasekit.records.base import Record, Strict, bounded_json, load_record, write_record
from releasekit.records.dsse import ENVELOPE_SUFFIX

RECEIPT_SCHEMA: Final = "releasekit.receipt/v1"
# ``<cell-id>.dsse.json`` beside each receipt: the validating host signs the receipt's exact bytes.
RECEIPT_PAYLOAD_TYPE: Final = "application/vnd.releasekit.receipt+json"


def is_receipt_file(path: Path) -> bool:
    """A receipt (``*.json``), not the signature envelope (``*.dsse.json``) beside it."""
    return path.name.endswith(".json") and not path.name.endswith(ENVELOPE_SUFFIX)


class Metric(Strict):
    """One measured quantity. ``samples`` holds every run's value when the check was repeated."""

    name: str
    value: float | None
    unit: str
    samples: list[float] = Field(default_factory=list)
    low: float | None = Field(default=None, description="lower 95 % bound (Wilson or t-interval)")
    high: float | None = None


class CheckResult(Strict):
    name: str
    kind: str
    passed: bool
    required: bool = True
    metrics: list[Metric] = Field(default_factory=list)
    details: dict[str, object] = Field(default_factory=dict)
    findings: FindingList = Field(default_factory=list)
    duration_s: float = 0.0


class SampleSummary(Strict):
    """One side of a gate: n runs, their mean, standard deviation and two-sided 95 % t-interval.

    A baseline that is one number (from a receipt or the manifest) has n 1 and no sd or interval:
    its spread is unknown, and not in the gate's bound."""

    n: int
    mean: float
    sd: float | None = None
    low: float | None = None
    high: float | None = None


class GatePower(Strict):
    """What the gate can tell apart, from the measured variation (docs/validate.md, *Gate statistics*)."""

    confidence: float = Field(default=0.95, description="of the one-sided bound the gate applies")
    power: float = Field(default=0.8, description="at which the detectable regression is stated")
    df: float = Field(
        description="degrees of freedom of the bound (Welch-Satterthwaite with baseline samples)"
    )
    t: float = Field(description="the one-sided Student t quantile applied")
    se: float = Field(description="the ratio's relative standard error from the measured sd")
    guards: float | None = Field(
        description="the regression the gate must catch (guards, else from min_ratio)"
    )
    detectable_regression: float = Field(
        description="the smallest relative drop a one-sided 95 % test finds with probability `power`"
    )
    false_failure_rate: float = Field(description="P(an unchanged candidate fails this gate)")
    detection_rate: float | None = Field(
        default=None, description="P(a candidate worse by `guards` fails this gate)"
    )
    runs_needed: int | None = Field(
        default=None, description="runs that would detect `guards` (None: enough, or more than 100)"
    )
    underpowered: bool = False


class GateResult(Strict):
    metric: str
    passed: bool
    candidate: float | None = None
    candidate_low: float | None = None
    candidate_high: float | None = None
    runs: int = 1
    baseline: str | None = None
    baseline_value: float | None = None
    ratio_low: float | None = None
    ratio: float | None = None
    bound: str = Field(description="the rule applied, for a person")
    note: str | None = None
    # Added for issue 45 (defaults keep earlier receipts readable): how the gate judged, and its power.
    test: (
        Literal["point", "metric-bound", "t-one-sided-95", "fieller-one-sided-95", "paired-t-one-sided-95"]
        | None
    ) = Field(
        default=None,
        description="point: one run, no bound; metric-bound: the metric's own (Wilson) bound; "
        "t-/fieller-one-sided-95: a one-sided 95 % bound of the ratio of means; paired-t-one-sided-95: "
        "runs interleaved with the baseline's, the one-sided 95 % t-bound of the mean log ratio of each pair",
    )
    baseline_kind: Literal["samples", "receipt", "manifest", "interleaved"] | None = None
    candidate_stats: SampleSummary | None = None
    baseline_stats: SampleSummary | None = None
    ratio_high: float | None = Field(default=None, description="one-sided 95 % upper bound of the ratio")
    gate_power: GatePower | None = None
    # Side by side (issue 45): where the baseline's numbers came from, beyond its name.
    baseline_image: str | None = Field(
        default=None, description="interleaved: the image the baseline served from, as given"
    )
    baseline_image_id: str | None = Field(default=None, description="interleaved: that image's ID")
    baseline_cell: str | None = Field(default=None, description="interleaved: the cell the baseline served")
    baseline_order: list[str] | None = Field(
        default=None, description="interleaved: the measured runs in the order they ran (candidate/baseline)"
    )
    ratios: list[float] | None = Field(
        default=None, description="interleaved: candidate/baseline of each pair of adjacent runs"
    )
    baseline_receipt: str | None = Field(
        default=None, description="a baseline from an earlier receipt: that file, as the manifest names it"
    )
    baseline_host: dict[str, str] | None = Field(
        default=None, description="a receipt baseline: the host the receipt names (None: it names none)"
    )


class InterleavedBaseline(Strict):
    """A baseline served beside the candidate in this cell's job, its runs alternating with the candidate's
    (``validate/interleave.py``): what served it, the order every run went in, and its own check results."""

    name: str = Field(description="the baseline's name under validation.baselines")
    image: str = Field(description="the image it served from, as given (the manifest's, or --baseline-image)")
    image_id: str
    cell_id: str = Field(
        description="the cell whose server it ran (the gated cell itself, or the baseline's cell)"
    )
    order: dict[str, list[str]] = Field(
        default_factory=dict, description="check kind -> its runs in the order they went (warm-ups named)"
    )
    startup_s: float | None = None
    checks: list[CheckResult] = Field(default_factory=list, description="the baseline side's runs, merged")
    log_tail: list[str] = Field(default_factory=list)


class Invocation(Strict):
    """Exactly what was run: nothing may influence the server that is not written here."""

    engine: str
    argv: list[str]
    env: dict[str, str] = Field(
        description="the container's effective environment: image ENV plus the cell's"
    )
    image_env: dict[str, str] = Field(default_factory=dict)
    cell_env: dict[str, str] = Field(default_factory=dict)
    gpus: list[int] = Field(default_factory=list)
    mounts: dict[str, str] = Field(default_factory=dict, description="container path -> what it holds")


class ModelRecord(Strict):
    """The model a cell served: its source, revision, and every file hash the runner checked."""

    name: str
    display_name: str | None = None
    hub: str | None = None
    revision: str | None = None
    path: str | None = Field(default=None, description="the manifest's path")
    directory: str | None = Field(default=None, description="the model directory checked on the runner")
    engine_arg: str = Field(description="what the engine was told to load")
    expected: dict[str, str] = Field(default_factory=dict, description="file -> sha256 the manifest pins")
    observed: dict[str, str] = Field(
        default_factory=dict, description="file -> sha256 measured before serving"
    )
    verified: bool = Field(default=False, description="every pinned file was present with its pinned sha256")


class ProcessRecord(Strict):
    """One process of a cell's topology (a prefill or decode worker, the router): what ran and how it ended."""

    name: str = Field(description="e.g. prefill-0, decode-0, router")
    role: str = Field(description="server | prefill | decode | router")
    argv: list[str]
    env: dict[str, str] = Field(default_factory=dict, description="what the cell and the adapter set for it")
    gpus: list[int] = Field(default_factory=list)
    port: int | None = None
    ports: dict[str, int] = Field(
        default_factory=dict, description="further named ports (bootstrap, metrics, ...)"
    )
    where: str = Field(default="container", description="container | in-process (releasekit's own router)")
    ready_s: float | None = Field(
        default=None, description="seconds from start until it was ready; None: never"
    )
    status: str = Field(
        default="not-started", description="running | exited | not-started, when the cell ended"
    )
    exit_code: int | None = None
    metrics: dict[str, float] = Field(
        default_factory=dict, description="its own /metrics, scraped at the end"
    )
    log_tail: list[str] = Field(default_factory=list)


class Receipt(Record):
    kind = "receipt"

    schema_: Literal["releasekit.receipt/v1"] = Field(default=RECEIPT_SCHEMA, alias="schema")
    cell_id: str
    cell: Cell
    cell_sha256: str = Field(
        description="sha256 of the cell's canonical JSON: which matrix entry this proves"
    )
    image: str
    image_id: str
    # The registry digest the image was pulled by (releasekit stage / --staged), None for a local image.
    image_digest: str | None = None
    lock_sha256: str | None
    manifest_sha256: str
    manifest_name: str
    passed: bool
    status: Literal["passed", "failed", "error"]
    started_at: str
    finished_at: str
    duration_s: float
    startup_s: float | None = None
    invocation: Invocation | None = None
    metrics: dict[str, Metric] = Field(default_factory=dict)
    checks: list[CheckResult] = Field(default_factory=list)
    gates: list[GateResult] = Field(default_factory=list)
    findings: FindingList = Field(default_factory=list)
    log_tail: list[str] = Field(default_factory=list)
    host: dict[str, str] = Field(default_factory=dict)
    # Which engine adapter (releasekit.validate.engines) judged this cell, and its version.
    engine_adapter: str | None = None
    engine_adapter_version: str | None = None
    # The model as a pinned input (additive): source, revision, the hashes checked before serving.
    model: ModelRecord | None = None
    # Every process of a prefill/decode topology (empty for a single-server cell).
    processes: list[ProcessRecord] = Field(default_factory=list)
    # A baseline measured beside the candidate in this job (issue 45, side by side); None when none.
    interleaved_baseline: InterleavedBaseline | None = None


def cell_sha256(cell: Cell) -> str:
    import hashlib

    canonical = json.dumps(cell.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def write_receipt(receipt: Receipt, directory: Path) -> Path:
    path = directory / f"{receipt.cell_id}.json"
    write_record(receipt, path)
    return path


def read_receipt(path: Path) -> Receipt:
    return load_record(Receipt, path)


def read_receipts(directory: Path) -> list[Receipt]:
    if not directory.is_dir():
        raise InputError(f"{directory}: not a directory of receipts")
    return [read_receipt(p) for p in sorted(directory.glob("*.json")) if is_receipt_file(p)]


def receipt_values(path: Path) -> dict[str, float]:
    """Every number a receipt file holds: ours (its metrics) or today's tool's (its ``evidence``).

    Which one it is, is decided by the file's own marker: ours has ``schema``
    (``releasekit.receipt/v1``), today's tool's ``schema_version`` and ``evidence``.
    Raises ``InputError`` (one line) for a file that is neither.
    """
    from releasekit.records.legacy import read_validation_receipt

    if _is_todays_tools(path):
        return read_validation_receipt(path).metrics()
    receipt = read_receipt(path)
    return {name: m.value for name, m in receipt.metrics.items() if m.value is not None}


def _is_todays_tools(path: Path) -> bool:
    """Whether a receipt file is today's tool's (``schema_version`` and ``evidence``) rather than ours;
    ``InputError`` (one line) for a file that is not JSON."""
    try:
        raw = bounded_json(
            read_bounded(path, Receipt.max_bytes, within=path.parent).decode("utf-8"), str(path)
        )
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not a JSON receipt: {exc}") from None
    return isinstance(raw, dict) and "schema_version" in raw and "evidence" in raw


def receipt_samples(path: Path) -> dict[str, list[float]]:
    """The runs behind each repeated metric of one of our receipts (two or more samples); {} for today's tool's."""
    if _is_todays_tools(path):
        return {}
    receipt = read_receipt(path)
    return {name: list(m.samples) for name, m in receipt.metrics.items() if len(m.samples) >= 2}


def receipt_host(path: Path) -> dict[str, str] | None:
    """The host one of our receipts says it ran on (None: today's tool's receipt, or ours naming none)."""
    if _is_todays_tools(path):
        return None
    return dict(read_receipt(path).host) or None


# What makes two hosts of one kind (the hostname does not: CI runners of one kind differ only there).
HOST_KIND_KEYS = ("machine", "cpus", "gpu")


def host_kind(host: dict[str, str]) -> dict[str, str]:
    """The part of a receipt's ``host`` that says what kind of machine it was."""
    return {k: host[k] for k in HOST_KIND_KEYS if k in host}
