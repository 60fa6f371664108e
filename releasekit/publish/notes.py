"""RELEASE.md for a published image: the build's notes plus the validation summary.

The validation part has one row per cell of the matrix (pass, fail or missing) and the
headline numbers each receipt reports, next to their baseline where the receipt gives one.
The tests part has one row per suite of the manifest: what ran in this image (passed,
failed, errors, skipped) next to the counts the plan states, the failures accepted as
pre-existing or flaky, and the hygiene steps per component.
"""

from __future__ import annotations

from releasekit.docker_engine import ImageFacts
from releasekit.publish.checks.component_tests import read_test_receipts
from releasekit.publish.checks.context import GateSubject
from releasekit.publish.evidence import Evidence
from releasekit.publish.gate import GatePolicy, GateReport
from releasekit.records.gate import SuitePolicy
from releasekit.records.legacy import Headline
from releasekit.records.sbom import SBOM_FILE
from releasekit.records.test_receipt import HygieneReceipt, TestReceipt
from releasekit.report.markdown import table

_MAX_HEADLINES = 4


def _number(value: int | float | str) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _headline(metric: Headline) -> str | None:
    if metric.value is None:
        return None
    text = f"{metric.name} {_number(metric.value)}"
    if metric.unit:
        text += f" {metric.unit}"
    if metric.baseline:
        text += f" (baseline {_number(metric.baseline)}"
        if not isinstance(metric.value, str):
            text += f", {float(metric.value) / float(metric.baseline):.1%}"
        text += ")"
    return text


def _suite_row(suite: SuitePolicy, receipt: TestReceipt | None) -> tuple[str, str, str, str, str]:
    optional = "" if suite.required else " (optional)"
    if receipt is None:
        stated = "; ".join(suite.expect) or "-"
        return (suite.key, f"{'not run' if optional else 'MISSING'}{optional}", "-", stated, "-")
    result = receipt.status + (f": {receipt.skip_reason}" if receipt.skip_reason else "") + optional
    return (suite.key, result, receipt.counts_text(), receipt.stated_text(), receipt.accepted_text())


def _tests_section(subject: GateSubject) -> list[str]:
    """Rows for the manifest's suites and hygiene; empty when the manifest has neither."""
    policy = subject.policy
    if not policy.suites and not policy.hygiene:
        return []
    receipts, _ = read_test_receipts(subject)
    bound = {
        f"{r.component}/{r.suite}": r
        for _, r in receipts
        if r.image_id == subject.image.id and r.lock_sha256 == subject.lock_sha256
    }
    lines = ["", "## Tests", ""]
    if policy.suites:
        rows = [_suite_row(suite, bound.get(suite.key)) for suite in policy.suites]
        lines += table(
            ("suite", "result", "counts", "plan states", "accepted failures"), rows, padded_rule=True
        )
    loaded = subject.evidence.hygiene
    if policy.hygiene:
        hygiene: HygieneReceipt | None = loaded.record if loaded is not None else None
        if hygiene is not None and hygiene.lock_sha256 != subject.lock_sha256:
            hygiene = None
        entries = {c.component: c for c in hygiene.components} if hygiene else {}
        hygiene_rows = []
        for item in policy.hygiene:
            comp = entries.get(item.component)
            steps = ", ".join(f"{s.step} {s.status}" for s in comp.steps) if comp else "MISSING"
            hygiene_rows.append((f"{item.component}{'' if item.required else ' (optional)'}", steps))
        lines += ["", *table(("hygiene", "steps"), hygiene_rows, padded_rule=True)]
    return lines


def _signatures_section(signers: dict[str, str]) -> list[str]:
    """Which envelopes were verified, by which key; or that the evidence is not signed."""
    lines = ["", "## Signatures", ""]
    if not signers:
        return [
            *lines,
            "- NOT signed: no DSSE envelope; nothing shows who made this evidence (EVIDENCE_UNSIGNED)",
        ]
    for name, keyid in sorted(signers.items()):
        lines.append(f"- `{name}`: DSSE envelope, signature by key `{keyid[:16]}` verified (--trusted-key)")
    return [
        *lines,
        "- attached to the image digest as an OCI artifact (`application/vnd.dsse.envelope.v1+json`)",
    ]


def _sbom_section(evidence: Evidence | None) -> list[str]:
    """The attached SBOM: its file, serial number, sha256 and components by type (nothing when none)."""
    loaded = evidence.sbom if evidence is not None else None
    if loaded is None or loaded.record is None:
        return []
    sbom = loaded.record
    counts = ", ".join(f"{n} {kind}" for kind, n in sbom.counts().items())
    return [
        "",
        "## SBOM",
        "",
        f"- `{SBOM_FILE}` (CycloneDX {sbom.spec_version}, attached): serial `{sbom.serial_number}`, "
        f"sha256 `{loaded.sha256}`",
        f"- components and files: {counts}",
    ]


def release_notes(
    *,
    build_notes: str | None,
    report: GateReport,
    policy: GatePolicy,
    repository: str,
    digest: str,
    tags: list[str],
    evidence: Evidence | None = None,
    signers: dict[str, str] | None = None,
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
    ]
    by_cell = {r.cell: r for r in report.receipts}
    known = [c.id for c in policy.cells] + sorted(c for c in by_cell if policy.cell(c or "") is None and c)
    rows = []
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
        rows.append((cell_id, result, heads))
    lines += table(("cell", "result", "headline numbers"), rows, padded_rule=True)
    if evidence is not None:
        subject = GateSubject(
            image=ImageFacts(id=report.image_id),
            lock_sha256=report.lock_sha256,
            evidence=evidence,
            policy=policy,
        )
        lines += _tests_section(subject)
    if signers is not None:
        lines += _signatures_section(signers)
    lines += _sbom_section(evidence)
    lines += ["", "## Gate", ""]
    for check in report.checks:
        lines.append(f"- {'pass' if check.passed else 'FAIL'}: {check.name}")
    return "\n".join(lines) + "\n"
