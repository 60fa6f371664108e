"""The rules a manifest must satisfy beyond its types: one check per file, each a
``releasekit.checks.Check`` over a read-only ``ManifestContext``, run in this order by ``AllOf``.

Every finding carries a stable code and the file:line:column of the field it is about.
"""

from __future__ import annotations

from typing import Any

from releasekit.checks import AllOf, Check
from releasekit.findings import Findings
from releasekit.manifest.checks.after_targets import AfterTargets
from releasekit.manifest.checks.arrived_in import ArrivedInNamesAPlannedPR
from releasekit.manifest.checks.context import ManifestContext, PRKey, find_cycle, parse_pr_reference
from releasekit.manifest.checks.cycles import NoDependencyCycle
from releasekit.manifest.checks.exclusions import ExclusionsWellFormed
from releasekit.manifest.checks.gate_thresholds import GateThresholds
from releasekit.manifest.checks.order import OrderRespectsAfter
from releasekit.manifest.checks.pins import PinsConsistent
from releasekit.manifest.checks.placeholders import NoPlaceholders
from releasekit.manifest.checks.provenance_items import ProvenanceItems
from releasekit.manifest.checks.supersession import SupersededNotPlanned
from releasekit.manifest.checks.unique_prs import UniquePRNumbers
from releasekit.manifest.checks.validation_matrix import ValidationMatrix
from releasekit.manifest.loader import SourceMap
from releasekit.manifest.models import Manifest


def all_checks() -> list[Check[ManifestContext]]:
    return [
        UniquePRNumbers(),
        AfterTargets(),
        ArrivedInNamesAPlannedPR(),
        NoDependencyCycle(),
        OrderRespectsAfter(),
        SupersededNotPlanned(),
        NoPlaceholders(),
        PinsConsistent(),
        ExclusionsWellFormed(),
        ValidationMatrix(),
        GateThresholds(),
        ProvenanceItems(),
    ]


def manifest_checks() -> AllOf[ManifestContext]:
    return AllOf(*all_checks(), name="manifest")


def check_rules(manifest: Manifest, raw: dict[str, Any], source: SourceMap) -> Findings:
    """Every rule's findings, in the order of ``all_checks()``."""
    return manifest_checks().run(ManifestContext(manifest, raw, source))


__all__ = [
    "ManifestContext",
    "PRKey",
    "all_checks",
    "check_rules",
    "find_cycle",
    "manifest_checks",
    "parse_pr_reference",
]
