"""The SBOM attached with the image (``sbom.cdx.json``, when the release directory has one) describes that image,
and is the very document the verification summary names.

verify-provenance writes the SBOM only for an image that verified; its serial number and its
``metadata.component`` name the image ID (``releasekit.records.sbom``), and the summary's
``releasekit.sbom_sha256`` names its sha256. The gate does not require one (a release directory
made before SBOMs has none), but never attaches one that is unreadable, is not CycloneDX,
describes another image, or differs from the one the summary names: a swapped SBOM that still
names the image would publish another inventory as this one's. The summary is signed
(``verification_summary.dsse.json``), so with a trusted key the sha256 it names is the signer's word.
"""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.publish.checks.context import GateSubject


class SbomNamesImage:
    name = "the SBOM describes this image"
    codes = ("SBOM_INVALID", "SBOM_WRONG_IMAGE", "SBOM_MISSING", "SBOM_MISMATCH")

    def run(self, subject: GateSubject) -> Findings:
        out = Findings()
        loaded = subject.evidence.sbom
        named = subject.evidence.sbom_named()
        if loaded is None:
            if named is not None:
                out.add(
                    "SBOM_MISSING",
                    f"the verification summary names an SBOM (sha256 {named}) and there is none",
                )
            return out
        if not loaded.ok or loaded.record is None:
            out.add("SBOM_INVALID", f"{loaded.problem or loaded.invalid}", path=loaded.path)
            return out
        if not loaded.record.names_image(subject.image.id):
            subject_version = loaded.record.metadata.component.version
            out.add(
                "SBOM_WRONG_IMAGE",
                f"the SBOM describes {subject_version} (serial {loaded.record.serial_number}), "
                f"not {subject.image.id}",
                path=loaded.path,
            )
        if named is not None and loaded.sha256 != named:
            out.add(
                "SBOM_MISMATCH",
                f"the SBOM (sha256 {loaded.sha256}) is not the one the verification summary names "
                f"(sha256 {named}): it was replaced after verification",
                path=loaded.path,
            )
        return out
