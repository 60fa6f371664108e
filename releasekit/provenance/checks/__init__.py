"""The checks of verify-provenance: one small object per concern, each with its own finding codes.

Each is a ``releasekit.checks.Check`` over a ``VerifyContext``: a ``name``, the ``codes`` it
may report, and ``run(ctx) -> Findings``. The verifier runs them all with ``AllOf``; the
result passes when no check reports an error.
"""

from __future__ import annotations

from releasekit.checks import Check
from releasekit.provenance.context import VerifyContext


def all_checks() -> list[Check[VerifyContext]]:
    from releasekit.provenance.checks.accounting import FileAccountingCheck
    from releasekit.provenance.checks.config import ConfigCheck
    from releasekit.provenance.checks.labels import LabelsCheck
    from releasekit.provenance.checks.limits import LimitsCheck
    from releasekit.provenance.checks.native import NativeArchCheck
    from releasekit.provenance.checks.policy import ForbiddenDistributionCheck
    from releasekit.provenance.checks.records import RecordCheck
    from releasekit.provenance.checks.reproduction import ReproductionCheck
    from releasekit.provenance.checks.requirements import RequirementsCheck
    from releasekit.provenance.checks.shadowing import ShadowingCheck
    from releasekit.provenance.checks.sources import SourceBlobCheck
    from releasekit.provenance.checks.switches import ImageSwitchesCheck
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
        RequirementsCheck(),
        ImageSwitchesCheck(),
        ToolchainCheck(),
    ]
