"""Every required cell has a passing receipt bound to this image, this lock and the cell's current definition."""

from __future__ import annotations

from releasekit.findings import Findings, Severity
from releasekit.publish.checks.context import GateSubject, read_receipts
from releasekit.publish.evidence import ReceiptView


class ReceiptsComplete:
    name = "every required cell has a passing receipt for this image and lock"
    codes = (
        "RECEIPT_INVALID",
        "RECEIPT_WRONG_IMAGE",
        "RECEIPT_WRONG_DIGEST",
        "RECEIPT_WRONG_LOCK",
        "RECEIPT_STALE_CELL",
        "RECEIPT_UNKNOWN_CELL",
        "RECEIPT_MISSING",
        "RECEIPT_FAILED",
    )

    def run(self, subject: GateSubject) -> Findings:
        out = Findings()
        views, invalid = read_receipts(subject)
        for path, problem in invalid:
            out.add("RECEIPT_INVALID", problem, path=path)
        bound = _bind(subject, views, out)
        for cell in subject.policy.cells:
            if not cell.required:
                continue
            receipts = bound.get(cell.id, [])
            if not receipts:
                out.add("RECEIPT_MISSING", "no receipt for this image and lock", cell=cell.id)
            # A failed run next to a passing one is a flaky cell: it is reported, not averaged away.
            for view in receipts:
                if not view.passed:
                    out.add(
                        "RECEIPT_FAILED", "the cell's validation did not pass", cell=cell.id, path=view.path
                    )
        return out


def _bind(subject: GateSubject, views: list[ReceiptView], out: Findings) -> dict[str, list[ReceiptView]]:
    """The receipts for this image, this lock and the cell's current definition, by cell; the rest into ``out``."""
    bound: dict[str, list[ReceiptView]] = {}
    for view in views:
        if view.image_id != subject.image.id:
            out.add(
                "RECEIPT_WRONG_IMAGE",
                f"receipt is for image {view.image_id}, publishing {subject.image.id}",
                cell=view.cell,
                path=view.path,
            )
            continue
        if subject.image_digest and view.image_digest != subject.image_digest:
            out.add(
                "RECEIPT_WRONG_DIGEST",
                f"receipt ran {view.image_digest or 'a local image (no digest)'}, publishing the staged {subject.image_digest}",
                cell=view.cell,
                path=view.path,
            )
            continue
        if view.lock_sha256 != subject.lock_sha256:
            out.add(
                "RECEIPT_WRONG_LOCK",
                f"receipt is for lock {view.lock_sha256[:12] if view.lock_sha256 else '?'}…, "
                f"this lock is {subject.lock_sha256[:12]}…",
                cell=view.cell,
                path=view.path,
            )
            continue
        assert view.cell is not None
        cell_policy = subject.policy.cell(view.cell)
        if cell_policy and cell_policy.sha256 and view.cell_sha256 and view.cell_sha256 != cell_policy.sha256:
            out.add(
                "RECEIPT_STALE_CELL",
                "the receipt validated an older definition of this cell; validate it again",
                cell=view.cell,
                path=view.path,
            )
            continue
        bound.setdefault(view.cell, []).append(view)
        if cell_policy is None:
            out.add(
                "RECEIPT_UNKNOWN_CELL",
                "the manifest's validation matrix has no such cell",
                severity=Severity.warning,
                cell=view.cell,
                path=view.path,
            )
    return bound
