"""The checks of ``plan check``: one file per concern, each a ``releasekit.checks.Check``
over a read-only ``PlanContext``, run in this order by ``AllOf``."""

from __future__ import annotations

from releasekit.checks import AllOf, Check
from releasekit.plan.checks.already_canonical import AlreadyCanonicalPresent
from releasekit.plan.checks.arrival import PRsArrivedOnTheirOwn
from releasekit.plan.checks.carried import CarriedCommitsVerified
from releasekit.plan.checks.conflicts import PlannedPRsMergeCleanly
from releasekit.plan.checks.context import ComponentState, PlanContext, build_state
from releasekit.plan.checks.duplicated_prerequisite import DuplicatedPrerequisiteCommits
from releasekit.plan.checks.exclusions import ExclusionsAbsent
from releasekit.plan.checks.forge_base import PlannedPRsTargetCanonical
from releasekit.plan.checks.forge_canonical import CanonicalPRsMergedOnForge
from releasekit.plan.checks.forge_draft import PlannedPRsNotDraft
from releasekit.plan.checks.forge_found import NamedPRsOnForge
from releasekit.plan.checks.forge_head import ForgeHeadsMatchLock
from releasekit.plan.checks.forge_merge_commit import ForgeMergeCommitsAgree
from releasekit.plan.checks.forge_retired import RetiredPRsClosedOnForge
from releasekit.plan.checks.lock_context import LockContext
from releasekit.plan.checks.lock_manifest import LockMatchesManifest
from releasekit.plan.checks.merge_order import MergeOrder
from releasekit.plan.checks.named_prs import NamedPRsResolved
from releasekit.plan.checks.pins import PinsAgree
from releasekit.plan.checks.planned_merged import PlannedPRsMerged
from releasekit.plan.checks.pr_heads import PRHeadsUnmoved
from releasekit.plan.checks.published import CheckedCommitPublished
from releasekit.plan.checks.release_only import ReleaseOnlyCommits
from releasekit.plan.checks.runtime_switches import RuntimeSwitchesNamed
from releasekit.plan.checks.superseded import SupersededAbsent
from releasekit.plan.checks.tree_content import TreeContentAnswered
from releasekit.plan.checks.unreadable import ComponentsReadable
from releasekit.plan.checks.wheel_source import WheelSourcesVerified
from releasekit.plan.checks.wheel_tags import WheelTagsFitImage


def all_checks() -> list[Check[PlanContext]]:
    return [
        LockMatchesManifest(),
        ComponentsReadable(),
        CheckedCommitPublished(),
        PlannedPRsMerged(),
        PlannedPRsMergeCleanly(),
        MergeOrder(),
        PRsArrivedOnTheirOwn(),
        DuplicatedPrerequisiteCommits(),
        SupersededAbsent(),
        AlreadyCanonicalPresent(),
        ExclusionsAbsent(),
        NamedPRsResolved(),
        TreeContentAnswered(),
        RuntimeSwitchesNamed(),
        PRHeadsUnmoved(),
        NamedPRsOnForge(),
        PlannedPRsNotDraft(),
        PlannedPRsTargetCanonical(),
        ForgeHeadsMatchLock(),
        RetiredPRsClosedOnForge(),
        ForgeMergeCommitsAgree(),
        CanonicalPRsMergedOnForge(),
        CarriedCommitsVerified(),
        ReleaseOnlyCommits(),
        PinsAgree(),
    ]


def plan_checks() -> AllOf[PlanContext]:
    return AllOf(*all_checks(), name="plan check")


def lock_checks() -> AllOf[LockContext]:
    """What ``plan lock`` judges in the lock it resolved (the wheels against the image)."""
    return AllOf(WheelTagsFitImage(), WheelSourcesVerified(), name="plan lock")


__all__ = ["ComponentState", "PlanContext", "all_checks", "build_state", "lock_checks", "plan_checks"]
