"""Release records as GitHub-flavoured markdown, for a workflow job's ``$GITHUB_STEP_SUMMARY``.

Each renderer reads the records a job has just written (through their models, like every other
reader) and returns one markdown section: the plan table, the verification summary, the
validation report and the publish outcome. The workflow appends them; the Actions UI shows them
on the run's page, so a reader sees what each job decided without opening its log.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from releasekit.findings import Severity
from releasekit.records.base import load_record
from releasekit.records.forge import ForgeComponent, ForgeData, ForgePR
from releasekit.records.lock import Lock
from releasekit.records.plan_check import PlanCheckResult, PRStatus
from releasekit.records.publish import PublishRecord
from releasekit.records.receipt import GateResult, read_receipts
from releasekit.records.test_receipt import (
    HYGIENE_FILE,
    TESTS_DIR,
    read_hygiene_receipt,
    read_test_receipt_dir,
)
from releasekit.records.verification import VerificationStatement
from releasekit.report.formats import MarkdownFormat, Result
from releasekit.report.markdown import escape_cell
from releasekit.report.markdown import table as markdown_table

# A table cell is one line of the table: the row must not be split or given extra columns.
_CELL_MAX = 300


def _one_line(text: object) -> str:
    return "" if text is None else " ".join(str(text).split())


def cell(text: object) -> str:
    return escape_cell(_one_line(text), _CELL_MAX)


def table(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    """A table of single-spaced cells of at most ``_CELL_MAX`` characters (``report.markdown.table``)."""
    return markdown_table(
        [_one_line(c) for c in columns], ([_one_line(v) for v in row] for row in rows), max_cell=_CELL_MAX
    )


def _verdict(passed: bool) -> str:
    return "✅ passed" if passed else "❌ failed"


def _findings(result: Result) -> list[str]:
    """The result's findings as a table, errors first, after a blank line (nothing when none)."""
    lines = MarkdownFormat(limit=30, max_cell=_CELL_MAX).lines(result)
    return ["", *lines] if lines else []


def _forge_state(component: ForgeComponent | None, pr: int | None) -> str:
    if component is None or pr is None:
        return "-"
    if component.status != "read":
        return f"not read: {component.reason or 'no forge'}"
    found: ForgePR | None = next((p for p in component.pull_requests if p.number == pr), None)
    if found is None:
        return "not asked"
    if not found.found:
        return "not found"
    parts: list[str] = [found.state or "?"]
    if found.draft:
        parts.append("draft")
    if found.base_ref:
        parts.append(f"into {found.base_ref}")
    return ", ".join(parts)


def _landed(status: PRStatus) -> str:
    if status.how is None and status.landed_at is None:
        return "-"
    where = f" at {status.landed_at[:12]}" if status.landed_at else ""
    return f"{status.how or '?'}{where}" + (f" ({status.arrival})" if status.arrival else "")


def plan_summary(plan_check: Path, lock: Path | None = None) -> str:
    """The plan table: every PR the manifest names, its state in git, how it landed, the forge's word."""
    result = load_record(PlanCheckResult, plan_check)
    forge: ForgeData | None = load_record(Lock, lock).forge if lock is not None else None
    rows = []
    for component in result.components:
        forge_component = forge.component(component.component) if forge else None
        for s in component.statuses:
            rows.append(
                (
                    component.component,
                    f"#{s.pr}" if s.pr is not None else (s.commit or "")[:12],
                    s.title or "",
                    s.role,
                    s.state,
                    _landed(s),
                    _forge_state(forge_component, s.pr),
                    ", ".join(s.codes),
                )
            )
    lines = [f"## Plan check: {_verdict(result.passed)}", ""]
    lines += table(("component", "PR", "title", "role", "state", "how it landed", "forge", "codes"), rows)
    lines += _findings(result)
    return "\n".join(lines) + "\n"


def verification_summary(path: Path) -> str:
    """Each provenance check: its status and what it examined."""
    statement = load_record(VerificationStatement, path)
    summary = statement.predicate
    block = summary.releasekit
    rows = [
        (c.name, c.status, c.examined or "", c.count, ", ".join(c.codes) or c.reason or "")
        for c in block.checks
    ]
    result = "✅ PASSED" if summary.verification_result == "PASSED" else "❌ FAILED"
    lines = [
        f"## Provenance verification: {result}",
        "",
        f"- image: `{summary.resource_uri}`",
        f"- lock sha256: `{block.lock_sha256}`",
        f"- SBOM sha256: `{block.sbom_sha256 or 'none'}`",
        "",
    ]
    lines += table(("check", "status", "examined", "items", "codes / reason"), rows)
    lines += _findings(block)
    return "\n".join(lines) + "\n"


def _gate(g: GateResult) -> str:
    value = "-" if g.candidate is None else f"{g.candidate:g}"
    against = "" if g.baseline_value is None else f" vs {g.baseline_value:g}"
    ratio = "" if g.ratio is None else f" (×{g.ratio:.3f})"
    return f"{'✅' if g.passed else '❌'} {g.metric} {value}{against}{ratio}: {g.bound}"


def validation_summary(receipts: Path) -> str:
    """One row per cell: its status, each gate with the candidate's number against the baseline's."""
    found = read_receipts(receipts)
    rows = [
        (
            r.cell_id,
            r.status,
            r.image_digest or r.image_id[:19],
            "; ".join(_gate(g) for g in r.gates) or "-",
            ", ".join(sorted({f.code for f in r.findings if f.severity == Severity.error})) or "-",
        )
        for r in found
    ]
    passed = bool(found) and all(r.passed for r in found)
    lines = [f"## Validation: {_verdict(passed)} ({len(found)} cell(s))", ""]
    lines += table(("cell", "status", "image", "gates (candidate vs baseline)", "error codes"), rows)
    return "\n".join(lines) + "\n"


def publish_summary(path: Path) -> str:
    """What publish did: the digest, the tags, the tags it moved, each gate check's verdict."""
    record = load_record(PublishRecord, path)
    lines = [
        f"## Publish: {'✅ published' if record.published else '❌ not published'}",
        "",
        f"- repository: `{record.repository}`",
        f"- digest: `{record.digest or '-'}`",
        f"- image ID: `{record.image_id}`",
        f"- tags: {', '.join(f'`{t}`' for t in record.tags) or '-'}",
        f"- signed: {'yes, ' + ', '.join(sorted(record.signers.values())) if record.signers else 'no'}",
    ]
    if record.moved_tags:
        lines.append(
            "- moved: " + ", ".join(f"`{t}` (was `{d}`)" for t, d in sorted(record.moved_tags.items()))
        )
    lines += [
        "",
        *table(("gate check", "verdict"), [(c.name, _verdict(c.passed)) for c in record.gate.checks]),
    ]
    lines += _findings(record.gate)
    return "\n".join(lines) + "\n"


def tests_summary(release_dir: Path) -> str:
    """The component suites run in the image and the hygiene of the composed tree."""
    suites = read_test_receipt_dir(release_dir / TESTS_DIR)
    rows = [
        (
            t.component,
            t.suite,
            t.status + ("" if t.required else " (not required)"),
            f"{t.counts.passed} passed, {t.counts.failed} failed, {t.counts.skipped} skipped",
            t.skip_reason or "; ".join(f"{r.rule}: {r.actual}" for r in t.expected) or "-",
        )
        for t in suites
    ]
    lines = ["## Component tests", ""]
    lines += table(("component", "suite", "status", "counts", "rules / skip reason"), rows)
    hygiene_path = release_dir / HYGIENE_FILE
    if hygiene_path.is_file():
        hygiene = read_hygiene_receipt(hygiene_path)
        steps = [
            (c.component, s.step, s.status, s.files, s.detail or "")
            for c in hygiene.components
            for s in c.steps
        ]
        lines += ["", f"## Hygiene: {hygiene.status}", ""]
        lines += table(("component", "step", "status", "files", "detail"), steps)
        lines += _findings(hygiene)
    return "\n".join(lines) + "\n"
