"""REPRODUCTION_DIFFERED: the rebuild was the published image, layer for layer."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.publish.reproduction.subject import HasReceipt, ReproductionSubject


class ReceiptReproduced(HasReceipt):
    name = "reproduction was the published image"
    codes = ("REPRODUCTION_DIFFERED",)

    def run(self, subject: ReproductionSubject) -> Findings:
        out = Findings()
        receipt = subject.receipt
        assert receipt is not None
        same_image = receipt.rebuilt_image_id == receipt.published_image_id
        if not (receipt.reproduced and same_image and receipt.examined.layers > 0):
            out.add(
                "REPRODUCTION_DIFFERED",
                f"the reproduction rebuilt {receipt.rebuilt_image_id[:19] or 'nothing'}, not the published "
                f"image {receipt.published_image_id[:19]} layer for layer",
                image=subject.image_id,
            )
        return out
