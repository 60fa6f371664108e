"""Side by side: a baseline served beside the candidate on the same host, their runs interleaved.

A performance number moves with whatever else the host does. A baseline measured minutes earlier,
or on another machine, carries that difference into the ratio a gate judges; one measured in the
same job, its runs alternating with the candidate's, shares it. Both servers are up at once (each a
container of its own image; nothing else differs), the idle one waits while the other is measured,
and the runs go in pairs whose first side alternates: A B, B A, A B, ... (ABBA), so a steady drift
of the host's speed over the job falls on both sides alike. Before the first pair a side whose server
has answered nothing yet answers one unmeasured run (its first requests pay for warm-up the other side
may already have paid).
docs/validate.md, *Side by side*, says what the receipt records and why both servers run at once on
the 2-core CI host.

``run_interleaved`` is the library entry: a frozen ``InterleavedRun`` in (two ``ServerSpec``s, the
cell and the checks to alternate, how many runs), an ``InterleavedResult`` out. The validate stage
(``CellRunner``) calls ``alternate`` on servers it already runs; a benchmark can throttle one side
(``ServerSpec.nano_cpus``) and call ``run_interleaved`` directly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from releasekit.docker_engine import Engine as DockerEngine
from releasekit.errors import InputError
from releasekit.findings import Finding, Findings, Location
from releasekit.manifest.validation import Cell, ValidationSpec
from releasekit.records.receipt import CheckResult, Metric
from releasekit.validate.checks import CheckContext, check_for, run_check
from releasekit.validate.client import EngineClient
from releasekit.validate.container import RunningServer, ServerFailed, ServerSpec, serve
from releasekit.validate.engines import engine_for
from releasekit.validate.stats import t_interval

Side = Literal["candidate", "baseline"]
WARMUP = "warm-up"


def side_order(runs: int) -> list[Side]:
    """The measured runs in the order they go: pairs whose first side alternates (A B B A A B ...)."""
    order: list[Side] = []
    for i in range(runs):
        order += ["candidate", "baseline"] if i % 2 == 0 else ["baseline", "candidate"]
    return order


def run_once(config: Any, ctx: CheckContext) -> CheckResult:
    """One run of one check; a check that crashes fails (CHECK_ERROR), it does not stop the run."""
    check = check_for(config)
    try:
        return run_check(check, ctx)
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - a check that crashes fails the cell, not the run
        f = Finding(
            code="CHECK_ERROR",
            message=f"{config.kind}: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}",
            location=Location(cell=ctx.cell.id),
        )
        return CheckResult(
            name=config.kind, kind=config.kind, passed=False, required=config.required, findings=[f]
        )


def merge_runs(results: list[CheckResult]) -> CheckResult:
    """k runs of one check -> one result: metric samples (in run order), mean as value, t-interval bounds."""
    if len(results) == 1:
        return results[0]
    first = results[0]
    merged: dict[str, Metric] = {}
    for name in [m.name for m in first.metrics]:
        ms = [m for r in results for m in r.metrics if m.name == name]
        samples = [m.value for m in ms if m.value is not None]
        if not samples:
            merged[name] = ms[0]
            continue
        iv = t_interval(samples)
        wilson = ms[0].low is not None
        merged[name] = Metric(
            name=name,
            value=iv.mean,
            unit=ms[0].unit,
            samples=samples,
            low=None if wilson else iv.low,
            high=None if wilson else iv.high,
        )
    return CheckResult(
        name=first.name,
        kind=first.kind,
        passed=all(r.passed for r in results),
        required=first.required,
        metrics=list(merged.values()),
        details={"runs": [r.details for r in results]},
        findings=[f for r in results for f in r.findings],
        duration_s=round(sum(r.duration_s for r in results), 3),
    )


@dataclass(frozen=True)
class Alternated:
    """One check run on both sides: each side's runs (in run order) and the order they went in."""

    candidate: list[CheckResult]
    baseline: list[CheckResult]
    order: list[str]


def alternate(
    config: Any,
    contexts: dict[Side, CheckContext],
    runs: int,
    *,
    run: Callable[[Any, CheckContext], CheckResult] = run_once,
    stop: Callable[[Side, CheckResult], bool] = lambda _side, _result: False,
    warmup: tuple[Side, ...] = ("candidate", "baseline"),
) -> Alternated:
    """``runs`` runs of ``config`` on each side, interleaved (``side_order``), after one unmeasured run on
    each side of ``warmup`` (a server that has answered nothing yet).

    ``stop(side, result)``: True ends the alternation there (a server was lost)."""
    out = Alternated([], [], [])
    for side in warmup:
        result = run(config, contexts[side])
        out.order.append(f"{side} {WARMUP}")
        if stop(side, result):
            getattr(out, side).append(result)
            return out
    for side in side_order(runs):
        result = run(config, contexts[side])
        getattr(out, side).append(result)
        out.order.append(side)
        if stop(side, result):
            break
    return out


@dataclass(frozen=True)
class InterleavedRun:
    """What ``run_interleaved`` serves and measures. ``cell``: the settings the checks read (its engine's
    health and metric paths, its speculative mode); ``baseline_cell``: the baseline side's, when another."""

    cell: Cell
    spec: ValidationSpec
    manifest_dir: Path
    candidate: ServerSpec
    baseline: ServerSpec
    checks: tuple[Any, ...]  # manifest check models (DecodeCheck, ThroughputCheck, ...), run in this order
    runs: int
    baseline_cell: Cell | None = None
    seed: int = 0
    warmup: tuple[Side, ...] = ("candidate", "baseline")


@dataclass(frozen=True)
class InterleavedResult:
    """Per check, each side's runs merged (``merge_runs``: samples in run order, so sample i of each side
    ran next to each other); the order of every run; each side's start-up seconds; what went wrong."""

    candidate: tuple[CheckResult, ...]
    baseline: tuple[CheckResult, ...]
    order: tuple[tuple[str, ...], ...]
    startup_s: tuple[float | None, float | None]
    findings: tuple[Finding, ...]
    logs: tuple[str, str]


def context_for(run: InterleavedRun, side: Side, server: RunningServer) -> CheckContext:
    """The check context of one side's server (the baseline's cell, when it has its own)."""
    cell = run.baseline_cell if side == "baseline" and run.baseline_cell is not None else run.cell
    engine = engine_for(cell.engine)
    spec = run.candidate if side == "candidate" else run.baseline
    return CheckContext(
        cell=cell,
        spec=run.spec,
        manifest_dir=run.manifest_dir,
        client=EngineClient(server.base_url, cell.model.name, timeout_s=cell.request_timeout_s),
        engine=engine,
        metrics_path=engine.metrics_path,
        read_log=server.logs,
        seed=run.seed,
        run_in_server=server.run_inside,
        server_port=spec.port,
    )


@contextmanager
def both_served(
    engine: DockerEngine, candidate: ServerSpec, baseline: ServerSpec
) -> Iterator[tuple[RunningServer, RunningServer]]:
    """Both containers started back to back (their start-ups overlap), removed whatever happens."""
    with ExitStack() as stack:
        a = stack.enter_context(serve(engine, candidate))
        b = stack.enter_context(serve(engine, baseline))
        yield a, b


def run_interleaved(run: InterleavedRun, engine: DockerEngine) -> InterleavedResult:
    """Serve both sides at once, wait for both, alternate each check ``run.runs`` times; containers removed."""
    findings = Findings()
    cand: list[CheckResult] = []
    base: list[CheckResult] = []
    orders: list[tuple[str, ...]] = []
    startup: list[float | None] = [None, None]
    with both_served(engine, run.candidate, run.baseline) as (a, b):
        adapter = engine_for(run.cell.engine)
        paths = [adapter.health_path, adapter.models_path]
        try:
            startup[0] = a.wait_ready(paths, run.cell.startup_timeout_s)
            startup[1] = b.wait_ready(paths, run.cell.startup_timeout_s)
        except ServerFailed as exc:
            findings.add(exc.code, exc.message, cell=run.cell.id)
        else:
            contexts: dict[Side, CheckContext] = {
                "candidate": context_for(run, "candidate", a),
                "baseline": context_for(run, "baseline", b),
            }
            for config in run.checks:
                done = alternate(config, contexts, run.runs, warmup=run.warmup)
                cand.append(merge_runs(done.candidate))
                base.append(merge_runs(done.baseline))
                orders.append(tuple(done.order))
        logs = (a.logs(), b.logs())
    return InterleavedResult(
        candidate=tuple(cand),
        baseline=tuple(base),
        order=tuple(orders),
        startup_s=(startup[0], startup[1]),
        findings=tuple(findings),
        logs=logs,
    )


def server_spec(cell: Cell, image: str, manifest_dir: Path, spec: ValidationSpec) -> ServerSpec:
    """What serves a single-server ``cell`` from ``image`` (an image ID), as its engine adapter renders it
    (CPU cells; a GPU cell's devices are the caller's to add). A prefill/decode cell is an InputError."""
    from releasekit.validate.models import resolve_model
    from releasekit.validate.topology import is_disaggregated

    if is_disaggregated(cell):
        raise InputError(f"cell '{cell.id}' is a prefill/decode topology, not one server")
    resolved = resolve_model(cell.model, manifest_dir)
    command = engine_for(cell.engine).serve_command(
        cell, resolved.engine_arg, schemes=spec.quantization_schemes
    )
    return ServerSpec(
        image=image,
        argv=command.argv,
        env={**cell.env, **command.env},
        port=command.port,
        mounts=resolved.mounts,
        cell_id=cell.id,
    )


def throttled(spec: ServerSpec, cpus: float) -> ServerSpec:
    """``spec`` with a CPU quota of ``cpus`` cores (Docker NanoCpus): a known slowdown of one side."""
    return spec.model_copy(update={"nano_cpus": int(round(cpus * 1e9))})


__all__ = [
    "Alternated",
    "InterleavedResult",
    "InterleavedRun",
    "alternate",
    "merge_runs",
    "run_interleaved",
    "run_once",
    "server_spec",
    "side_order",
    "throttled",
]
