"""The manifest given is the one the lock was made from."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.manifest import lock_manifest_mismatch
from releasekit.publish.checks.context import GateSubject


class ManifestMatchesLock:
    name = "manifest matches lock"
    codes = ("LOCK_MANIFEST_MISMATCH",)

    def run(self, subject: GateSubject) -> Findings:
        out = Findings()
        why = (
            lock_manifest_mismatch(subject.manifest_sha256, subject.lock_manifest_sha256)
            if subject.manifest_sha256
            else None
        )
        if why is not None:
            out.add("LOCK_MANIFEST_MISMATCH", why)
        return out
