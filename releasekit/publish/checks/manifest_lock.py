"""The manifest given is the one the lock was made from."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.publish.checks.context import GateSubject


class ManifestMatchesLock:
    name = "manifest matches lock"
    codes = ("LOCK_MANIFEST_MISMATCH",)

    def run(self, subject: GateSubject) -> Findings:
        out = Findings()
        if subject.manifest_sha256 and subject.lock_manifest_sha256 != subject.manifest_sha256:
            out.add(
                "LOCK_MANIFEST_MISMATCH",
                f"the manifest's sha256 is {subject.manifest_sha256[:12]}…, the lock was made from "
                f"{(subject.lock_manifest_sha256 or 'none')[:12]}…: lock again or pass the right manifest",
            )
        return out
