"""REPRODUCTION_WRONG_DIGEST: the receipt names the digest and image being promoted."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.publish.reproduction.subject import HasReceipt, ReproductionSubject


class ReceiptForThisDigest(HasReceipt):
    name = "reproduce receipt names this digest"
    codes = ("REPRODUCTION_WRONG_DIGEST",)

    def run(self, subject: ReproductionSubject) -> Findings:
        out = Findings()
        receipt = subject.receipt
        assert receipt is not None
        if receipt.digest_only() != subject.digest or receipt.published_image_id != subject.image_id:
            out.add(
                "REPRODUCTION_WRONG_DIGEST",
                f"the receipt reproduced {receipt.digest} (image {receipt.published_image_id[:19]}), "
                f"not {subject.digest} (image {subject.image_id[:19]})",
                image=subject.image_id,
            )
        return out
