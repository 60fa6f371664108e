"""plan-check.json is readable, checked this lock, and found no errors."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.publish.checks.context import GateSubject


class PlanCheckPassed:
    name = "plan check passed for this lock"
    codes = ("PLAN_CHECK_MISSING", "PLAN_CHECK_WRONG_LOCK", "PLAN_CHECK_FAILED")

    def run(self, subject: GateSubject) -> Findings:
        out = Findings()
        loaded = subject.evidence.plan_check
        if not loaded.ok:
            out.add("PLAN_CHECK_MISSING", f"plan-check result: {loaded.problem}", path=loaded.path)
            return out
        result = loaded.record
        if result is None:
            out.add("PLAN_CHECK_MISSING", f"plan-check result unusable: {loaded.invalid}", path=loaded.path)
            return out
        if result.lock_sha256 != subject.lock_sha256:
            out.add(
                "PLAN_CHECK_WRONG_LOCK",
                f"plan check ran on lock {(result.lock_sha256 or 'unnamed')[:12]}…, this lock is "
                f"{subject.lock_sha256[:12]}…",
                path=loaded.path,
            )
        if not result.passed:
            codes = ", ".join(sorted(set(result.error_codes))) or "passed: false"
            out.add("PLAN_CHECK_FAILED", f"plan check found errors: {codes}", path=loaded.path)
        return out
