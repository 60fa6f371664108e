"""``validate aggregate``: merge receipts into one summary, a markdown report and PNG plots."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from releasekit.atomic import write_atomic
from releasekit.findings import Findings
from releasekit.records.base import write_record
from releasekit.records.receipt import GateResult, Receipt, read_receipts
from releasekit.records.summary import AGGREGATE_SCHEMA, SUMMARY_FILE, Aggregate, CellRow, SuiteRow
from releasekit.records.test_receipt import TestReceipt, read_test_receipt_dir
from releasekit.report.markdown import table

__all__ = ["AGGREGATE_SCHEMA", "Aggregate", "CellRow", "SuiteRow", "aggregate", "aggregate_directory"]


HEADLINE = (
    "gsm8k.accuracy",
    "acceptance.rate",
    "acceptance.mean_length",
    "decode.output_tok_s",
    "decode.target_step_rate",
    "long_context.found",
)


def _headline(r: Receipt) -> dict[str, float | None]:
    out = {k: r.metrics[k].value for k in HEADLINE if k in r.metrics}
    tput = [
        (int(k.split(".")[1][1:]), m.value)
        for k, m in r.metrics.items()
        if k.startswith("throughput.c") and k.endswith(".output_tok_s")
    ]
    if tput:
        c, v = max(tput)
        out[f"throughput.c{c}.output_tok_s"] = v
    return out


def suite_rows(tests: list[TestReceipt], image_id: str | None) -> list[SuiteRow]:
    """Rows for the test receipts of ``image_id`` (all of them when it is not known)."""
    return [
        SuiteRow(
            component=t.component,
            suite=t.suite,
            status=t.status,
            required=t.required,
            counts=t.counts_text(),
            stated=t.stated_text(),
            accepted=t.accepted_text(),
            skip_reason=t.skip_reason,
        )
        for t in tests
        if image_id is None or t.image_id == image_id
    ]


def aggregate(receipts: list[Receipt], tests: list[TestReceipt] | None = None) -> Aggregate:
    findings = Findings()
    for field in ("image_id", "lock_sha256", "manifest_sha256"):
        values = {getattr(r, field) for r in receipts}
        if len(values) > 1:
            findings.add(
                "RECEIPTS_DISAGREE",
                f"the receipts name {len(values)} different {field} values: {sorted(map(str, values))}",
            )
    if not receipts:
        findings.add("NO_RECEIPTS", "the directory holds no receipts")
    rows = [
        CellRow(
            cell_id=r.cell_id,
            status=r.status,
            passed=r.passed,
            required=r.cell.required,
            speculative=r.cell.speculative.label(),
            gpus=r.cell.gpu_count,
            duration_s=r.duration_s,
            headline=_headline(r),
            codes=sorted({f.code for f in r.findings if f.severity == "error"}),
        )
        for r in receipts
    ]
    for row in rows:
        if row.required and not row.passed:
            findings.add(
                "CELL_FAILED",
                f"cell {row.cell_id} failed: {', '.join(row.codes) or row.status}",
                cell=row.cell_id,
            )
    first = receipts[0] if receipts else None
    return Aggregate(
        image_id=first.image_id if first else None,
        lock_sha256=first.lock_sha256 if first else None,
        manifest_sha256=first.manifest_sha256 if first else None,
        cells=rows,
        suites=suite_rows(list(tests or []), first.image_id if first else None),
        passed=findings.passed,
        findings=list(findings),
    )


def _throughput_levels(r: Receipt) -> list[dict]:
    for c in r.checks:
        if c.kind == "throughput":
            details = c.details
            if "levels" in details:
                levels = details["levels"]
                return list(levels) if isinstance(levels, list) else []
            runs = details.get("runs")
            if isinstance(runs, list) and runs and "levels" in runs[0]:
                return list(runs[0]["levels"])
    return []


def _save(fig: Any, path: Path) -> None:
    """The PNG through the one writer (``atomic.write_atomic``): whole or absent, and counted among what
    an interrupted run kept."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    write_atomic(path, buffer.getvalue())


def plot_throughput(receipts: list[Receipt], path: Path) -> bool:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = [(r.cell_id, _throughput_levels(r)) for r in receipts]
    series = [(cid, lv) for cid, lv in series if lv]
    if not series:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    for cid, levels in series:
        ax.plot(
            [lv["concurrency"] for lv in levels], [lv["output_tok_s"] for lv in levels], marker="o", label=cid
        )
    ax.set_xscale("log", base=2)
    levels_seen = sorted({lv["concurrency"] for _, lvs in series for lv in lvs})
    ax.set_xticks(levels_seen, [str(c) for c in levels_seen])
    ax.minorticks_off()
    ax.set_xlabel("concurrency")
    ax.set_ylabel("output tok/s")
    ax.set_title("Throughput vs concurrency")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    return True


def plot_gates(receipts: list[Receipt], path: Path) -> bool:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bars = [
        (f"{r.cell_id}\n{g.metric}", g.candidate, g.baseline_value, g.passed)
        for r in receipts
        for g in r.gates
        if g.baseline_value is not None and g.candidate is not None
    ]
    if not bars:
        return False
    fig, ax = plt.subplots(figsize=(max(5, 2.2 * len(bars)), 4.5), dpi=100)
    xs = range(len(bars))
    ax.bar([x - 0.2 for x in xs], [b[2] for b in bars], width=0.4, label="baseline", color="#999999")
    ax.bar(
        [x + 0.2 for x in xs],
        [b[1] for b in bars],
        width=0.4,
        label="candidate",
        color=["#2a7" if b[3] else "#c33" for b in bars],
    )
    ax.set_xticks(list(xs), [b[0] for b in bars], fontsize=7)
    ax.set_title("Candidate vs baseline (gated metrics)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    return True


def gate_row(cell_id: str, g: GateResult) -> tuple[str, ...]:
    point = g.test == "point"
    if g.candidate is None:
        cand = "-"
    elif point:
        cand = f"{g.candidate:.4g} (1 run: no bound)"
    else:
        cand = f"{g.candidate:.4g} ({g.candidate_low:.4g})" if g.candidate_low is not None else "-"
    base = f"{g.baseline} = {g.baseline_value:.4g}" if g.baseline_value is not None else (g.baseline or "-")
    if g.baseline_stats is not None and g.baseline_stats.n > 1:
        base += f" ({g.baseline_stats.n} runs)"
    if g.ratio is not None and point:
        ratio = f"{g.ratio:.4f} (point)"
    else:
        ratio = (
            f"{g.ratio:.4f} ({g.ratio_low:.4f})" if g.ratio is not None and g.ratio_low is not None else "-"
        )
    return (cell_id, g.metric, cand, base, ratio, _power_cell(g), g.bound, "pass" if g.passed else "FAIL")


def _power_cell(g: GateResult) -> str:
    """Runs, the smallest regression the gate detects (95 %, power 0.8) and its false-failure rate."""
    p = g.gate_power
    if p is None:
        return "1 run: no bound" if g.test == "point" else "-"
    text = (
        f"{g.runs} runs; detects {p.detectable_regression:.1%}"
        + (f" (guards {p.guards:.1%})" if p.guards is not None else "")
        + f"; false fail {p.false_failure_rate:.1%}"
    )
    return text + ("; UNDERPOWERED" if p.underpowered else "")


def markdown(agg: Aggregate, receipts: list[Receipt], images: list[str]) -> str:
    lines = [
        "# Validation report",
        "",
        f"- image: `{agg.image_id}`",
        f"- lock sha256: `{agg.lock_sha256}`",
        f"- manifest sha256: `{agg.manifest_sha256}`",
        f"- result: **{'PASSED' if agg.passed else 'FAILED'}** ({sum(c.passed for c in agg.cells)}/{len(agg.cells)} cells passed)",
        "",
    ]
    cells = [
        (
            c.cell_id,
            c.speculative,
            c.gpus,
            c.status,
            ", ".join(f"{k}={v:.4g}" for k, v in c.headline.items() if v is not None),
            ", ".join(c.codes),
        )
        for c in agg.cells
    ]
    lines += table(("cell", "spec", "GPUs", "status", "headline metrics", "findings"), cells)
    gates = [gate_row(r.cell_id, g) for r in receipts for g in r.gates]
    if gates:
        gate_columns = (
            "cell",
            "metric",
            "candidate (low)",
            "baseline",
            "ratio (low)",
            "power",
            "rule",
            "result",
        )
        lines += ["", "## Gates", "", *table(gate_columns, gates)]
    if agg.suites:
        suites = [
            (
                f"{t.component}/{t.suite}",
                t.status
                + (f" ({t.skip_reason})" if t.skip_reason else "")
                + ("" if t.required else ", optional"),
                t.counts,
                t.stated,
                t.accepted,
            )
            for t in agg.suites
        ]
        suite_columns = ("suite", "status", "counts", "plan states", "accepted failures")
        lines += ["", "## Component tests", "", *table(suite_columns, suites)]
    if agg.findings:
        lines += ["", "## Findings", ""] + [f"- {f.render()}" for f in agg.findings]
    for img in images:
        lines += ["", f"![{img}]({img})"]
    return "\n".join(lines) + "\n"


def aggregate_directory(
    receipts_dir: Path, report_dir: Path | None, tests_dir: Path | None = None
) -> Aggregate:
    """``tests_dir``: the test stage's receipts (default: ``tests/`` beside ``receipts_dir`` in the release directory)."""
    receipts = read_receipts(receipts_dir)
    tests = read_test_receipt_dir(
        tests_dir if tests_dir is not None else receipts_dir.resolve().parent / "tests"
    )
    agg = aggregate(receipts, tests)
    if report_dir is not None:
        report_dir.mkdir(parents=True, exist_ok=True)
        images = []
        if plot_throughput(receipts, report_dir / "throughput.png"):
            images.append("throughput.png")
        if plot_gates(receipts, report_dir / "gates.png"):
            images.append("gates.png")
        write_atomic(report_dir / "REPORT.md", markdown(agg, receipts, images))
        agg.files = ["REPORT.md", *images, SUMMARY_FILE]
        write_record(agg, report_dir / SUMMARY_FILE)
    return agg
