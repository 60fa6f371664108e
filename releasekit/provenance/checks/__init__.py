"""The checks of verify-provenance: one small object per concern, each with its own finding codes.

A check has a ``name``, the ``codes`` it may report, and ``run(ctx) -> Findings``. The
verifier runs them all; the result passes when no check reports an error.
"""

from __future__ import annotations

from typing import Protocol

from releasekit.findings import Findings
from releasekit.provenance.context import VerifyContext


class Check(Protocol):
    name: str
    codes: tuple[str, ...]

    def run(self, ctx: VerifyContext) -> Findings: ...


def all_checks() -> list[Check]:
    from releasekit.provenance.checks.accounting import FileAccountingCheck
    from releasekit.provenance.checks.config import ConfigCheck
    from releasekit.provenance.checks.labels import LabelsCheck
    from releasekit.provenance.checks.limits import LimitsCheck
    from releasekit.provenance.checks.native import NativeArchCheck
    from releasekit.provenance.checks.policy import ForbiddenDistributionCheck
    from releasekit.provenance.checks.records import RecordCheck
    from releasekit.provenance.checks.reproduction import ReproductionCheck
    from releasekit.provenance.checks.shadowing import ShadowingCheck
    from releasekit.provenance.checks.sources import SourceBlobCheck
    from releasekit.provenance.checks.toolchain import ToolchainCheck
    from releasekit.provenance.checks.unowned import UnownedFilesCheck
    from releasekit.provenance.checks.version import VersionCommitCheck

    return [
        ReproductionCheck(),
        ConfigCheck(),
        FileAccountingCheck(),
        LimitsCheck(),
        LabelsCheck(),
        RecordCheck(),
        UnownedFilesCheck(),
        ShadowingCheck(),
        VersionCommitCheck(),
        SourceBlobCheck(),
        NativeArchCheck(),
        ForbiddenDistributionCheck(),
        ToolchainCheck(),
    ]
