"""The publish gate: small checks, each with a name and its own finding codes, composed.

Every rule (one file each in ``releasekit.publish.checks``) looks at the same
``GateSubject`` (the image, the lock's sha256, the evidence files, the policy from the
manifest) and returns findings; ``AllOf`` runs them all so that one run reports every
reason a publish is refused, not just the first.

Finding codes (stable): ``FINDING_CODES`` below, each with what it means; a test holds it equal
to the codes the checks declare and emit. The signature check that publish and promote add
(``add_signed_check``) reports the codes of ``signatures.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

from releasekit.checks import AllOf
from releasekit.docker_engine import ImageFacts
from releasekit.findings import Findings
from releasekit.publish.checks import all_checks
from releasekit.publish.checks.context import GateSubject, read_receipts
from releasekit.publish.evidence import Evidence
from releasekit.publish.signatures import CHECK_NAME, SignedVerdict
from releasekit.records.gate import (
    CellPolicy,
    CheckResult,
    GatePolicy,
    GateReport,
    HygienePolicy,
    SuitePolicy,
)

if TYPE_CHECKING:
    from releasekit.manifest.models import Manifest


# Every code the gate's checks may report, and what it means. The test and hygiene findings are
# warnings for suites/components marked ``required: false``.
FINDING_CODES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "LOCK_MANIFEST_MISMATCH": "the manifest given is not the one the lock was made from",
        "PLAN_CHECK_MISSING": "no readable plan-check.json",
        "PLAN_CHECK_WRONG_LOCK": "plan-check.json checked another lock (or names none)",
        "PLAN_CHECK_FAILED": "plan check reported errors",
        "VERIFICATION_MISSING": "no readable verification_summary.json",
        "VERIFICATION_WRONG_IMAGE": "the summary is about another image",
        "VERIFICATION_WRONG_LOCK": "the summary names another lock",
        "PROVENANCE_NOT_VERIFIED": "verificationResult is not PASSED, or it lists errors",
        "PROVENANCE_MISSING": "no readable provenance.intoto.json",
        "PROVENANCE_WRONG_IMAGE": "the provenance statement's subjects do not include the image",
        "SBOM_INVALID": "sbom.cdx.json is there but unreadable or not a CycloneDX SBOM",
        "SBOM_WRONG_IMAGE": "sbom.cdx.json describes another image (serial number, subject)",
        "SBOM_MISSING": "the verification summary names an SBOM and there is none",
        "SBOM_MISMATCH": "sbom.cdx.json is not the SBOM the verification summary names (sha256)",
        "RECEIPT_INVALID": "a receipt file that cannot be read as a receipt",
        "RECEIPT_WRONG_IMAGE": "a receipt bound to another image ID",
        "RECEIPT_WRONG_DIGEST": "publish --staged: a receipt that ran another digest than the staged one",
        "RECEIPT_WRONG_LOCK": "a receipt bound to another lock",
        "RECEIPT_MISSING": "a required cell without a receipt for this image and lock",
        "RECEIPT_FAILED": "a receipt for this image and lock that did not pass",
        "RECEIPT_STALE_CELL": "a receipt for an earlier definition of the cell (cell_sha256 differs)",
        "RECEIPT_UNKNOWN_CELL": "(warning) a receipt for a cell the matrix does not have",
        "FORBIDDEN_SWITCH": "the manifest forbids an env var or flag a receipt or the image uses",
        "CREDENTIAL_IN_RECEIPT": "a receipt recorded a token/password-like env var with a value",
        "HIDDEN_SWITCH": (
            "a receipt ran with an env var or flag that neither the image's own defaults"
            " nor the cell's definition records"
        ),
        "TEST_RECEIPT_INVALID": "a tests/*.json file that is not a test receipt",
        "TEST_RECEIPT_FOR_OTHER_IMAGE": "a test receipt bound to another image ID",
        "TEST_RECEIPT_WRONG_DIGEST": "publish --staged: a test receipt that ran another digest",
        "TEST_RECEIPT_FOR_OTHER_LOCK": "a test receipt bound to another lock (or to none)",
        "TEST_RECEIPT_UNKNOWN_SUITE": "(warning) a test receipt for a suite the manifest does not have",
        "TEST_RECEIPT_MISSING": "a required suite without a receipt for this image and lock",
        "TEST_SUITE_SKIPPED": "a required suite that did not run (e.g. the host had no GPU)",
        "TEST_SUITE_FAILED": (
            "a required suite with a regression, an unjudged failure, a timeout or an unmet count rule"
        ),
        "HYGIENE_MISSING": "no readable hygiene.json, or no entry for a component",
        "HYGIENE_INVALID": "hygiene.json is not a hygiene receipt",
        "HYGIENE_WRONG_LOCK": "hygiene.json checked another lock",
        "HYGIENE_FAILED": "a hygiene step found problems (file:line in the message)",
        "HYGIENE_INCOMPLETE": "a hygiene step was not runnable here or not run: never a pass",
    }
)


class PublishGate:
    """Runs every rule; passes only when none reports an error."""

    def __init__(self, rules: AllOf[GateSubject]) -> None:
        self.rules = rules

    def evaluate(self, subject: GateSubject) -> GateReport:
        results: list[CheckResult] = []
        everything = Findings()
        for check, found in self.rules.each(subject):
            for finding in found:
                if finding.location.image is None:
                    finding.location.image = subject.image.id
            results.append(CheckResult(name=check.name, passed=found.passed, findings=found))
            everything.extend(found)
        views, _ = read_receipts(subject)
        return GateReport(
            image_id=subject.image.id,
            lock_sha256=subject.lock_sha256,
            passed=everything.passed,
            checks=results,
            findings=everything,
            receipts=[
                v for v in views if v.image_id == subject.image.id and v.lock_sha256 == subject.lock_sha256
            ],
        )


def publish_gate() -> PublishGate:
    return PublishGate(AllOf(*all_checks(), name="publish gate"))


def evaluate_gate(
    image: ImageFacts,
    lock_sha256: str,
    evidence: Evidence,
    policy: GatePolicy,
    *,
    manifest_sha256: str | None = None,
    lock_manifest_sha256: str | None = None,
    image_digest: str | None = None,
) -> GateReport:
    """The gate over one image's evidence: what publish and promote both run."""
    subject = GateSubject(
        image=image,
        image_digest=image_digest,
        lock_sha256=lock_sha256,
        manifest_sha256=manifest_sha256,
        lock_manifest_sha256=lock_manifest_sha256,
        evidence=evidence,
        policy=policy,
    )
    return publish_gate().evaluate(subject)


def add_signed_check(report: GateReport, verdict: SignedVerdict) -> None:
    """The signature check joins the gate's checks, so a refusal reads like any other gate's."""
    report.checks.append(
        CheckResult(name=CHECK_NAME, passed=verdict.findings.passed, findings=verdict.findings)
    )
    report.findings.extend(verdict.findings)
    report.passed = report.passed and verdict.findings.passed


def policy_from_manifest(manifest: Manifest) -> GatePolicy:
    """The gate's view of ``Manifest.validation``: required cells, declared and forbidden switches."""
    from releasekit.records.receipt import cell_sha256

    validation = manifest.validation
    suites, hygiene = _test_policy(manifest)
    publish = manifest.publish
    return GatePolicy(
        cells=[
            CellPolicy(
                id=c.id,
                sha256=cell_sha256(c),
                required=c.required,
                engine=c.engine,
                # A quantisation scheme's arguments and env are declared in the manifest, like extra_args.
                env={**(scheme.env if scheme else {}), **c.env},
                args=list(c.engine_command or []) + list(scheme.args if scheme else []) + list(c.extra_args),
            )
            for c in validation.cells
            for scheme in [validation.scheme_of(c)]
        ],
        forbidden_env=list(validation.forbidden.env),
        forbidden_args=list(validation.forbidden.args),
        forbidden_reason=validation.forbidden.reason,
        signed=bool(getattr(publish, "signed", False)),
        reproduced_channels=sorted(publish.stable_channels())
        if publish is not None and publish.require_reproduced
        else [],
        suites=suites,
        hygiene=hygiene,
    )


def _test_policy(manifest: Manifest) -> tuple[list[SuitePolicy], list[HygienePolicy]]:
    """The gate's view of each git component's ``tests:`` and ``hygiene:`` (none: nothing required)."""
    suites: list[SuitePolicy] = []
    hygiene: list[HygienePolicy] = []
    for name, comp in manifest.git_components().items():
        for suite in comp.tests:
            suites.append(
                SuitePolicy(
                    component=name,
                    suite=suite.name,
                    required=suite.required,
                    gpus=suite.needs.gpus,
                    expect=list(suite.expect),
                )
            )
        if comp.hygiene is not None:
            hygiene.append(
                HygienePolicy(component=name, steps=list(comp.hygiene.steps), required=comp.hygiene.required)
            )
    return suites, hygiene


__all__ = [
    "FINDING_CODES",
    "CellPolicy",
    "CheckResult",
    "GatePolicy",
    "GateReport",
    "GateSubject",
    "PublishGate",
    "add_signed_check",
    "evaluate_gate",
    "policy_from_manifest",
    "publish_gate",
]
