"""The validation cells: unique ids, no forbidden switch, known datasets and baselines, sane parallelism."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.manifest.checks.context import Located, ManifestContext
from releasekit.manifest.loader import Path_
from releasekit.manifest.validation import Cell, ValidationSpec


class ValidationMatrix:
    name = "validation-matrix"
    codes = (
        "DUPLICATE_CELL",
        "FORBIDDEN_SWITCH",
        "UNKNOWN_DATASET",
        "UNKNOWN_BASELINE",
        "UNKNOWN_BASELINE_METRIC",
        "ACCEPTANCE_WITHOUT_SPECULATION",
        "BAD_PARALLELISM",
    )

    def run(self, ctx: ManifestContext) -> Findings:
        out = Located(ctx)
        spec = ctx.manifest.validation
        ids: set[str] = set()
        for i, cell in enumerate(spec.cells):
            path = ("validation", "cells", i)
            if cell.id in ids:
                out.add("DUPLICATE_CELL", f"cell id '{cell.id}' is used twice", (*path, "id"), cell=cell.id)
            ids.add(cell.id)
            _forbidden_switches(out, spec, cell, path)
            _check_references(out, spec, cell, path)
            _gate_references(out, spec, cell, path)
            _shape(out, cell, path)
        return out.findings


def _forbidden_switches(out: Located, spec: ValidationSpec, cell: Cell, path: Path_) -> None:
    for name, value in cell.env.items():
        for rule in spec.forbidden.env:
            fname, _, fval = rule.partition("=")
            if name == fname and (not fval or fval == value):
                out.add(
                    "FORBIDDEN_SWITCH",
                    f"cell '{cell.id}' sets {name}={value}, which the manifest forbids ({spec.forbidden.reason or 'forbidden switch'})",
                    (*path, "env", name),
                    cell=cell.id,
                )
    for j, arg in enumerate(cell.extra_args):
        flag = arg.split("=", 1)[0]
        if flag in spec.forbidden.args or arg in spec.forbidden.args:
            out.add(
                "FORBIDDEN_SWITCH",
                f"cell '{cell.id}' passes {arg}, which the manifest forbids ({spec.forbidden.reason or 'forbidden switch'})",
                (*path, "extra_args", j),
                cell=cell.id,
            )


def _check_references(out: Located, spec: ValidationSpec, cell: Cell, path: Path_) -> None:
    for j, check in enumerate(cell.checks):
        for dataset in (
            getattr(check, "dataset", None) or getattr(check, "prompts", None),
            getattr(check, "fewshot", None),
        ):
            if dataset is not None and dataset not in spec.datasets:
                out.add(
                    "UNKNOWN_DATASET",
                    f"cell '{cell.id}' check {check.kind} uses dataset '{dataset}', which validation.datasets does not define",
                    (*path, "checks", j),
                    cell=cell.id,
                )
        named = getattr(check, "baseline", None)
        if named is not None and named not in spec.baselines:
            out.add(
                "UNKNOWN_BASELINE",
                f"cell '{cell.id}' check {check.kind} names baseline '{named}', which validation.baselines does not define",
                (*path, "checks", j, "baseline"),
                cell=cell.id,
            )
        baseline = getattr(check, "baseline_metric", None)
        # A receipt baseline's values are known only when the cell runs.
        candidates = [spec.baselines[named]] if named in spec.baselines else list(spec.baselines.values())
        if baseline is not None and not any(
            baseline in b.values or b.receipt is not None for b in candidates
        ):
            out.add(
                "UNKNOWN_BASELINE_METRIC",
                f"cell '{cell.id}' holds {check.kind} to baseline metric '{baseline}', which no baseline defines",
                (*path, "checks", j),
                cell=cell.id,
            )


def _gate_references(out: Located, spec: ValidationSpec, cell: Cell, path: Path_) -> None:
    for j, gate in enumerate(cell.gates):
        if gate.baseline is None:
            continue
        base = spec.baselines.get(gate.baseline)
        if base is None:
            out.add(
                "UNKNOWN_BASELINE",
                f"cell '{cell.id}' gate on {gate.metric} names baseline '{gate.baseline}', which validation.baselines does not define",
                (*path, "gates", j, "baseline"),
                cell=cell.id,
            )
        elif base.receipt is None and not base.interleaved and gate.metric not in base.values:
            # (A baseline served beside the candidate measures its values in the cell's own job.)
            out.add(
                "UNKNOWN_BASELINE_METRIC",
                f"baseline '{gate.baseline}' has no value for {gate.metric}",
                (*path, "gates", j, "metric"),
                cell=cell.id,
            )


def _shape(out: Located, cell: Cell, path: Path_) -> None:
    if cell.speculative.mode == "off" and any(c.kind == "acceptance" for c in cell.checks):
        out.add(
            "ACCEPTANCE_WITHOUT_SPECULATION",
            f"cell '{cell.id}' checks speculative acceptance with speculation off",
            path,
            cell=cell.id,
        )
    if cell.parallel.dcp > 1 and cell.parallel.tp % cell.parallel.dcp:
        out.add(
            "BAD_PARALLELISM",
            f"cell '{cell.id}': dcp {cell.parallel.dcp} does not divide tp {cell.parallel.tp}",
            (*path, "parallel"),
            cell=cell.id,
        )
