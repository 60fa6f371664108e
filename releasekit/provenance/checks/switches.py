"""The runtime switches the release image's own config sets (its OCI config ``Env``) are named (issue 44).

Every ``VLLM_*``/``NCCL_*``/``TORCH_*``/... variable of the image's environment (the base's and the
release layer's: ``releasekit/manifest/switches.py`` says which names count) is a finding naming the
variable and its value: an error unless ``policy.runtime_switches`` declares it (then shown, as info).
A container started from the image runs with them whatever a launcher or a validation cell sets.
"""

from __future__ import annotations

from releasekit.checks import Examined
from releasekit.findings import Findings, Severity
from releasekit.manifest.switches import declared, declared_other_value, is_switch
from releasekit.provenance.context import VerifyContext


class ImageSwitchesCheck:
    name = "runtime-switches"
    codes = ("RUNTIME_SWITCH_UNDECLARED", "RUNTIME_SWITCH_DECLARED")

    def examines(self, ctx: VerifyContext) -> Examined:
        """The runtime switches of the image config's Env."""
        names = (f"Env.{k}" for k in ctx.image.env if is_switch(k))
        return Examined.of("values", names, absent="the image's config sets no runtime switch")

    def run(self, ctx: VerifyContext) -> Findings:
        found = Findings()
        policy = getattr(ctx.manifest, "policy", None)
        for name, value in sorted(ctx.image.env.items()):
            if not is_switch(name):
                continue
            entry = declared(policy, name, value)
            if entry is not None:
                found.add(
                    "RUNTIME_SWITCH_DECLARED",
                    f"the image's config sets {name}={value}; declared: {entry.reason}",
                    severity=Severity.info,
                    field=f"Env.{name}",
                )
                continue
            other = declared_other_value(policy, name)
            said = (
                f"policy.runtime_switches declares {name}={other}"
                if other is not None
                else "policy.runtime_switches does not declare it"
            )
            found.add(
                "RUNTIME_SWITCH_UNDECLARED",
                f"the image's config sets {name}={value}: a runtime switch of the engine; {said}",
                field=f"Env.{name}",
            )
        return found
