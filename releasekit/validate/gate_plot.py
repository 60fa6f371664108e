"""The gates' ratios drawn against their thresholds: an SVG file and the same picture as text.

Each ratio gate is one row: its threshold (``min_ratio``/``max_ratio``) a dashed red line, 1.0 (no
change) a grey line, the ratio a dot and its one-sided 95 % bound a bar from the bound to the dot
(both bounds where the gate has both). One run has no bound: its dot stands alone. Written by our own
code, numbers at fixed precision, so the same receipts give the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from releasekit.records.receipt import GateResult, Receipt

WIDTH, ROW, LEFT, RIGHT, TOP = 760, 56, 250, 30, 34
TEXT_WIDTH = 48


@dataclass(frozen=True)
class GateMark:
    """One gate's row: who, the ratio, its bounds, its threshold(s), the verdict."""

    label: str
    ratio: float
    low: float | None
    high: float | None
    thresholds: tuple[float, ...]
    passed: bool
    runs: str


def _runs_text(g: GateResult) -> str:
    if g.baseline_kind == "interleaved" and g.baseline_stats is not None:
        return f"{g.runs} vs {g.baseline_stats.n} runs, interleaved"
    base = g.baseline_stats.n if g.baseline_stats is not None else 1
    return f"{g.runs} vs {base} run{'s' if base != 1 else ''}"


def gate_marks(receipts: list[Receipt]) -> list[GateMark]:
    """Every ratio gate of the receipts that has a ratio, in receipt then gate order."""
    marks = []
    for r in receipts:
        for gate, g in zip(r.cell.gates, r.gates, strict=False):
            if g.ratio is None or gate.metric != g.metric:
                continue
            thresholds = tuple(t for t in (gate.min_ratio, gate.max_ratio) if t is not None)
            marks.append(
                GateMark(
                    label=f"{r.cell_id} {g.metric} / {g.baseline}",
                    ratio=g.ratio,
                    low=g.ratio_low if g.test != "point" else None,
                    high=g.ratio_high if g.test != "point" else None,
                    thresholds=thresholds,
                    passed=g.passed,
                    runs=_runs_text(g),
                )
            )
    return marks


def _axis(marks: list[GateMark]) -> tuple[float, float]:
    values = [1.0]
    for m in marks:
        values += [m.ratio, *m.thresholds]
        values += [v for v in (m.low, m.high) if v is not None]
    lo, hi = min(values), max(values)
    pad = max(0.05, (hi - lo) * 0.08)
    return max(0.0, lo - pad), hi + pad


def _n(x: float) -> str:
    return f"{x:.2f}"


def gates_svg(marks: list[GateMark]) -> str | None:
    """The SVG document (None: no ratio gate to draw)."""
    if not marks:
        return None
    lo, hi = _axis(marks)
    height = TOP + ROW * len(marks) + 40
    span = WIDTH - LEFT - RIGHT

    def x(v: float) -> str:
        return _n(LEFT + (v - lo) / (hi - lo) * span)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
        '<text x="10" y="18" font-size="13">Candidate/baseline ratio, one-sided 95 % bound, threshold (red)</text>',
    ]
    bottom = TOP + ROW * len(marks)
    out.append(f'<line x1="{x(1.0)}" y1="{TOP - 6}" x2="{x(1.0)}" y2="{bottom}" stroke="#999"/>')
    for i, m in enumerate(marks):
        y = TOP + ROW * i + ROW / 2
        colour = "#2a7" if m.passed else "#c33"
        out.append(f'<text x="10" y="{_n(y - 4)}">{escape(m.label)}</text>')
        out.append(
            f'<text x="10" y="{_n(y + 10)}" fill="#555">{escape(m.runs)}; {"pass" if m.passed else "FAIL"}</text>'
        )
        for t in m.thresholds:
            out.append(
                f'<line x1="{x(t)}" y1="{_n(y - 14)}" x2="{x(t)}" y2="{_n(y + 14)}" stroke="#c33" '
                'stroke-width="2" stroke-dasharray="4 3"/>'
            )
            out.append(
                f'<text x="{x(t)}" y="{_n(y + 24)}" text-anchor="middle" fill="#c33">threshold {t:g}</text>'
            )
        ends = [v for v in (m.low, m.high) if v is not None]
        if ends:
            a, b = min([*ends, m.ratio]), max([*ends, m.ratio])
            out.append(
                f'<line x1="{x(a)}" y1="{_n(y)}" x2="{x(b)}" y2="{_n(y)}" stroke="{colour}" stroke-width="4"/>'
            )
        out.append(f'<circle cx="{x(m.ratio)}" cy="{_n(y)}" r="5" fill="{colour}"/>')
        out.append(f'<text x="{x(m.ratio)}" y="{_n(y - 9)}" text-anchor="middle">{m.ratio:.3f}</text>')
    for v in sorted({round(lo, 2), 1.0, round(hi, 2)}):
        out.append(f'<text x="{x(v)}" y="{_n(bottom + 16)}" text-anchor="middle" fill="#555">{v:.2f}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def gates_text(marks: list[GateMark]) -> list[str]:
    """The same picture in characters: ``|`` threshold, ``:`` 1.0, ``=`` the bound's range, ``*`` the ratio."""
    if not marks:
        return []
    lo, hi = _axis(marks)

    def col(v: float) -> int:
        return min(TEXT_WIDTH - 1, max(0, round((v - lo) / (hi - lo) * (TEXT_WIDTH - 1))))

    lines = []
    for m in marks:
        row = [" "] * TEXT_WIDTH
        row[col(1.0)] = ":"
        ends = [v for v in (m.low, m.high) if v is not None]
        if ends:
            for c in range(col(min([*ends, m.ratio])), col(max([*ends, m.ratio])) + 1):
                row[c] = "="
        for t in m.thresholds:
            row[col(t)] = "|"
        row[col(m.ratio)] = "*"
        bound = ", ".join(f"{v:.3f}" for v in ends) or "no bound"
        lines.append(
            f"{''.join(row)}  {m.label}: ratio {m.ratio:.3f} (bound {bound}; threshold "
            f"{', '.join(f'{t:g}' for t in m.thresholds)}; {m.runs}) {'pass' if m.passed else 'FAIL'}"
        )
    axis = [" "] * TEXT_WIDTH
    free = 0  # labels left to right, one space apart; a label that would overlap the last is left out
    for v in (lo, 1.0, hi):
        text = f"{v:.2f}"
        start = min(TEXT_WIDTH - len(text), max(0, col(v) - len(text) // 2))
        if start >= free:
            axis[start : start + len(text)] = list(text)
            free = start + len(text) + 1
    return [*lines, "".join(axis).rstrip()]
