"""Pre-flight: every cell rendered, and parsed by the candidate image's own engine, before any GPU hour.

``releasekit validate FILE --image IMAGE --dry-run``. Per cell: the engine adapter renders
the serve command (a setting it cannot render is a finding), forbidden switches and the
model's pinning are judged without starting anything, and then one container of the
candidate image (no network, no GPU, no model load) runs the adapter's pre-flight script
over every cell of that engine: the shipped engine's real argument parser and engine-argument
construction. A flag it rejects is ``PREFLIGHT_ARG_REJECTED``; a parsed value that differs
from the cell (TP, PP, DCP, EP, speculative config, KV dtype, quantisation, ...) is
``PREFLIGHT_VALUE_MISMATCH``.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, Field

from releasekit.docker_engine import Engine as DockerEngine
from releasekit.docker_engine import EngineError
from releasekit.errors import InputError
from releasekit.findings import Finding, Findings, Location, Severity
from releasekit.manifest import LoadedManifest
from releasekit.manifest.validation import Cell
from releasekit.validate.container import image_facts
from releasekit.validate.engines import Engine, adapter_for
from releasekit.validate.engines.interface import PREFLIGHT_MARKER, ServeCommand
from releasekit.validate.models import resolve_model, static_model_findings
from releasekit.validate.topology import PortPlan, ProcessSpec, is_disaggregated

PREFLIGHT_TIMEOUT_S = 600.0
OUTPUT_TAIL = 600


class PreflightCell(BaseModel):
    cell_id: str
    engine: str
    argv: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    expected: dict[str, object] = Field(default_factory=dict)
    parsed: dict[str, object] | None = Field(
        default=None, description="what the image's engine parsed; None: not parsed"
    )
    findings: list[Finding] = Field(default_factory=list)
    processes: list[ProcessSpec] = Field(
        default_factory=list,
        description="a prefill/decode cell: every process of its topology (fixed ports, as `releasekit matrix`)",
    )

    def add(self, code: str, message: str, severity: Severity = Severity.error) -> None:
        self.findings.append(
            Finding(code=code, message=message, severity=severity, location=Location(cell=self.cell_id))
        )

    @property
    def passed(self) -> bool:
        return not any(f.severity == Severity.error for f in self.findings)


class PreflightResult(BaseModel):
    image: str
    image_id: str
    manifest_sha256: str
    cells: list[PreflightCell]
    findings: list[Finding] = Field(
        default_factory=list, description="findings about the image, not one cell"
    )
    passed: bool


def _same(parsed: object, expected: object) -> bool:
    if isinstance(expected, bool) or isinstance(parsed, bool):
        return parsed is expected
    if isinstance(expected, dict) and isinstance(parsed, dict):
        return parsed == expected
    return parsed == expected


def judge(cell: PreflightCell, entry: dict[str, object]) -> None:
    """Compare one script entry with the cell's expected values; findings go on the cell."""
    error = entry.get("error")
    if error:
        cell.add("PREFLIGHT_ARG_REJECTED", f"the image's {cell.engine} refused the arguments: {error}")
        return
    values = entry.get("values")
    parsed: dict[str, object] = dict(values) if isinstance(values, dict) else {}
    cell.parsed = parsed
    for field, want in cell.expected.items():
        if field not in parsed:
            cell.add(
                "PREFLIGHT_VALUE_MISMATCH",
                f"the image's {cell.engine} has no engine argument '{field}' (the cell needs {want!r})",
            )
        elif not _same(parsed[field], want):
            cell.add(
                "PREFLIGHT_VALUE_MISMATCH",
                f"{field}: the image's {cell.engine} parsed {parsed[field]!r}, the cell means {want!r}",
            )


def render_cell(
    cell: Cell, loaded: LoadedManifest, image_env: dict[str, str]
) -> tuple[PreflightCell, Engine | None, ServeCommand | None]:
    from releasekit.validate.service import forbidden_switches

    spec = loaded.manifest.validation
    result = PreflightCell(cell_id=cell.id, engine=cell.engine)
    findings = static_model_findings(cell.model, cell=cell.id)
    engine = adapter_for(cell.engine)
    if engine is None:
        findings.add(
            "CELL_SETTING_NOT_RENDERED",
            f"engine '{cell.engine}' has no adapter: the cell cannot be rendered",
            cell=cell.id,
        )
        result.findings = list(findings)
        return result, None, None
    resolved = resolve_model(cell.model, loaded.directory)
    command = engine.serve_command(cell, resolved.engine_arg, schemes=spec.quantization_schemes)
    result.argv, result.env, result.expected = command.argv, {**cell.env, **command.env}, command.expected
    problems = command.problems
    # A prefill/decode cell runs as a topology (as `validate` serves it): its processes and
    # problems are the cell's, not the single server's (issue 24: seed 000's 1P+1D cell).
    if is_disaggregated(cell):
        topology = engine.topology(cell, resolved.engine_arg, PortPlan(), list(range(cell.gpu_count)))
        if topology is None:
            problems = [*problems, "the adapter has no prefill/decode topology"]
        else:
            problems = topology.problems
            result.processes = topology.processes
            result.argv = topology.workers[0].argv if topology.workers else result.argv
    for problem in problems:
        findings.add("CELL_SETTING_NOT_RENDERED", f"{cell.engine}: {problem}", cell=cell.id)
    for name, argv, env in [("the server", result.argv, result.env)] + [
        (p.name, p.argv, {**result.env, **p.env}) for p in result.processes
    ]:
        for hit in forbidden_switches(argv, {**image_env, **env}, spec.forbidden):
            findings.add(
                "FORBIDDEN_SWITCH", f"{name} would run with {hit}, which the manifest forbids", cell=cell.id
            )
    result.findings = list(findings)
    return result, engine, command


def _parse_in_image(
    client: DockerEngine,
    image_id: str,
    engine: Engine,
    batch: list[tuple[PreflightCell, Cell, ServeCommand]],
    timeout_s: float,
) -> Findings:
    """Run the adapter's script over ``batch`` in one container; judge each cell. Image-level findings returned."""
    findings = Findings()
    script = engine.preflight_script()
    if script is None:
        for pre, _, _ in batch:
            pre.add(
                "PREFLIGHT_UNSUPPORTED",
                f"the {engine.name} adapter has no pre-flight parser: arguments not checked",
                Severity.warning,
            )
        return findings
    payload = [
        {"id": pre.cell_id, "argv": engine.preflight_args(cell, command)} for pre, cell, command in batch
    ]
    try:
        run = client.run(
            image_id,
            [json.dumps(payload)],
            timeout=timeout_s,
            entrypoint=["python3", "-c", script],
            # The container has no network at all. HF_HUB_OFFLINE=1 (which the image may set) would make
            # the engine-argument constructor resolve the model in the local hub cache, i.e. look for a model.
            environment={"HF_HUB_OFFLINE": "0", "CUDA_VISIBLE_DEVICES": ""},
            labels={"io.releasekit.validate.preflight": engine.name},
        )
    except EngineError as exc:
        findings.add(
            "PREFLIGHT_FAILED",
            f"the engine refused the pre-flight container: {exc.explanation or exc}",
            image=image_id,
        )
        return findings
    line = next((ln for ln in reversed(run.output.splitlines()) if ln.startswith(PREFLIGHT_MARKER)), None)
    if run.timed_out or line is None:
        why = (
            f"timed out after {timeout_s:.0f} s"
            if run.timed_out
            else f"exited {run.exit_code} without a result"
        )
        tail = " ".join(run.output.strip().splitlines()[-3:])[-OUTPUT_TAIL:]
        findings.add(
            "PREFLIGHT_FAILED", f"the {engine.name} pre-flight in the image {why}: {tail}", image=image_id
        )
        return findings
    entries = {str(e.get("id")): e for e in json.loads(line[len(PREFLIGHT_MARKER) :]) if isinstance(e, dict)}
    for pre, _, _ in batch:
        entry = entries.get(pre.cell_id)
        if entry is None:
            pre.add("PREFLIGHT_FAILED", "the pre-flight script returned nothing for this cell")
        else:
            judge(pre, entry)
    return findings


def run_preflight(
    loaded: LoadedManifest,
    image: str,
    cells: list[str] | None = None,
    *,
    client: DockerEngine,
    timeout_s: float = PREFLIGHT_TIMEOUT_S,
) -> PreflightResult:
    spec = loaded.manifest.validation
    if cells:
        unknown = [c for c in cells if spec.cell(c) is None]
        if unknown:
            raise InputError(
                f"no cell '{unknown[0]}' in {loaded.path} (see `releasekit matrix {loaded.path}`)"
            )
    chosen = [c for c in spec.cells if not cells or c.id in cells]
    if not chosen:
        raise InputError(f"{loaded.path} has no validation cells")
    image_id, image_env = image_facts(client, image)
    results: list[PreflightCell] = []
    batches: dict[str, tuple[Engine, list[tuple[PreflightCell, Cell, ServeCommand]]]] = {}
    for cell in chosen:
        pre, engine, command = render_cell(cell, loaded, image_env)
        results.append(pre)
        if engine is not None and command is not None:
            batches.setdefault(engine.name, (engine, []))[1].append((pre, cell, command))
    findings = Findings()
    for engine, batch in batches.values():
        findings.extend(_parse_in_image(client, image_id, engine, batch, timeout_s))
    passed = findings.passed and all(r.passed for r in results)
    return PreflightResult(
        image=image,
        image_id=image_id,
        manifest_sha256=loaded.sha256,
        cells=results,
        findings=list(findings),
        passed=passed,
    )
