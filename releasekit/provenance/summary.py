"""The verification summary ``verify-provenance`` writes (the record: ``releasekit.records.verification``).

Written beside the build's provenance (``OUTDIR/verification_summary.json``) so that the
publish gate can read one file: which image, which lock (the policy), passed or failed,
and every finding. The file is always an in-toto Statement v1 (subject: the image ID) with
the SLSA VSA v1 predicate, signed or not.
"""

from __future__ import annotations

import os
from pathlib import Path

from releasekit.clock import Clock
from releasekit.digests import file_sha256
from releasekit.records.base import write_record
from releasekit.records.provenance import ResourceDescriptor, Statement
from releasekit.records.verification import (
    FAILED_LEVELS,
    PASSED_LEVELS,
    POLICY_URI,
    ReleasekitBlock,
    VerificationStatement,
    VerificationSummary,
)


def make_summary(
    *, image_id: str, passed: bool, block: ReleasekitBlock, provenance: Path | None, clock: Clock
) -> VerificationSummary:
    """The summary of one verification, ``timeVerified`` read from ``clock`` (the command's)."""
    attestations = []
    if provenance is not None and os.path.lexists(provenance):  # a FIFO, link out, or too large: exit 2
        digest = file_sha256(provenance, max_bytes=Statement.max_bytes, within=provenance.parent)
        attestations.append(ResourceDescriptor(uri=provenance.name, digest={"sha256": digest}))
    return VerificationSummary(
        time_verified=clock.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
        resource_uri=image_id,
        policy=ResourceDescriptor(uri=POLICY_URI, digest={"sha256": block.lock_sha256}),
        attestations=attestations,
        verification_result="PASSED" if passed else "FAILED",
        verified_levels=list(PASSED_LEVELS if passed else FAILED_LEVELS),
        releasekit=block,
    )


def write_summary(summary: VerificationSummary, path: Path) -> None:
    """``path``: the in-toto Statement about the image ``summary.resourceUri`` names."""
    write_record(VerificationStatement.about(summary), path)
