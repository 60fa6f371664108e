"""Every required test suite has a passed receipt (``tests/<component>.<suite>.json``) for this image and lock.

Policy (docs/publish.md):
  * a suite's receipt counts only when it names this image ID and this lock's sha256;
  * ``passed`` is the only passing status; failures the receipt judged ``pre-existing``,
    ``flaky`` or ``allowlisted`` are accepted as the receipt says, a ``regression`` or an
    ``unjudged`` failure is not (a receipt that says passed while listing one is not trusted);
    a count rule the receipt marks unmet fails the suite;
  * a skipped suite (the host lacked the GPUs or devices it needs) did not pass: for a
    required suite that is an error. There is no command-line override: to publish without
    it, the manifest marks the suite ``required: false`` (which changes the manifest, so the
    lock, so the release records the decision);
  * suites with ``required: false`` are reported (warnings) but never block.
"""

from __future__ import annotations

from releasekit.findings import Findings, Severity
from releasekit.publish.checks.context import GateSubject, SuitePolicy
from releasekit.records.test_receipt import TestReceipt

_ACCEPTED = {"pre-existing", "flaky", "allowlisted"}


def read_test_receipts(subject: GateSubject) -> tuple[list[tuple[str, TestReceipt]], list[tuple[str, str]]]:
    """(path, receipt) for each readable test receipt; (path, problem) for each that is not."""
    good: list[tuple[str, TestReceipt]] = []
    bad: list[tuple[str, str]] = []
    for loaded in subject.evidence.test_receipts:
        if not loaded.ok:
            bad.append((loaded.path, loaded.problem or "unreadable"))
            continue
        if loaded.record is None:
            bad.append((loaded.path, loaded.invalid or "not a test receipt"))
        else:
            good.append((loaded.path, loaded.record))
    return good, bad


def suite_problems(receipt: TestReceipt) -> list[str]:
    """Why this receipt is not a pass (empty: it passed)."""
    problems: list[str] = []
    if receipt.status != "passed":
        problems.append(
            f"status {receipt.status}" + (f" ({receipt.skip_reason})" if receipt.skip_reason else "")
        )
    unaccepted = [f for f in receipt.failures if f.verdict not in _ACCEPTED]
    for failure in unaccepted[:5]:
        problems.append(f"{failure.verdict}: {failure.test}")
    if len(unaccepted) > 5:
        problems.append(f"… and {len(unaccepted) - 5} more")
    problems += [
        f"count rule '{rule.rule}' not met (actual {rule.actual})" for rule in receipt.expected if not rule.ok
    ]
    return problems


class TestSuitesPassed:
    __test__ = False  # not a pytest class

    name = "every required test suite passed in this image"
    codes = (
        "TEST_RECEIPT_INVALID",
        "TEST_RECEIPT_FOR_OTHER_IMAGE",
        "TEST_RECEIPT_WRONG_DIGEST",
        "TEST_RECEIPT_FOR_OTHER_LOCK",
        "TEST_RECEIPT_UNKNOWN_SUITE",
        "TEST_RECEIPT_MISSING",
        "TEST_SUITE_SKIPPED",
        "TEST_SUITE_FAILED",
    )

    def run(self, subject: GateSubject) -> Findings:
        out = Findings()
        receipts, invalid = read_test_receipts(subject)
        for path, problem in invalid:
            out.add("TEST_RECEIPT_INVALID", problem, path=path)
        bound = _bind(subject, receipts, out)
        for policy in subject.policy.suites:
            _judge_suite(policy, bound.get(policy.key, []), out)
        return out


def _severity(policy: SuitePolicy | None) -> Severity:
    return Severity.error if policy is not None and policy.required else Severity.warning


def _bind(
    subject: GateSubject, receipts: list[tuple[str, TestReceipt]], out: Findings
) -> dict[str, list[tuple[str, TestReceipt]]]:
    """The receipts of a known suite for this image and lock, by suite; the others are reported into ``out``."""
    policies = {p.key: p for p in subject.policy.suites}
    bound: dict[str, list[tuple[str, TestReceipt]]] = {}
    for path, receipt in receipts:
        key = f"{receipt.component}/{receipt.suite}"
        policy = policies.get(key)
        comp, field = receipt.component, f"tests.{receipt.suite}"
        if policy is None:
            out.add(
                "TEST_RECEIPT_UNKNOWN_SUITE",
                "the manifest has no such suite",
                severity=Severity.warning,
                component=comp,
                field=field,
                path=path,
            )
            continue
        if receipt.image_id != subject.image.id:
            out.add(
                "TEST_RECEIPT_FOR_OTHER_IMAGE",
                f"the suite ran in image {receipt.image_id or '(none recorded)'}, publishing {subject.image.id}",
                severity=_severity(policy),
                component=comp,
                field=field,
                path=path,
            )
            continue
        if subject.image_digest and receipt.image_digest != subject.image_digest:
            out.add(
                "TEST_RECEIPT_WRONG_DIGEST",
                f"the suite ran {receipt.image_digest or 'a local image (no digest)'}, publishing the staged {subject.image_digest}",
                severity=_severity(policy),
                component=comp,
                field=field,
                path=path,
            )
            continue
        if receipt.lock_sha256 != subject.lock_sha256:
            said = (
                f"lock {receipt.lock_sha256[:12]}…" if receipt.lock_sha256 else "no lock (run without --lock)"
            )
            out.add(
                "TEST_RECEIPT_FOR_OTHER_LOCK",
                f"the receipt names {said}, this lock is {subject.lock_sha256[:12]}…",
                severity=_severity(policy),
                component=comp,
                field=field,
                path=path,
            )
            continue
        bound.setdefault(key, []).append((path, receipt))
    return bound


def _judge_suite(policy: SuitePolicy, found: list[tuple[str, TestReceipt]], out: Findings) -> None:
    """A suite's receipts for this image and lock: missing, skipped or failed ones are reported into ``out``."""
    comp, field = policy.component, f"tests.{policy.suite}"
    if not found:
        if policy.required:
            out.add(
                "TEST_RECEIPT_MISSING",
                "no test receipt for this image and lock: run `releasekit test`",
                component=comp,
                field=field,
            )
        return
    # Every receipt for the suite must pass: a failed run beside a passed one is not averaged away.
    for path, receipt in found:
        problems = suite_problems(receipt)
        if not problems:
            continue
        if receipt.status == "skipped" and len(problems) == 1:
            hint = (
                "; run it on a host that has what it needs, or mark it required: false in the manifest"
                if policy.required
                else " (required: false)"
            )
            out.add(
                "TEST_SUITE_SKIPPED",
                f"the suite did not run: {receipt.skip_reason or 'skipped'}{hint}",
                severity=_severity(policy),
                path=path,
                component=comp,
                field=field,
            )
            continue
        out.add(
            "TEST_SUITE_FAILED",
            "; ".join(problems) + ("" if policy.required else " (required: false)"),
            severity=_severity(policy),
            path=path,
            component=comp,
            field=field,
        )
