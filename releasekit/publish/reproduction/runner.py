"""REPRODUCTION_SAME_RUNNER: the reproducer is not the runner the build's provenance names."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.publish.reproduction.subject import HasReceipt, ReproductionSubject


class ReproducerNotBuilder(HasReceipt):
    name = "reproduced on a runner that did not build"
    codes = ("REPRODUCTION_SAME_RUNNER",)

    def run(self, subject: ReproductionSubject) -> Findings:
        out = Findings()
        receipt = subject.receipt
        assert receipt is not None
        builders = {r for r in (subject.build_runner, receipt.build.runner) if r}
        if not builders:
            out.add(
                "REPRODUCTION_SAME_RUNNER",
                "the build's provenance names no runner: nothing shows the reproduction ran elsewhere",
                image=subject.image_id,
            )
        elif receipt.reproducer in builders:
            out.add(
                "REPRODUCTION_SAME_RUNNER",
                f"reproduced on {receipt.reproducer!r}, the runner that built the image: not independent",
                image=subject.image_id,
            )
        return out
