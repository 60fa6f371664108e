"""The runtime switches a component's recipes set at the checked commit are named (issue 44).

Each ``VLLM_*``/``NCCL_*``/``TORCH_*``/... setting the content scan found in the release's image
recipes, launchers and Compose files (``plan/content/switches.py``) is a finding naming the variable
and its value: an error unless ``policy.runtime_switches`` declares it (then shown, as info).
"""

from __future__ import annotations

from typing import Any

from releasekit.findings import Findings, Severity
from releasekit.manifest.switches import declared, declared_other_value
from releasekit.plan.checks.context import PlanContext


class RuntimeSwitchesNamed:
    name = "runtime-switches"
    codes = ("RUNTIME_SWITCH_UNDECLARED", "RUNTIME_SWITCH_DECLARED")

    def run(self, ctx: PlanContext) -> Findings:
        findings = Findings()
        policy = ctx.loaded.manifest.policy
        for name, content in ctx.content.items():
            scan = content.checked
            for switch in scan.switches:
                where: dict[str, Any] = {
                    "component": name,
                    "commit": scan.commit,
                    "file": switch.file,
                    "line": switch.line,
                }
                entry = declared(policy, switch.name, switch.value)
                if entry is not None:
                    findings.add(
                        "RUNTIME_SWITCH_DECLARED",
                        f"{switch.shown()}; declared: {entry.reason}",
                        severity=Severity.info,
                        **where,
                    )
                    continue
                other = declared_other_value(policy, switch.name)
                said = (
                    f"policy.runtime_switches declares {switch.name}={other}"
                    if other is not None
                    else ("policy.runtime_switches does not declare it")
                )
                findings.add(
                    "RUNTIME_SWITCH_UNDECLARED",
                    f"{switch.shown()}: a runtime switch of the engine; {said}",
                    **where,
                )
        return findings
