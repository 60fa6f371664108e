"""Every locked wheel fits the image's Python and platform (its tags, by ``packaging.tags``)."""

from __future__ import annotations

from releasekit.findings import Findings, Severity
from releasekit.plan.checks.lock_context import LockContext
from releasekit.plan.wheels import fit_rank, is_universal, wheel_tags


class WheelTagsFitImage:
    name = "wheel-tags-fit-image"
    codes = ("WHEEL_TAGS_MISMATCH", "WHEEL_TAGS_UNCHECKED")

    def run(self, ctx: LockContext) -> Findings:
        found = Findings()
        for name, wheel in sorted(ctx.lock.wheel_components().items()):
            filename = wheel.filename
            if is_universal(filename):
                continue
            if ctx.image is None:
                found.add(
                    "WHEEL_TAGS_UNCHECKED",
                    f"{filename} is built for {wheel_tags(filename)}; the toolchain names no python and "
                    "platform, so whether it fits the image is not known",
                    severity=Severity.error if ctx.strict else Severity.warning,
                    component=name,
                    path=filename,
                )
            elif fit_rank(filename, ctx.image) is None:
                found.add(
                    "WHEEL_TAGS_MISMATCH",
                    f"{filename} is built for {wheel_tags(filename)}; the image is {ctx.image.describe()}",
                    component=name,
                    path=filename,
                )
        return found
