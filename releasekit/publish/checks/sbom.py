"""The SBOM attached with the image (``sbom.cdx.json``, when the release directory has one) describes that image.

verify-provenance writes the SBOM only for an image that verified; its serial number and its
``metadata.component`` name the image ID (``releasekit.records.sbom``). The gate does not require
one (a release directory made before SBOMs has none), but never attaches one that is unreadable,
is not CycloneDX, or describes another image: that would publish a wrong inventory as this one's.
"""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.publish.checks.context import GateSubject


class SbomNamesImage:
    name = "the SBOM describes this image"
    codes = ("SBOM_INVALID", "SBOM_WRONG_IMAGE")

    def run(self, subject: GateSubject) -> Findings:
        out = Findings()
        loaded = subject.evidence.sbom
        if loaded is None:
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
        return out
