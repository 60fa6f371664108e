"""The matrix as a list of rows, and as a GitHub Actions ``strategy.matrix``."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, Field

from releasekit.manifest.validation import Cell, QuantizationScheme, ValidationSpec
from releasekit.validate.engines import engine_for
from releasekit.validate.models import static_model_findings
from releasekit.validate.topology import PortPlan, ProcessSpec, is_disaggregated

# Self-hosted runners are labelled by how many GPUs a job may take; a cell goes to the
# smallest size that holds it (a TP6 cell takes an 8-GPU runner).
RUNNER_SIZES = (1, 2, 4, 8)
CPU_RUNNER = ["ubuntu-latest"]


class MatrixRow(BaseModel):
    id: str
    model: str
    model_source: str | None = Field(default=None, description="hub repository or path the weights come from")
    model_revision: str | None = None
    engine: str
    tp: int
    pp: int
    dcp: int
    ep: int | None
    gpus: int
    speculative: str
    quantization: str | None
    kv_cache_dtype: str | None
    options: dict[str, bool | int | str] = Field(default_factory=dict)
    checks: list[str]
    gates: list[str]
    required: bool
    source: str | None
    where_applicable: str | None = None
    serve_argv: list[str] = Field(default_factory=list, description="what the engine adapter would run")
    serve_env: dict[str, str] = Field(
        default_factory=dict, description="the cell's env plus what the adapter adds"
    )
    serve_problems: list[str] = Field(
        default_factory=list, description="cell settings not rendered (a finding when run)"
    )
    model_problems: list[str] = Field(
        default_factory=list, description="CODE: message, for the model's pinning"
    )
    processes: list[ProcessSpec] = Field(
        default_factory=list,
        description="a prefill/decode cell's processes (serve_argv is its first worker's)",
    )


def quantization_label(cell: Cell) -> str | None:
    q = cell.quantization
    parts = [p for p in (q.scheme, q.method, "online" if q.online else None) if p]
    return "+".join(parts) or None


def row_for(cell: Cell, schemes: Mapping[str, QuantizationScheme] | None = None) -> MatrixRow:
    """One cell, rendered by its engine adapter with the manifest's quantisation schemes.

    The model argument is the manifest's source (path, else hub repository, else the name);
    on a runner it becomes the mounted directory (``releasekit.validate.models``).
    """
    env: dict[str, str] = dict(cell.env)
    try:
        engine = engine_for(cell.engine)
        command = engine.serve_command(cell, cell.model.source or cell.model.name, schemes=schemes)
        argv, problems = command.argv, command.problems
        env.update(command.env)
        processes: list[ProcessSpec] = []
        if is_disaggregated(cell):
            topology = engine.topology(
                cell, cell.model.source or cell.model.name, PortPlan(), list(range(cell.gpu_count))
            )
            if topology is None:
                problems = [*problems, f"{cell.engine}: the adapter has no prefill/decode topology"]
            else:
                processes, problems = topology.processes, topology.problems
                argv = topology.workers[0].argv if topology.workers else argv
    except Exception as exc:  # noqa: BLE001 - an engine without an adapter is listed, not fatal
        argv, problems, processes = [], [str(exc)], []
    return MatrixRow(
        id=cell.id,
        model=cell.model.name,
        model_source=cell.model.source,
        model_revision=cell.model.revision,
        engine=cell.engine,
        tp=cell.parallel.tp,
        pp=cell.parallel.pp,
        dcp=cell.parallel.dcp,
        ep=cell.parallel.ep,
        gpus=cell.gpu_count,
        speculative=cell.speculative.label(),
        quantization=quantization_label(cell),
        kv_cache_dtype=cell.kv_cache_dtype,
        options=cell.options,
        checks=[c.kind for c in cell.checks],
        gates=[g.metric + (f" vs {g.baseline}" if g.baseline else "") for g in cell.gates],
        required=cell.required,
        source=cell.source,
        where_applicable=cell.where_applicable,
        serve_argv=argv,
        serve_env=env,
        serve_problems=problems,
        model_problems=[f"{f.code}: {f.message}" for f in static_model_findings(cell.model)],
        processes=processes,
    )


def matrix_rows(spec: ValidationSpec) -> list[MatrixRow]:
    return [row_for(c, spec.quantization_schemes) for c in spec.cells]


def runner_labels(gpus: int, prefix: str = "gpu") -> list[str]:
    if gpus == 0:
        return list(CPU_RUNNER)
    size = next((s for s in RUNNER_SIZES if s >= gpus), gpus)
    return ["self-hosted", "linux", f"{prefix}-{size}"]


def github_matrix(spec: ValidationSpec, prefix: str = "gpu") -> dict[str, list[dict[str, object]]]:
    """``{"include": [...]}`` for ``strategy.matrix: ${{ fromJSON(...) }}``; one job per cell."""
    return {
        "include": [
            {
                "cell": c.id,
                "gpus": c.gpu_count,
                "runs-on": runner_labels(c.gpu_count, prefix),
                "required": c.required,
            }
            for c in spec.cells
        ]
    }
