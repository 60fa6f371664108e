"""The publish gate's rules: one file per rule, each a ``releasekit.checks.Check`` over a
``GateSubject``, composed with ``AllOf`` by ``releasekit.publish.gate``."""

from __future__ import annotations

from releasekit.checks import Check
from releasekit.publish.checks.component_tests import TestSuitesPassed
from releasekit.publish.checks.context import CellPolicy, GatePolicy, GateSubject, flags_of, read_receipts
from releasekit.publish.checks.credentials import NoCredentialsInEvidence
from releasekit.publish.checks.forbidden import NoForbiddenSwitches
from releasekit.publish.checks.hidden import NoHiddenSwitches
from releasekit.publish.checks.hygiene import HygienePassed
from releasekit.publish.checks.manifest_lock import ManifestMatchesLock
from releasekit.publish.checks.plan_check import PlanCheckPassed
from releasekit.publish.checks.provenance import ProvenanceVerified
from releasekit.publish.checks.receipts import ReceiptsComplete
from releasekit.publish.checks.sbom import SbomNamesImage


def all_checks() -> list[Check[GateSubject]]:
    return [
        ManifestMatchesLock(),
        PlanCheckPassed(),
        ProvenanceVerified(),
        SbomNamesImage(),
        ReceiptsComplete(),
        TestSuitesPassed(),
        HygienePassed(),
        NoForbiddenSwitches(),
        NoHiddenSwitches(),
        NoCredentialsInEvidence(),
    ]


__all__ = ["CellPolicy", "GatePolicy", "GateSubject", "all_checks", "flags_of", "read_receipts"]
