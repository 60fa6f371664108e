"""RELEASE.md for a published image: the build's notes plus the validation summary.

The validation part has one row per cell of the matrix (pass, fail or missing) and the
headline numbers each receipt reports, next to their baseline where the receipt gives one.
"""

from __future__ import annotations

from typing import Any

from releasekit.publish.gate import GatePolicy, GateReport

_MAX_HEADLINES = 4


def _number(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _headline(metric: dict[str, Any]) -> str | None:
    name = metric.get("name") or metric.get("metric")
    value = metric.get("value", metric.get("measured"))
    if name is None or value is None:
        return None
    text = f"{name} {_number(value)}"
    unit = metric.get("unit")
    if unit:
        text += f" {unit}"
    baseline = metric.get("baseline_value", metric.get("baseline"))
    if isinstance(baseline, int | float) and not isinstance(baseline, bool) and baseline:
        text += f" (baseline {_number(baseline)}"
        if isinstance(value, int | float):
            text += f", {float(value) / float(baseline):.1%}"
        text += ")"
    return text


def release_notes(
    *,
    build_notes: str | None,
    report: GateReport,
    policy: GatePolicy,
    repository: str,
    digest: str,
    tags: list[str],
) -> str:
    lines: list[str] = []
    if build_notes:
        lines.append(build_notes.rstrip())
        lines.append("")
    else:
        lines += ["# Release", ""]
    lines += [
        "## Published",
        "",
        f"- Image ID: `{report.image_id}`",
        f"- Registry digest: `{repository}@{digest}`",
        f"- Tags: {', '.join(f'`{t}`' for t in tags) or '(none)'}",
        f"- Lock sha256: `{report.lock_sha256}`",
        "",
        "## Validation",
        "",
        "| cell | result | headline numbers |",
        "| --- | --- | --- |",
    ]
    by_cell = {r.cell: r for r in report.receipts}
    known = [c.id for c in policy.cells] + sorted(c for c in by_cell if policy.cell(c or "") is None and c)
    for cell_id in known:
        receipt = by_cell.get(cell_id)
        cell = policy.cell(cell_id)
        optional = cell is not None and not cell.required
        if receipt is None:
            result = "not run (optional)" if optional else "MISSING"
            heads = ""
        else:
            result = "pass" if receipt.passed else "FAIL"
            heads = "; ".join(h for h in (_headline(m) for m in receipt.metrics[:_MAX_HEADLINES]) if h)
        lines.append(f"| {cell_id} | {result} | {heads} |")
    lines += ["", "## Gate", ""]
    for check in report.checks:
        lines.append(f"- {'pass' if check.passed else 'FAIL'}: {check.name}")
    return "\n".join(lines) + "\n"
