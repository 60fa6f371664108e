"""verify-provenance passed for this image and lock, over the provenance statement that is published."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.publish.checks.context import GateSubject
from releasekit.records.provenance import PROVENANCE_FILE
from releasekit.records.verification import VerificationStatement, VerificationSummary


class ProvenanceVerified:
    name = "verify-provenance passed for this image"
    codes = (
        "VERIFICATION_MISSING",
        "VERIFICATION_WRONG_IMAGE",
        "VERIFICATION_WRONG_LOCK",
        "PROVENANCE_NOT_VERIFIED",
        "PROVENANCE_MISSING",
        "PROVENANCE_WRONG_IMAGE",
    )

    def run(self, subject: GateSubject) -> Findings:
        out = Findings()
        image_id = subject.image.id
        loaded = subject.evidence.verification_summary
        summary: VerificationSummary | None = None
        if not loaded.ok:
            out.add("VERIFICATION_MISSING", f"verification summary: {loaded.problem}", path=loaded.path)
        else:
            statement: VerificationStatement | None = loaded.record
            if statement is None:
                out.add(
                    "VERIFICATION_MISSING",
                    f"verification summary unusable: {loaded.invalid}",
                    path=loaded.path,
                )
            else:
                summary = statement.summary
                if not statement.names_image(image_id):
                    subjects = ", ".join(d[:12] for d in statement.subject_sha256()) or "no sha256"
                    out.add(
                        "VERIFICATION_WRONG_IMAGE",
                        f"the summary verified {summary.resource_uri} (subject {subjects}), not {image_id}",
                        path=loaded.path,
                    )
                if summary.lock_sha256 and summary.lock_sha256 != subject.lock_sha256:
                    out.add(
                        "VERIFICATION_WRONG_LOCK",
                        f"the summary was made against lock {summary.lock_sha256[:12]}…",
                        path=loaded.path,
                    )
                # A check that failed or never ran is not verified, whatever the result line says;
                # "not applicable" (its subject is absent, with the reason recorded) is accepted.
                if summary.result != "PASSED" or summary.error_codes or summary.unproven_checks:
                    detail = ", ".join([*sorted(set(summary.error_codes)), *summary.unproven_checks])
                    out.add(
                        "PROVENANCE_NOT_VERIFIED",
                        f"verificationResult {summary.result}" + (f" ({detail})" if detail else ""),
                        path=loaded.path,
                    )
        provenance = subject.evidence.provenance
        verified_sha = summary.input_attestations.get(PROVENANCE_FILE) if loaded.ok and summary else None
        if provenance.ok and verified_sha and verified_sha != provenance.sha256:
            out.add(
                "PROVENANCE_NOT_VERIFIED",
                "provenance.intoto.json is not the file verify-provenance verified (its sha256 differs)",
                path=provenance.path,
            )
        if not provenance.ok:
            out.add("PROVENANCE_MISSING", f"provenance statement: {provenance.problem}", path=provenance.path)
        elif provenance.record is not None:
            if not provenance.record.names(image_id):
                out.add(
                    "PROVENANCE_WRONG_IMAGE",
                    f"the provenance statement's subjects do not include {image_id}",
                    path=provenance.path,
                )
        else:
            out.add("PROVENANCE_MISSING", "provenance statement is not a JSON object", path=provenance.path)
        return out
