"""REPRODUCTION_REQUIRED: no reproduce receipt given, or the file is not one."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.publish.reproduction.subject import ReproductionSubject


class ReceiptGiven:
    name = "reproduce receipt given"
    codes = ("REPRODUCTION_REQUIRED",)

    def run(self, subject: ReproductionSubject) -> Findings:
        out = Findings()
        if subject.receipt is None:
            out.add(
                "REPRODUCTION_REQUIRED", subject.problem or "no reproduce receipt", image=subject.image_id
            )
        return out
