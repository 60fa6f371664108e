"""Every component whose hygiene is required passed every step on the composed tree of this lock (``hygiene.json``).

Policy (docs/publish.md): ``hygiene.json`` must name this lock's sha256 (hygiene is about
the sources, not the image). For each component with a ``hygiene:`` section, every step
the manifest lists must be in the receipt with status ``passed`` (``skipped``: no file in
scope, also fine). ``failed`` is ``HYGIENE_FAILED`` (with the first findings at
file:line); ``not-runnable`` (hooks that would need the network) is
``HYGIENE_INCOMPLETE``: never a pass. Components with ``required: false`` under
``hygiene:`` are reported as warnings and never block.
"""

from __future__ import annotations

from releasekit.findings import Findings, Severity
from releasekit.publish.checks.context import GateSubject, HygienePolicy
from releasekit.records.test_receipt import HygieneComponent, HygieneReceipt

_OK_STEP = {"passed", "skipped"}


class HygienePassed:
    name = "source hygiene passed on the composed tree of this lock"
    codes = (
        "HYGIENE_MISSING",
        "HYGIENE_INVALID",
        "HYGIENE_WRONG_LOCK",
        "HYGIENE_FAILED",
        "HYGIENE_INCOMPLETE",
    )

    def run(self, subject: GateSubject) -> Findings:
        out = Findings()
        policies = subject.policy.hygiene
        if not policies:
            return out
        receipt = _receipt(subject, out)
        if receipt is None:
            return out
        path = subject.evidence.hygiene.path if subject.evidence.hygiene else ""
        components = {c.component: c for c in receipt.components}
        for policy in policies:
            _judge_component(policy, components.get(policy.component), receipt, path, out)
        return out


def _receipt(subject: GateSubject, out: Findings) -> HygieneReceipt | None:
    """hygiene.json for this lock; missing, invalid or of another lock: reported into ``out``, None."""
    overall = Severity.error if any(p.required for p in subject.policy.hygiene) else Severity.warning
    loaded = subject.evidence.hygiene
    if loaded is None or not loaded.ok:
        why = "no hygiene.json" if loaded is None else f"hygiene.json: {loaded.problem}"
        out.add("HYGIENE_MISSING", f"{why}: run `releasekit hygiene`", severity=overall)
        return None
    receipt = loaded.record
    if receipt is None:
        out.add("HYGIENE_INVALID", loaded.invalid or "", severity=overall, path=loaded.path)
        return None
    if receipt.lock_sha256 != subject.lock_sha256:
        out.add(
            "HYGIENE_WRONG_LOCK",
            f"hygiene.json checked lock {receipt.lock_sha256[:12]}…, this lock is {subject.lock_sha256[:12]}…",
            severity=overall,
            path=loaded.path,
        )
        return None
    return receipt


def _judge_component(
    policy: HygienePolicy,
    comp: HygieneComponent | None,
    receipt: HygieneReceipt,
    path: str,
    out: Findings,
) -> None:
    """One component's hygiene entry against the manifest's steps: reported into ``out``."""
    severity = Severity.error if policy.required else Severity.warning
    note = "" if policy.required else " (hygiene required: false)"
    where = {"component": policy.component, "field": "hygiene", "path": path}
    if comp is None:
        out.add(
            "HYGIENE_MISSING",
            f"hygiene.json has no entry for this component{note}",
            severity=severity,
            **where,
        )
        return
    steps = {s.step: s for s in comp.steps}
    failed = [s.step for s in comp.steps if s.status == "failed"]
    if failed:
        problems = [
            f"{f.location.file or '?'}:{f.location.line or '?'} {f.code} {f.message}"
            for f in receipt.findings.errors
            if f.location.component == policy.component
        ]
        shown = "; ".join(problems[:3]) + (f"; … {len(problems) - 3} more" if len(problems) > 3 else "")
        out.add(
            "HYGIENE_FAILED",
            f"{', '.join(failed)} failed" + (f": {shown}" if shown else "") + note,
            severity=severity,
            **where,
        )
    unrun = [s for s in policy.steps if s not in steps]
    incomplete = [s.step for s in comp.steps if s.status not in _OK_STEP and s.status != "failed"]
    if unrun or incomplete:
        parts = ([f"{', '.join(incomplete)} not runnable here"] if incomplete else []) + (
            [f"{', '.join(unrun)} not run"] if unrun else []
        )
        out.add("HYGIENE_INCOMPLETE", "; ".join(parts) + " (never a pass)" + note, severity=severity, **where)
