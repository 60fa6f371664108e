"""``validate aggregate``: merge receipts into one summary, a markdown report and PNG plots."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from releasekit.atomic import write_atomic
from releasekit.findings import Findings
from releasekit.records.base import write_record
from releasekit.records.receipt import GateResult, Receipt, SampleSummary, read_receipts
from releasekit.records.summary import AGGREGATE_SCHEMA, SUMMARY_FILE, Aggregate, CellRow, SuiteRow
from releasekit.records.test_receipt import TestReceipt, read_test_receipt_dir
from releasekit.report.markdown import table
from releasekit.validate.gate_plot import gate_marks, gates_svg, gates_text

GATES_SVG = "gates.svg"  # the gates' ratios against their thresholds, drawn by gate_plot (deterministic)

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


def _side(stats: SampleSummary | None) -> str:
    """n, mean, sd and the two-sided 95 % interval of one side (one number: n 1, no interval)."""
    if stats is None:
        return "-"
    if stats.sd is None or stats.low is None or stats.high is None:
        return f"{stats.mean:.4g} (n {stats.n}, no interval)"
    return f"{stats.mean:.4g} (n {stats.n}, sd {stats.sd:.3g}, 95% [{stats.low:.4g}, {stats.high:.4g}])"


def _baseline_cell(g: GateResult) -> str:
    if g.baseline_value is None:
        return g.baseline or "-"
    text = f"{g.baseline}: {_side(g.baseline_stats)}"
    if g.baseline_kind == "interleaved":
        image = (g.baseline_image_id or "")[:19]
        text += f"; interleaved beside the candidate, cell {g.baseline_cell}, image {image}"
    elif g.baseline_receipt is not None:
        host = g.baseline_host or {}
        where = ", ".join(f"{k} {host[k]}" for k in ("machine", "cpus") if k in host) or "host not named"
        text += f"; from receipt {g.baseline_receipt} ({where})"
    elif g.baseline_kind == "manifest":
        text += "; a number in the manifest"
    return text


def gate_row(cell_id: str, g: GateResult) -> tuple[str, ...]:
    point = g.test == "point"
    if g.candidate is None:
        cand = "-"
    elif point:
        cand = f"{g.candidate:.4g} (1 run: no bound)"
    elif g.candidate_stats is not None:
        cand = _side(g.candidate_stats)
    else:
        cand = f"{g.candidate:.4g} ({g.candidate_low:.4g})" if g.candidate_low is not None else "-"
    if g.ratio is not None and point:
        ratio = f"{g.ratio:.4f} (point)"
    elif g.ratio is not None and (g.ratio_low is not None or g.ratio_high is not None):
        ends = [f"low {g.ratio_low:.4f}" if g.ratio_low is not None else "", ""]
        ends[1] = f"high {g.ratio_high:.4f}" if g.ratio_high is not None else ""
        ratio = f"{g.ratio:.4f} (one-sided 95%: {', '.join(e for e in ends if e)}; {g.test})"
    else:
        ratio = "-"
    return (
        cell_id,
        g.metric,
        _runs(g),
        cand,
        _baseline_cell(g),
        ratio,
        _power_cell(g),
        g.bound,
        "pass" if g.passed else "FAIL",
    )


def _runs(g: GateResult) -> str:
    base = g.baseline_stats.n if g.baseline_stats is not None else None
    if g.baseline_kind == "interleaved" and g.baseline_order:
        measured = [o for o in g.baseline_order if o in ("candidate", "baseline")]
        order = " ".join("A" if o == "candidate" else "B" for o in measured)
        return f"{g.runs} + {base} interleaved ({order})"
    return f"{g.runs}" if base is None or g.baseline is None else f"{g.runs} vs {base}"


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


GATE_COLUMNS = ("cell", "metric", "runs", "candidate", "baseline", "ratio (bound)", "power", "rule", "result")


def gates_section(receipts: list[Receipt]) -> list[str]:
    """The gates' table (runs, both sides' intervals, the ratio's bound, the power) and their plot as text."""
    gates = [gate_row(r.cell_id, g) for r in receipts for g in r.gates]
    if not gates:
        return []
    lines = ["", "## Gates", "", *table(GATE_COLUMNS, gates)]
    drawn = gates_text(gate_marks(receipts))
    if drawn:
        legend = "Ratio `*`, its one-sided 95 % bound `=`, threshold `|`, no change `:`"
        lines += ["", legend + f" (drawn in {GATES_SVG}):", "", "```text", *drawn, "```"]
    return lines


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
    lines += gates_section(receipts)
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
        svg = gates_svg(gate_marks(receipts))
        if svg is not None:
            write_atomic(report_dir / GATES_SVG, svg)
            images.append(GATES_SVG)
        write_atomic(report_dir / "REPORT.md", markdown(agg, receipts, images))
        agg.files = ["REPORT.md", *images, SUMMARY_FILE]
        write_record(agg, report_dir / SUMMARY_FILE)
    return agg
