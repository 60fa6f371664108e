"""No credential recorded in the receipts: they are attached to the published digest for
anyone who can pull it to read."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.publish.checks.context import CREDENTIAL_NAME, GateSubject, read_receipts


class NoCredentialsInEvidence:
    name = "no credential recorded in the receipts"
    codes = ("CREDENTIAL_IN_RECEIPT",)

    def run(self, subject: GateSubject) -> Findings:
        out = Findings()
        views, _ = read_receipts(subject)
        for view in views:
            for key, value in sorted(view.env.items()):
                if value and CREDENTIAL_NAME.search(key):
                    out.add(
                        "CREDENTIAL_IN_RECEIPT",
                        f"env {key} holds a value; a receipt must not record credentials (it would be published)",
                        cell=view.cell,
                        path=view.path,
                    )
        return out
