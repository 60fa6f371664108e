"""The one markdown table writer (``releasekit.report.markdown``) and the rule that keeps it the only one.

Every markdown table releasekit writes (RELEASE.md of build and publish, the step summaries, the
validation report) comes from ``table``: a cell holding ``|``, ``\\`` or a line break stays one
cell of one row. No module outside ``report/`` spells a table's alignment row itself; the check
below walks the string literals of the package and is shown to fail on a package that does.
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest
from records_support import notes_build_record

from releasekit.findings import Finding, Findings, Location, Severity
from releasekit.report.formats import JsonFormat, MarkdownFormat, OutputFormat, TerminalFormat
from releasekit.report.markdown import BLANK, escape_cell, table

REPO = Path(__file__).resolve().parent.parent


def cells(line: str) -> list[str]:
    """A row's cells as a GFM renderer splits them: on ``|`` not escaped by a backslash."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])]


# --- the writer ---------------------------------------------------------------------------------


def test_pipes_backslashes_and_line_breaks_stay_in_their_cell() -> None:
    lines = table(("a", "b|c"), [("x | y", "one\nline\r\ntwo"), ("back\\slash\\|", None)])
    assert lines == [
        "| a | b\\|c |",
        "|---|---|",
        "| x \\| y | one line two |",
        "| back\\\\slash\\\\\\| |  |",
    ]
    assert all(len(cells(line)) == 2 for line in lines)


def test_a_line_break_and_the_whitespace_around_it_become_one_space_other_whitespace_is_kept() -> None:
    assert escape_cell("a  b") == "a  b"
    assert escape_cell("a \n\n  b\u2028c\n") == "a b c"
    assert escape_cell(3) == "3" and escape_cell(None) == ""


def test_alignment_rows() -> None:
    assert table(("l", "c", "r", "d"), [], align=("left", "center", "right", None))[1] == (
        "|:---|:---:|---:|---|"
    )
    assert table(("a", "b"), [], padded_rule=True)[1] == "| --- | --- |"
    with pytest.raises(ValueError, match="2 alignments for 1 columns"):
        table(("a",), [], align=("left", "right"))


def test_an_empty_table_is_its_header_and_alignment_row() -> None:
    assert table(("a", "b"), []) == ["| a | b |", "|---|---|"]


def test_a_row_of_the_wrong_width_is_refused() -> None:
    with pytest.raises(ValueError, match="a row of 1 cells in a table of 2 columns"):
        table(("a", "b"), [("only",)])


def test_an_empty_value_and_a_blank_cell() -> None:
    assert table((BLANK, "version"), [("", "1")]) == ["| | version |", "|---|---|", "|  | 1 |"]


def test_a_long_cell_is_cut_without_splitting_an_escape() -> None:
    assert escape_cell("x" * 10, max_len=5) == "xxxx…"
    # "ab\|" cut after four characters would end in a lone backslash, escaping the ellipsis
    assert escape_cell("abc|d", max_len=5) == "abc…"
    assert escape_cell("ab\\cd", max_len=5) == "ab\\\\…"


# --- the outputs that use it ------------------------------------------------------------------

HOSTILE = "fix a | b\nsecond line \\ end"


def test_a_pr_title_with_a_pipe_and_a_line_break_stays_one_cell_of_release_md() -> None:
    from releasekit.builder.release_notes import PRLine, ReleaseNotesPlan, render_release_notes

    record = notes_build_record("r")
    plan = ReleaseNotesPlan(merged=[PRLine("app", 7, HOSTILE, "f" * 40, "planned", "squash")])
    notes = render_release_notes(record, plan).splitlines()
    row = next(line for line in notes if line.startswith("| app | #7 |"))
    assert cells(row) == [
        "app", "#7", "fix a \\| b second line \\\\ end", "`ffffffffffff`", "planned", "squash", "not read", "-"
    ]  # fmt: skip
    # The hand-written shape is kept: a blank header cell, and the row of a release without PRs.
    assert "| | version |" in notes and "| CUDA | 12.8 |" in notes
    assert "| | | no merge plan | | | | | |" in render_release_notes(record).splitlines()


def test_a_cell_id_with_a_pipe_stays_one_cell_of_the_validation_report() -> None:
    from releasekit.records.summary import Aggregate, CellRow
    from releasekit.validate.report import markdown

    row = CellRow(
        cell_id=HOSTILE,
        status="passed",
        passed=True,
        required=True,
        speculative="off",
        gpus=1,
        duration_s=1.0,
    )
    agg = Aggregate(image_id="i", lock_sha256="l", manifest_sha256="m", cells=[row], passed=True)
    lines = markdown(agg, [], []).splitlines()
    header = lines.index("| cell | spec | GPUs | status | headline metrics | findings |")
    assert lines[header + 1] == "|---|---|---|---|---|---|"
    assert len(cells(lines[header + 2])) == 6


# --- the formats --------------------------------------------------------------------------------


def findings() -> Findings:
    return Findings(
        findings=[
            Finding(code="INFO_ONE", severity=Severity.info, message="noted"),
            Finding(code="BAD_PIPE", message="title a | b\nsecond line", location=Location(path="x[1]")),
        ]
    )


def test_each_format_implements_the_one_interface() -> None:
    formats: list[OutputFormat] = [TerminalFormat(), JsonFormat(), MarkdownFormat()]
    assert [f.name for f in formats] == ["terminal", "json", "markdown"]
    for f in formats:
        assert f.format(findings()).endswith("\n")


def test_the_markdown_format_puts_errors_first_in_one_table() -> None:
    lines = MarkdownFormat().format(findings()).splitlines()
    assert lines[:2] == ["| severity | code | where | message |", "|---|---|---|---|"]
    assert cells(lines[2]) == ["error", "BAD_PIPE", "x[1]", "title a \\| b second line"]
    assert MarkdownFormat().format(Findings()) == ""
    many = MarkdownFormat(limit=1).format(findings())
    assert many.endswith("\n… and 1 more (the job's log has every one)\n")


def test_the_terminal_format_escapes_markup_in_user_text() -> None:
    text = TerminalFormat().format(Findings(findings=[Finding(code="X", message="[bold]not markup")]))
    assert (
        text
        == "[bold red]error[/bold red] [bold]X[/bold]: \\[bold]not markup\n1 error(s), 0 warning/info finding(s)\n"
    )
    assert TerminalFormat("fine").format(Findings()) == "[green]ok[/green]: fine\n"


# --- no table by hand ---------------------------------------------------------------------------

# A line of a string literal that is a table's alignment row (``|---|``, ``| :--- |``), or the
# repeated piece of one (``"---|" * n``).
_RULE_ROW = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*\|")


def hand_written_tables(root: Path) -> list[str]:
    """``path:line`` for each string literal outside ``report/`` holding a markdown alignment row."""
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("report/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            text = node.value if isinstance(node, ast.Constant) else None
            if isinstance(text, str) and any(_RULE_ROW.match(line) for line in text.splitlines()):
                found.append(f"{rel}:{node.lineno}")
    return found


def test_no_module_outside_report_writes_a_markdown_table_by_hand() -> None:
    found = hand_written_tables(REPO / "releasekit")
    assert not found, "write markdown tables with releasekit.report.markdown.table:\n" + "\n".join(found)


def test_a_hand_written_table_is_found(tmp_path: Path) -> None:
    pkg = tmp_path / "releasekit"
    files = {
        "report/markdown.py": 'RULE = "|---|"\n',  # the writer itself may
        "publish/ok.py": 'SEP = " | ".join(["a", "b"])\nDIFF = "--- a/x"\n',
        "publish/notes.py": 'LINES = ["| a | b |", "| --- | --- |"]\n',
        "validate/report.py": 'def rule(n):\n    return "|" + "---|" * n\n',
        "builder/notes.py": 'T = """\n## Table\n\n| | v |\n|:---|---:|\n"""\n',
        "plan/f.py": 'def row(n):\n    return f"|---|{n}|"\n',
    }
    for rel, text in files.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(textwrap.dedent(text), encoding="utf-8")
    assert hand_written_tables(pkg) == [
        "builder/notes.py:1",
        "plan/f.py:2",
        "publish/notes.py:1",
        "validate/report.py:2",
    ]
