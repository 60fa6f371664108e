"""The validate stage: run matrix cells against a candidate image and write one receipt per cell.

``run_validation`` is what the CLI and ``releasekit demo`` call. Per cell: render the
serve command, refuse forbidden switches *before* starting anything (in the effective
environment, image ENV included: a switch baked into the image is still a switch), start
the server in a container, wait for it with a deadline, run the checks, judge the gates,
and write the receipt; the container is always removed.
"""

from __future__ import annotations

import os
import platform
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from releasekit.clock import Clock
from releasekit.docker_engine import Engine as DockerEngine
from releasekit.docker_engine import EngineError
from releasekit.errors import InputError
from releasekit.findings import Finding, Findings, Location, Severity
from releasekit.manifest import LoadedManifest
from releasekit.manifest.validation import Cell, ForbiddenSwitches, ValidationSpec
from releasekit.records.lock import lock_file_sha256, read_lock
from releasekit.records.receipt import (
    CheckResult,
    GateResult,
    InterleavedBaseline,
    Invocation,
    Metric,
    ModelRecord,
    ProcessRecord,
    Receipt,
    cell_sha256,
    write_receipt,
)
from releasekit.validate.checks import CheckContext, check_for
from releasekit.validate.client import EngineClient
from releasekit.validate.container import RunningServer, ServerFailed, ServerSpec, image_facts, serve
from releasekit.validate.engines import engine_for
from releasekit.validate.engines.interface import Engine, ServeCommand
from releasekit.validate.gates import BaselineValues, evaluate_gate, resolve_baseline
from releasekit.validate.interleave import Side, alternate, merge_runs, run_once
from releasekit.validate.locked_inputs import with_locked_inputs
from releasekit.validate.models import ResolvedModel, check_model, resolve_model
from releasekit.validate.scheduler import Job, run_packed
from releasekit.validate.topology import PortPlan, Topology, is_disaggregated
from releasekit.validate.topology_run import serve_topology

LOG_TAIL_LINES = 60
LOCK_LABEL = "io.releasekit.lock.sha256"


class CellSummary(BaseModel):
    cell_id: str
    status: str
    passed: bool
    required: bool
    receipt: str
    duration_s: float
    codes: list[str] = Field(default_factory=list)


class ValidationResult(BaseModel):
    image: str
    image_id: str
    lock_sha256: str | None
    manifest_sha256: str
    receipts_dir: str
    cells: list[CellSummary]
    findings: list[Finding] = Field(default_factory=list)
    passed: bool


def forbidden_switches(argv: list[str], env: dict[str, str], forbidden: ForbiddenSwitches) -> list[str]:
    """Every forbidden env var (NAME or NAME=value) and flag present in what the server runs with."""
    hits: list[str] = []
    for rule in forbidden.env:
        name, eq, value = rule.partition("=")
        if name in env and (not eq or env[name] == value):
            hits.append(f"env {name}={env[name]}")
    for flag in forbidden.args:
        for arg in argv:
            if arg == flag or arg.startswith(flag + "="):
                hits.append(f"flag {arg}")
    return hits


def host_facts() -> dict[str, str]:
    """What a receipt says of the host that measured it (``records.receipt.host_kind``: its kind)."""
    return {"hostname": platform.node(), "machine": platform.machine(), "cpus": str(os.cpu_count())}


def beside_values(record: InterleavedBaseline) -> BaselineValues:
    """A baseline served beside the candidate, as the gates read it: each metric's runs in run order."""
    metrics = {m.name: m for c in record.checks for m in c.metrics}
    paired = {
        name: list(m.samples) or ([m.value] if m.value is not None else []) for name, m in metrics.items()
    }
    return BaselineValues(
        name=record.name,
        values={name: m.value for name, m in metrics.items() if m.value is not None},
        paired={name: runs for name, runs in paired.items() if runs},
        image=record.image,
        image_id=record.image_id,
        cell=record.cell_id,
        order=[run for kind in sorted(record.order) for run in record.order[kind]],
    )


def runs_for(cell: Cell, kind: str) -> int:
    return max([g.runs for g in cell.gates if g.metric.split(".", 1)[0] == kind] or [1])


def _tail(log: str) -> list[str]:
    return log.splitlines()[-LOG_TAIL_LINES:]


@dataclass(frozen=True)
class _Rendered:
    """One cell as the engine adapter renders it, before anything runs."""

    engine: Engine
    resolved: ResolvedModel
    command: ServeCommand
    topology: Topology | None
    env: dict[str, str]  # what the server runs with: image ENV, cell env, the adapter's env
    container_env: dict[str, str]  # what the container is given on top of the image ENV
    invocation: Invocation
    where: dict[str, str]


@dataclass
class _Served:
    """What serving the cell gave: the checks' results, the log, the startup time, whether it failed."""

    checks: list[CheckResult] = field(default_factory=list)
    log: str = ""
    startup_s: float | None = None
    server_failed: bool = False
    # A baseline served beside the candidate: its record (runs, order) once it served.
    baseline: InterleavedBaseline | None = None


@dataclass(frozen=True)
class _BaselineSide:
    """The baseline a cell's gates measure beside it (``validate/interleave.py``): what serves it."""

    name: str
    image: str
    image_id: str
    cell: Cell
    spec: ServerSpec
    kinds: frozenset[str]  # check kinds whose runs alternate with the candidate's


def interleaved_baseline_of(cell: Cell, spec: ValidationSpec) -> str | None:
    """The name of the baseline the cell's gates measure beside it (the first such gate's), if any."""
    return next(
        (
            g.baseline
            for g in cell.gates
            if g.baseline is not None
            and g.baseline in spec.baselines
            and spec.baselines[g.baseline].interleaved
        ),
        None,
    )


def gpus_needed(cell: Cell, spec: ValidationSpec) -> int:
    """GPUs the cell holds: twice its own when a baseline is served beside it (both servers are up at once)."""
    return cell.gpu_count * (2 if interleaved_baseline_of(cell, spec) is not None else 1)


def _server_lost(
    server: Any, engine: Engine, last: CheckResult, *, kind: str, cell: Cell, findings: Findings
) -> bool:
    """After a check run: did the server exit, or stop answering its health path after a failure?"""
    alive, code = server.alive()
    if alive and not last.passed and not server.healthy(engine.health_path):
        # A failed check and no health: find out whether the server died or hangs.
        alive, code = server.settle()
        if alive:
            findings.add(
                "SERVER_UNHEALTHY",
                f"{engine.health_path} stopped answering during the {kind} check",
                cell=cell.id,
            )
            return True
    if not alive:
        who = server.who_exited() if hasattr(server, "who_exited") else "the server"
        findings.add("SERVER_EXITED", f"{who} exited with code {code} during the {kind} check", cell=cell.id)
        return True
    return False


@dataclass(frozen=True)
class CandidateImage:
    """The image every cell of a run serves from, as its receipts name it."""

    image: str  # as given (a tag, an ID, or the pulled digest's local ID)
    image_id: str
    image_env: dict[str, str]  # the image's own ENV: part of what each server runs with
    lock_sha256: str | None
    image_digest: str | None = None  # the registry digest it was pulled by (--staged)


class CellRunner:
    def __init__(
        self,
        loaded: LoadedManifest,
        candidate: CandidateImage,
        *,
        client: DockerEngine,
        clock: Clock,
        seed: int = 0,
        baseline_images: dict[str, str] | None = None,
    ) -> None:
        self.baseline_images = dict(baseline_images or {})
        self.loaded = loaded
        self.image_digest = candidate.image_digest
        self.spec: ValidationSpec = loaded.manifest.validation
        self.image = candidate.image
        self.image_id = candidate.image_id
        self.image_env = candidate.image_env
        self.lock_sha256 = candidate.lock_sha256
        self.client = client
        self.clock = clock
        self.seed = seed

    def run(self, cell: Cell, gpus: list[int]) -> Receipt:
        """Render, refuse what must be refused before any GPU hour, serve and check, judge the gates."""
        started = self.clock.now()
        t0 = time.monotonic()
        findings = Findings()
        own = cell.gpu_count if gpus else 0
        gpus, base_gpus = (gpus[:own], gpus[own:]) if gpus and own else (gpus, [])
        r = self._render(cell, gpus)
        model_record = self._refusals(cell, gpus, r, findings)
        side = self._baseline_side(cell, r, base_gpus, findings)
        processes: list[ProcessRecord] = []
        served = self._serve(cell, gpus, r, findings, processes, side=side) if findings.passed else _Served()
        gate_results, metrics, required_failed = self._judge(cell, served, findings, r.where)
        passed = findings.passed and not required_failed
        # "error": the server never served; "failed": it served and something was not good enough.
        status = "passed" if passed else ("error" if served.server_failed else "failed")
        return Receipt(
            cell_id=cell.id,
            cell=cell,
            cell_sha256=cell_sha256(cell),
            image=self.image,
            image_id=self.image_id,
            image_digest=self.image_digest,
            lock_sha256=self.lock_sha256,
            manifest_sha256=self.loaded.sha256,
            manifest_name=self.loaded.manifest.name,
            passed=passed,
            status=status,
            started_at=started.isoformat(timespec="seconds"),
            finished_at=self.clock.now().isoformat(timespec="seconds"),
            duration_s=round(time.monotonic() - t0, 3),
            startup_s=None if served.startup_s is None else round(served.startup_s, 3),
            invocation=r.invocation,
            metrics=metrics,
            checks=served.checks,
            gates=gate_results,
            findings=list(findings) + [f for c in served.checks for f in c.findings],
            log_tail=_tail(served.log),
            host=host_facts(),
            engine_adapter=r.engine.name,
            engine_adapter_version=r.engine.version,
            model=model_record,
            processes=processes,
            interleaved_baseline=served.baseline,
        )

    def _baseline_side(
        self, cell: Cell, r: _Rendered, gpus: list[int], findings: Findings
    ) -> _BaselineSide | None:
        """The server of the baseline measured beside this cell: its image resolved, its command rendered
        by its cell's engine adapter; ``BASELINE_UNAVAILABLE`` (before anything starts) when it cannot be."""
        name = interleaved_baseline_of(cell, self.spec)
        if name is None:
            return None
        baseline = self.spec.baselines[name]
        ref = self.baseline_images.get(name) or baseline.image or self.image_id
        base_cell = (self.spec.cell(baseline.cell) if baseline.cell else None) or cell
        why = None
        if is_disaggregated(cell) or is_disaggregated(base_cell):
            why = "a prefill/decode topology is not served beside another server"
        elif base_cell.gpu_count > 0 and len(gpus) < base_cell.gpu_count:
            why = f"it needs {base_cell.gpu_count} GPUs of its own, {len(gpus)} were left"
        try:
            image_id, _ = image_facts(self.client, ref)
        except InputError as exc:
            why = why or str(exc)
        if why is not None:
            findings.add("BASELINE_UNAVAILABLE", f"baseline '{name}' beside the candidate: {why}", **r.where)
            return None
        if base_cell is cell:
            command, resolved = r.command, r.resolved
        else:
            engine = engine_for(base_cell.engine)
            resolved = resolve_model(base_cell.model, self.loaded.directory)
            command = engine.serve_command(
                base_cell, resolved.engine_arg, schemes=self.spec.quantization_schemes
            )
        env = {**base_cell.env, **command.env}
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(base_cell.gpu_count))
        spec = ServerSpec(
            image=image_id,
            argv=command.argv,
            env=env,
            port=command.port,
            gpus=gpus[: base_cell.gpu_count],
            mounts=resolved.mounts,
            cell_id=cell.id,
        )
        kinds = frozenset(g.metric.split(".", 1)[0] for g in cell.gates if g.baseline == name)
        return _BaselineSide(name, ref, image_id, base_cell, spec, kinds)

    def _render(self, cell: Cell, gpus: list[int]) -> _Rendered:
        """The serve command (or prefill/decode topology) the engine adapter renders for this cell."""
        engine = engine_for(cell.engine)
        resolved = resolve_model(cell.model, self.loaded.directory)
        command = engine.serve_command(cell, resolved.engine_arg, schemes=self.spec.quantization_schemes)
        # A prefill/decode cell is a topology of processes (validate/topology.py), a router in front.
        topology = (
            engine.topology(cell, resolved.engine_arg, PortPlan.free(), gpus)
            if is_disaggregated(cell)
            else None
        )
        env = {**self.image_env, **cell.env, **command.env}
        container_env = {**cell.env, **command.env}
        if gpus:
            container_env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(len(gpus)))
        invocation = Invocation(
            # A topology's processes are each in ``Receipt.processes``; here its first worker's argv.
            engine=cell.engine,
            argv=topology.workers[0].argv if topology and topology.workers else command.argv,
            env=env,
            image_env=self.image_env,
            cell_env={**cell.env, **command.env},
            gpus=gpus,
            mounts={v: k for k, v in resolved.mounts.items()},
        )
        where = {"cell": cell.id, "image": self.image_id}
        return _Rendered(engine, resolved, command, topology, env, container_env, invocation, where)

    def _refusals(self, cell: Cell, gpus: list[int], r: _Rendered, findings: Findings) -> ModelRecord:
        """What refuses the cell before a server starts; the model's record (its pinned files, hashed)."""
        where = r.where
        # The model is a pinned input: a directory whose pinned files differ is refused before serving.
        model_record, model_findings = check_model(cell.model, r.resolved, cell=cell.id, image=self.image_id)
        findings.extend(model_findings)
        for hit in forbidden_switches(r.command.argv, r.env, self.spec.forbidden):
            findings.add(
                "FORBIDDEN_SWITCH",
                f"the server would run with {hit}, which the manifest forbids ({self.spec.forbidden.reason or 'no reason given'})",
                **where,
            )
        for problem in r.command.problems if r.topology is None else r.topology.problems:
            findings.add("CELL_SETTING_NOT_RENDERED", f"{cell.engine}: {problem}", **where)
        if is_disaggregated(cell) and r.topology is None:
            findings.add(
                "CELL_SETTING_NOT_RENDERED",
                f"{cell.engine}: the adapter has no prefill/decode topology",
                **where,
            )
        for proc in r.topology.processes if r.topology is not None else []:
            for hit in forbidden_switches(proc.argv, {**self.image_env, **proc.env}, self.spec.forbidden):
                findings.add(
                    "FORBIDDEN_SWITCH",
                    f"{proc.name} would run with {hit}, which the manifest forbids",
                    **where,
                )
        if cell.gpu_count > 0 and len(gpus) < cell.gpu_count:
            findings.add(
                "NOT_ENOUGH_GPUS", f"the cell needs {cell.gpu_count} GPUs, {len(gpus)} were given", **where
            )
        # Inputs the checks can judge without a server (pinned datasets, their sizes): before any GPU hour.
        before = CheckContext(
            cell=cell, spec=self.spec, manifest_dir=self.loaded.directory, client=None, engine=r.engine
        )
        for config in cell.checks:
            for f in check_for(config).preflight(before):
                f.location = Location(**where)
                findings.findings.append(f)
        return model_record

    def _serve(
        self,
        cell: Cell,
        gpus: list[int],
        r: _Rendered,
        findings: Findings,
        processes: list[ProcessRecord],
        *,
        side: _BaselineSide | None = None,
    ) -> _Served:
        """Start the server (or topology), and the baseline beside it, wait for them, run the checks; the
        containers are always removed."""
        out = _Served()
        spec = ServerSpec(
            image=self.image_id,
            argv=r.command.argv,
            env=r.container_env,
            port=r.command.port,
            gpus=gpus,
            mounts=r.resolved.mounts,
            cell_id=cell.id,
        )
        running = (
            serve(self.client, spec)
            if r.topology is None
            else serve_topology(
                self.client,
                r.topology,
                image=self.image_id,
                cell_id=cell.id,
                mounts=r.resolved.mounts,
                request_timeout_s=cell.request_timeout_s,
                records=processes,
            )
        )
        try:
            with ExitStack() as stack:
                server = stack.enter_context(running)
                # Started right after the candidate's: the two start-ups overlap (docs/validate.md, Side by side).
                beside = stack.enter_context(serve(self.client, side.spec)) if side is not None else None
                self._serve_checks(cell, (server, beside), r, findings, out, side=side)
        except EngineError as exc:
            # e.g. "could not select device driver" for a GPU cell on a host without the NVIDIA runtime.
            out.server_failed = True
            findings.add(
                "SERVER_NOT_STARTED",
                f"the engine refused the container: {exc.explanation or exc}",
                **r.where,
            )
        return out

    def _serve_checks(
        self,
        cell: Cell,
        servers: tuple[Any, RunningServer | None],
        r: _Rendered,
        findings: Findings,
        out: _Served,
        *,
        side: _BaselineSide | None,
    ) -> None:
        server, beside = servers
        paths = [r.engine.health_path, r.engine.models_path]
        try:
            out.startup_s = server.wait_ready(paths, cell.startup_timeout_s)
            if beside is not None and side is not None:
                out.baseline = self._baseline_ready(cell, beside, side, findings)
            ready = beside if out.baseline is not None else None
            out.checks = self._checks(cell, server, r, findings, beside=(ready, side, out))
        except ServerFailed as exc:
            out.server_failed = True
            findings.add(exc.code, exc.message, **r.where)
        if not out.server_failed and r.topology is not None and not server.alive()[0]:
            out.server_failed = True
        out.log = server.logs()
        if beside is not None and out.baseline is not None:
            out.baseline.log_tail = _tail(beside.logs())

    def _baseline_ready(
        self, cell: Cell, beside: RunningServer, side: _BaselineSide, findings: Findings
    ) -> InterleavedBaseline | None:
        """The baseline's server ready within the cell's start-up deadline, or ``BASELINE_UNAVAILABLE``."""
        engine = engine_for(side.cell.engine)
        try:
            startup = beside.wait_ready([engine.health_path, engine.models_path], cell.startup_timeout_s)
        except ServerFailed as exc:
            findings.add(
                "BASELINE_UNAVAILABLE",
                f"baseline '{side.name}' beside the candidate: {exc.message}; "
                f"its log ends: {' | '.join(_tail(beside.logs())[-3:])}",
                cell=cell.id,
                image=side.image_id,
            )
            return None
        return InterleavedBaseline(
            name=side.name,
            image=side.image,
            image_id=side.image_id,
            cell_id=side.cell.id,
            startup_s=round(startup, 3),
        )

    def _judge(
        self, cell: Cell, served: _Served, findings: Findings, where: dict[str, str]
    ) -> tuple[list[GateResult], dict[str, Metric], list[CheckResult]]:
        """The gates over the checks' metrics; (gate results, metrics, required checks that failed)."""
        checks = served.checks
        # Resolved per cell, not once: a baseline receipt may be one this very run wrote earlier.
        baselines = {
            name: resolve_baseline(name, b, self.loaded.directory) for name, b in self.spec.baselines.items()
        }
        if served.baseline is not None:
            baselines[served.baseline.name] = beside_values(served.baseline)
        gate_results = []
        metrics = {m.name: m for c in checks for m in c.metrics}
        host = host_facts()
        for gate in cell.gates:
            result, gate_findings = evaluate_gate(gate, metrics, baselines, host=host)
            gate_results.append(result)
            for f in gate_findings:
                f.location = Location(**where)
                findings.findings.append(f)
        required_failed = [c for c in checks if c.required and not c.passed]
        for c in checks:
            if not c.required:
                # An optional check's failures stay visible but do not fail the cell.
                for f in c.findings:
                    if f.severity == Severity.error:
                        f.severity = Severity.warning
        return gate_results, metrics, required_failed

    def _context(
        self, cell: Cell, server: Any, engine: Engine, *, port: int, model_path: str | None
    ) -> CheckContext:
        return CheckContext(
            cell=cell,
            spec=self.spec,
            manifest_dir=self.loaded.directory,
            client=EngineClient(server.base_url, cell.model.name, timeout_s=cell.request_timeout_s),
            engine=engine,
            metrics_path=engine.metrics_path,
            read_log=server.logs,
            seed=self.seed,
            # A topology has no one server container to run a tool in (RunningServer has).
            run_in_server=getattr(server, "run_inside", None),
            server_port=port,
            model_path=model_path,
        )

    def _checks(
        self,
        cell: Cell,
        server: Any,
        r: _Rendered,
        findings: Findings,
        *,
        beside: tuple[RunningServer | None, _BaselineSide | None, _Served],
    ) -> list[CheckResult]:
        engine = r.engine
        ctx = self._context(cell, server, engine, port=r.command.port, model_path=r.resolved.engine_arg)
        base_server, side, out = beside
        base_ctx = None
        if base_server is not None and side is not None:
            base_engine = engine_for(side.cell.engine)
            base_ctx = self._context(
                side.cell, base_server, base_engine, port=side.spec.port, model_path=None
            )
        # Log scans last: they judge everything the server wrote while the other checks ran.
        ordered = [c for c in cell.checks if c.kind != "log_scan"] + [
            c for c in cell.checks if c.kind == "log_scan"
        ]
        results: list[CheckResult] = []
        for config in ordered:
            runs = runs_for(cell, config.kind)
            if (
                base_ctx is not None
                and side is not None
                and out.baseline is not None
                and config.kind in side.kinds
            ):
                lost = self._alternated(
                    config, (ctx, base_ctx), runs, (server, base_server), out=out, findings=findings
                )
                results.append(merge_runs(lost[1]))
                if lost[0]:
                    return results
                continue
            done = []
            for _ in range(runs):
                done.append(run_once(config, ctx))
                if _server_lost(server, engine, done[-1], kind=config.kind, cell=cell, findings=findings):
                    results.append(merge_runs(done))
                    return results
            results.append(merge_runs(done))
        return results

    def _alternated(
        self,
        config: Any,
        contexts: tuple[CheckContext, CheckContext],
        runs: int,
        servers: tuple[Any, Any],
        *,
        out: _Served,
        findings: Findings,
    ) -> tuple[bool, list[CheckResult]]:
        """``runs`` runs of the check on each side, interleaved (``interleave.alternate``); the baseline's go
        into ``out.baseline``. (Was the candidate's server lost?, the candidate's runs.)"""
        ctx, base_ctx = contexts
        lost: list[str] = []

        def stop(side: str, result: CheckResult) -> bool:
            which = ctx if side == "candidate" else base_ctx
            server = servers[0] if side == "candidate" else servers[1]
            gone = _server_lost(
                server, which.engine, result, kind=config.kind, cell=ctx.cell, findings=findings
            )
            if gone:
                lost.append(side)
            return gone

        # The candidate answered the checks before this one; the baseline's server has answered nothing yet.
        warm: tuple[Side, ...] = ("baseline",) if out.baseline is not None and not out.baseline.checks else ()
        done = alternate(config, {"candidate": ctx, "baseline": base_ctx}, runs, stop=stop, warmup=warm)
        assert out.baseline is not None
        if done.baseline:
            out.baseline.checks.append(merge_runs(done.baseline))
        out.baseline.order[config.kind] = done.order
        return "candidate" in lost, done.candidate


def _chosen_cells(loaded: LoadedManifest, cells: list[str] | None) -> list[Cell]:
    """The cells named (each must exist), or every cell; none at all is an input error."""
    spec = loaded.manifest.validation
    if cells:
        found = {c: spec.cell(c) for c in cells}
        unknown = [c for c, cell in found.items() if cell is None]
        if unknown:
            raise InputError(
                f"no cell '{unknown[0]}' in {loaded.path} (see `releasekit matrix {loaded.path}`)"
            )
        chosen = [cell for cell in found.values() if cell is not None]
    else:
        chosen = list(spec.cells)
    if not chosen:
        raise InputError(f"{loaded.path} has no validation cells")
    return chosen


def _summary(r: Receipt, receipts_dir: Path) -> CellSummary:
    return CellSummary(
        cell_id=r.cell_id,
        status=r.status,
        passed=r.passed,
        required=r.cell.required,
        receipt=str(receipts_dir / f"{r.cell_id}.json"),
        duration_s=r.duration_s,
        codes=sorted({f.code for f in r.findings if f.severity == "error"}),
    )


def _lock_mismatch(labels: dict[str, str], lock_sha: str | None, image_id: str) -> Findings:
    """IMAGE_LOCK_MISMATCH when the image's label names another lock than the one given."""
    findings = Findings()
    if lock_sha is not None and labels.get(LOCK_LABEL) and labels[LOCK_LABEL] != lock_sha:
        findings.add(
            "IMAGE_LOCK_MISMATCH",
            f"image {image_id[:19]} was built from lock {labels[LOCK_LABEL][:12]}, not {lock_sha[:12]}",
            image=image_id,
        )
    return findings


def _known_baselines(loaded: LoadedManifest, images: dict[str, str] | None) -> dict[str, str]:
    """``--baseline-image`` names: each a baseline of the manifest (else bad input, exit 2)."""
    unknown = sorted(set(images or {}) - set(loaded.manifest.validation.baselines))
    if unknown:
        raise InputError(f"--baseline-image names '{unknown[0]}', which is no baseline of {loaded.path}")
    return dict(images or {})


def run_validation(
    loaded: LoadedManifest,
    image: str,
    lock_path: Path | None,
    receipts_dir: Path,
    cells: list[str] | None = None,
    *,
    gpus: int = 0,
    client: DockerEngine,
    clock: Clock,
    seed: int = 0,
    image_digest: str | None = None,
    baseline_images: dict[str, str] | None = None,
) -> ValidationResult:
    """Every chosen cell served and judged, a receipt each; ``client``, ``clock``: the command's.
    ``baseline_images``: name -> image of a baseline served beside the candidate (``--baseline-image``)."""
    if lock_path is not None:
        # Models and datasets the lock pinned (plan lock --models/--datasets) count as pinned.
        loaded = with_locked_inputs(loaded, read_lock(lock_path))
    chosen = _chosen_cells(loaded, cells)
    lock_sha = lock_file_sha256(lock_path) if lock_path is not None else None
    image_id, image_env = image_facts(client, image)
    findings = _lock_mismatch(client.inspect(image_id).labels, lock_sha, image_id)
    result = ValidationResult(
        image=image,
        image_id=image_id,
        lock_sha256=lock_sha,
        manifest_sha256=loaded.sha256,
        receipts_dir=str(receipts_dir),
        cells=[],
        findings=list(findings),
        passed=False,
    )
    if not findings.passed:
        # Receipts would bind measurements of this image to a lock it was not built from.
        return result
    candidate = CandidateImage(image, image_id, image_env, lock_sha, image_digest)
    known = _known_baselines(loaded, baseline_images)
    runner = CellRunner(loaded, candidate, client=client, clock=clock, seed=seed, baseline_images=known)
    spec = loaded.manifest.validation
    jobs = [
        Job(cell_id=c.id, gpus=gpus_needed(c, spec), duration_s=c.expected_duration_s or 0) for c in chosen
    ]
    by_id = {c.id: c for c in chosen}

    def run_one(job: Job, gpu_set: list[int]) -> Receipt:
        receipt = runner.run(by_id[job.cell_id], gpu_set)
        write_receipt(receipt, receipts_dir)
        return receipt

    receipts = run_packed(jobs, gpus, run_one)
    summaries = [_summary(receipts[c.id], receipts_dir) for c in chosen]
    passed = findings.passed and all(s.passed for s in summaries if s.required)
    return result.model_copy(update={"cells": summaries, "passed": passed})
