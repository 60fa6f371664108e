"""The one markdown table writer: every markdown table releasekit writes comes from ``table``.

A cell is one line of its row whatever it holds: ``\\`` is written ``\\\\`` and ``|`` is written
``\\|`` (so a PR title holding a pipe adds no column), and a line break, with the whitespace
around it, becomes one space (so a message of several lines does not end the table). Cells are
written ``| value |``; an empty value leaves two spaces (``|  |``), ``BLANK`` one (``| |``), as a
hand-written table leaves a column it has nothing for.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final, Literal

Align = Literal["left", "center", "right"] | None

_RULE: Final[dict[Align, str]] = {None: "---", "left": ":---", "center": ":---:", "right": "---:"}
# str.splitlines' line boundaries: any of them would end the row.
_BREAKS: Final = frozenset("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")


class Blank:
    """A cell left blank (``| |``), as opposed to an empty value (``|  |``)."""

    def __repr__(self) -> str:
        return "BLANK"


BLANK: Final = Blank()


def escape_cell(value: object, max_len: int | None = None) -> str:
    """``value`` as the text of one cell (None is empty); cut to ``max_len`` characters with "…"."""
    text = "" if value is None else str(value)
    if not _BREAKS.isdisjoint(text):
        text = " ".join(text.split())
    text = text.replace("\\", "\\\\").replace("|", "\\|")
    if max_len is None or len(text) <= max_len:
        return text
    cut = text[: max_len - 1]
    # An escape cut in half would escape the ellipsis or leave a stray backslash.
    if (len(cut) - len(cut.rstrip("\\"))) % 2:
        cut = cut[:-1]
    return cut + "…"


def _row(cells: Iterable[object], width: int, max_len: int | None) -> str:
    parts = [" " if c is BLANK else f" {escape_cell(c, max_len)} " for c in cells]
    if len(parts) != width:
        raise ValueError(f"a row of {len(parts)} cells in a table of {width} columns")
    return "|" + "|".join(parts) + "|"


def table(
    columns: Sequence[object],
    rows: Iterable[Sequence[object]],
    *,
    align: Sequence[Align] | None = None,
    padded_rule: bool = False,
    max_cell: int | None = None,
) -> list[str]:
    """The lines of a GitHub-flavoured markdown table: the header, the alignment row, one line a row.

    ``align``: each column's alignment (None: the renderer's default). ``padded_rule``: the alignment
    row written ``| --- |`` rather than ``|---|``. ``max_cell``: the most characters of a cell.
    """
    aligns = list(align) if align is not None else [None] * len(columns)
    if len(aligns) != len(columns):
        raise ValueError(f"{len(aligns)} alignments for {len(columns)} columns")
    rule = [_RULE[a] for a in aligns]
    lines = [
        _row(columns, len(columns), max_cell),
        "|" + "|".join(f" {r} " if padded_rule else r for r in rule) + "|",
    ]
    lines += [_row(row, len(columns), max_cell) for row in rows]
    return lines
