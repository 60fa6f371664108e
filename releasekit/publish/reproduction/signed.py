"""REPRODUCTION_UNSIGNED / REPRODUCTION_UNTRUSTED: the receipt's envelope, by a reproducer key."""

from __future__ import annotations

from pathlib import Path

from releasekit.findings import Findings
from releasekit.publish.reproduction.subject import HasReceipt, ReproductionSubject


class ReceiptSigned(HasReceipt):
    name = "reproduce receipt signed by a reproducer key"
    codes = ("REPRODUCTION_UNSIGNED", "REPRODUCTION_UNTRUSTED")

    def run(self, subject: ReproductionSubject) -> Findings:
        out = Findings()
        if not subject.signed:
            out.add(
                "REPRODUCTION_UNSIGNED",
                f"{subject.path}: no {Path(str(subject.path)).name.removesuffix('.json')}.dsse.json beside it "
                "(sign it: releasekit sign --reproduce-receipt FILE --key REPRODUCER_KEY)",
                image=subject.image_id,
            )
        elif subject.signer is None:
            out.add(
                "REPRODUCTION_UNTRUSTED", subject.signature_problem or "not verified", image=subject.image_id
            )
        return out
