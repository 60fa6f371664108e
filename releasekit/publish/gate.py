"""The publish gate: small checks, each with a name and its own finding codes, composed.

Every check looks at the same ``GateSubject`` (the image, the lock's sha256, the evidence
files, the policy from the manifest) and returns findings; ``AllOf`` runs them all so
that one run reports every reason a publish is refused, not just the first.

Finding codes (stable):
  LOCK_MANIFEST_MISMATCH     the manifest given is not the one the lock was made from
  PLAN_CHECK_MISSING         no readable plan-check.json
  PLAN_CHECK_WRONG_LOCK      plan-check.json checked another lock (or names none)
  PLAN_CHECK_FAILED          plan check reported errors
  VERIFICATION_MISSING       no readable verification_summary.json
  VERIFICATION_WRONG_IMAGE   the summary is about another image
  VERIFICATION_WRONG_LOCK    the summary names another lock
  PROVENANCE_NOT_VERIFIED    verificationResult is not PASSED, or it lists errors
  PROVENANCE_MISSING         no readable provenance.intoto.json
  PROVENANCE_WRONG_IMAGE     the provenance statement's subjects do not include the image
  RECEIPT_INVALID            a receipt file that cannot be read as a receipt
  RECEIPT_WRONG_IMAGE        a receipt bound to another image ID
  RECEIPT_WRONG_LOCK         a receipt bound to another lock
  RECEIPT_MISSING            a required cell without a receipt for this image and lock
  RECEIPT_FAILED             a receipt for this image and lock that did not pass
  RECEIPT_STALE_CELL         a receipt for an earlier definition of the cell (cell_sha256 differs)
  RECEIPT_UNKNOWN_CELL       (warning) a receipt for a cell the matrix does not have
  FORBIDDEN_SWITCH           the manifest forbids an env var or flag a receipt or the image uses
  CREDENTIAL_IN_RECEIPT      a receipt recorded a token/password-like env var with a value
  HIDDEN_SWITCH              a receipt ran with an env var or flag that neither the image's
                             own defaults nor the cell's definition records
"""

from __future__ import annotations

import fnmatch
import re
from typing import Protocol

from pydantic import BaseModel, Field

from releasekit.findings import Findings, Severity
from releasekit.publish.engine import ImageFacts
from releasekit.publish.evidence import (
    PROVENANCE_FILE,
    Evidence,
    PlanCheckEvidence,
    ReceiptView,
    VerificationSummary,
)

# Flags through which the validation engine expresses a cell's own coordinates (model, TP,
# DCP/EP, speculative mode, quantisation, KV dtype) and where the server listens. A cell
# states these in the manifest, so passing them is the cell itself, not a hidden switch.
COORDINATE_FLAGS = frozenset(
    {
        "--model",
        "--served-model-name",
        "--tokenizer",
        "--revision",
        "--load-format",
        "--host",
        "--port",
        "--tensor-parallel-size",
        "-tp",
        "--pipeline-parallel-size",
        "-pp",
        "--decode-context-parallel-size",
        "-dcp",
        "--enable-expert-parallel",
        "--expert-parallel-size",
        "--speculative-config",
        "--quantization",
        "-q",
        "--kv-cache-dtype",
        "--max-model-len",
        # The interpreter flag of the default launcher (python3 -m vllm.entrypoints.cli.main).
        "-m",
    }
)

# Where a server runs and which GPUs it sees: placement, not behaviour.
PLACEMENT_ENV = frozenset(
    {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"}
)


_CREDENTIAL_NAME = re.compile(r"(TOKEN|PASSWORD|PASSWD|SECRET|API_KEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIAL)", re.I)


def _shown(key: str, value: str) -> str:
    """A value fit for a finding message: never one of a credential-like variable."""
    return "***" if _CREDENTIAL_NAME.search(key) else value


class CellPolicy(BaseModel):
    id: str
    sha256: str | None = None  # of the cell's canonical JSON: a receipt proves exactly this definition
    required: bool = True
    env: dict[str, str] = Field(default_factory=dict)
    args: list[str] = Field(default_factory=list)


class GatePolicy(BaseModel):
    """What the manifest asks of a release: its cells and the switches it forbids."""

    cells: list[CellPolicy] = Field(default_factory=list)
    forbidden_env: list[str] = Field(default_factory=list)
    forbidden_args: list[str] = Field(default_factory=list)
    forbidden_reason: str | None = None
    signed: bool = False  # publish.signed: the evidence must carry signatures by a trusted key

    def cell(self, cell_id: str) -> CellPolicy | None:
        return next((c for c in self.cells if c.id == cell_id), None)


class GateSubject(BaseModel):
    image: ImageFacts
    lock_sha256: str
    manifest_sha256: str | None = None
    lock_manifest_sha256: str | None = None
    evidence: Evidence
    policy: GatePolicy


class CheckResult(BaseModel):
    name: str
    passed: bool
    findings: Findings


class GateReport(BaseModel):
    image_id: str
    lock_sha256: str
    passed: bool
    checks: list[CheckResult]
    findings: Findings
    receipts: list[ReceiptView] = Field(default_factory=list)


class Check(Protocol):
    name: str

    def run(self, subject: GateSubject) -> Findings: ...


def _flag(token: str) -> str | None:
    if not token.startswith("-") or token in ("-", "--"):
        return None
    return token.split("=", 1)[0]


def flags_of(args: list[str]) -> set[str]:
    return {f for f in (_flag(a) for a in args) if f}


def read_receipts(subject: GateSubject) -> tuple[list[ReceiptView], list[tuple[str, str]]]:
    views: list[ReceiptView] = []
    invalid: list[tuple[str, str]] = []
    for loaded in subject.evidence.receipts:
        if not loaded.ok:
            invalid.append((loaded.path, loaded.problem or "unreadable"))
            continue
        try:
            view = ReceiptView.from_loaded(loaded)
        except (ValueError, TypeError) as exc:
            invalid.append((loaded.path, str(exc)))
            continue
        if not view.cell or not view.image_id or not view.lock_sha256:
            invalid.append((loaded.path, "a receipt must name its cell, image_id and lock_sha256"))
            continue
        views.append(view)
    return views, invalid


class ManifestMatchesLock:
    name = "manifest matches lock"

    def run(self, subject: GateSubject) -> Findings:
        out = Findings()
        if subject.manifest_sha256 and subject.lock_manifest_sha256 != subject.manifest_sha256:
            out.add(
                "LOCK_MANIFEST_MISMATCH",
                f"the manifest's sha256 is {subject.manifest_sha256[:12]}…, the lock was made from "
                f"{(subject.lock_manifest_sha256 or 'none')[:12]}…: lock again or pass the right manifest",
            )
        return out


class PlanCheckPassed:
    name = "plan check passed for this lock"

    def run(self, subject: GateSubject) -> Findings:
        out = Findings()
        loaded = subject.evidence.plan_check
        if not loaded.ok:
            out.add("PLAN_CHECK_MISSING", f"plan-check result: {loaded.problem}", path=loaded.path)
            return out
        try:
            result = PlanCheckEvidence.from_json(loaded.data)
        except ValueError as exc:
            out.add("PLAN_CHECK_MISSING", f"plan-check result unusable: {exc}", path=loaded.path)
            return out
        if result.lock_sha256 != subject.lock_sha256:
            out.add(
                "PLAN_CHECK_WRONG_LOCK",
                f"plan check ran on lock {(result.lock_sha256 or 'unnamed')[:12]}…, this lock is "
                f"{subject.lock_sha256[:12]}…",
                path=loaded.path,
            )
        if not result.passed:
            codes = ", ".join(sorted(set(result.error_codes))) or "passed: false"
            out.add("PLAN_CHECK_FAILED", f"plan check found errors: {codes}", path=loaded.path)
        return out


class ProvenanceVerified:
    name = "verify-provenance passed for this image"

    def run(self, subject: GateSubject) -> Findings:
        out = Findings()
        image_id = subject.image.id
        loaded = subject.evidence.verification_summary
        summary: VerificationSummary | None = None
        if not loaded.ok:
            out.add("VERIFICATION_MISSING", f"verification summary: {loaded.problem}", path=loaded.path)
        else:
            try:
                summary = VerificationSummary.from_json(loaded.data)
            except ValueError as exc:
                summary = None
                out.add("VERIFICATION_MISSING", f"verification summary unusable: {exc}", path=loaded.path)
            else:
                if not summary.names_image(image_id):
                    out.add(
                        "VERIFICATION_WRONG_IMAGE",
                        f"the summary verified {summary.resource_uri}, not {image_id}",
                        path=loaded.path,
                    )
                if summary.lock_sha256 and summary.lock_sha256 != subject.lock_sha256:
                    out.add(
                        "VERIFICATION_WRONG_LOCK",
                        f"the summary was made against lock {summary.lock_sha256[:12]}…",
                        path=loaded.path,
                    )
                if summary.result != "PASSED" or summary.error_codes:
                    detail = ", ".join(sorted(set(summary.error_codes)))
                    out.add(
                        "PROVENANCE_NOT_VERIFIED",
                        f"verificationResult {summary.result}" + (f" ({detail})" if detail else ""),
                        path=loaded.path,
                    )
        statement = subject.evidence.provenance
        verified_sha = summary.input_attestations.get(PROVENANCE_FILE) if loaded.ok and summary else None
        if statement.ok and verified_sha and verified_sha != statement.sha256:
            out.add(
                "PROVENANCE_NOT_VERIFIED",
                "provenance.intoto.json is not the file verify-provenance verified (its sha256 differs)",
                path=statement.path,
            )
        if not statement.ok:
            out.add("PROVENANCE_MISSING", f"provenance statement: {statement.problem}", path=statement.path)
        elif isinstance(statement.data, dict):
            subjects = statement.data.get("subject") or []
            digests = {str((s or {}).get("digest", {}).get("sha256")) for s in subjects if isinstance(s, dict)}
            if subjects and image_id.removeprefix("sha256:") not in digests:
                out.add(
                    "PROVENANCE_WRONG_IMAGE",
                    f"the provenance statement's subjects do not include {image_id}",
                    path=statement.path,
                )
        else:
            out.add("PROVENANCE_MISSING", "provenance statement is not a JSON object", path=statement.path)
        return out


class ReceiptsComplete:
    name = "every required cell has a passing receipt for this image and lock"

    def run(self, subject: GateSubject) -> Findings:
        out = Findings()
        views, invalid = read_receipts(subject)
        for path, problem in invalid:
            out.add("RECEIPT_INVALID", problem, path=path)
        bound: dict[str, list[ReceiptView]] = {}
        for view in views:
            if view.image_id != subject.image.id:
                out.add(
                    "RECEIPT_WRONG_IMAGE",
                    f"receipt is for image {view.image_id}, publishing {subject.image.id}",
                    cell=view.cell,
                    path=view.path,
                )
                continue
            if view.lock_sha256 != subject.lock_sha256:
                out.add(
                    "RECEIPT_WRONG_LOCK",
                    f"receipt is for lock {view.lock_sha256[:12] if view.lock_sha256 else '?'}…, "
                    f"this lock is {subject.lock_sha256[:12]}…",
                    cell=view.cell,
                    path=view.path,
                )
                continue
            assert view.cell is not None
            cell_policy = subject.policy.cell(view.cell)
            if cell_policy and cell_policy.sha256 and view.cell_sha256 and view.cell_sha256 != cell_policy.sha256:
                out.add(
                    "RECEIPT_STALE_CELL",
                    "the receipt validated an older definition of this cell; validate it again",
                    cell=view.cell,
                    path=view.path,
                )
                continue
            bound.setdefault(view.cell, []).append(view)
            if cell_policy is None:
                out.add(
                    "RECEIPT_UNKNOWN_CELL",
                    "the manifest's validation matrix has no such cell",
                    severity=Severity.warning,
                    cell=view.cell,
                    path=view.path,
                )
        for cell in subject.policy.cells:
            if not cell.required:
                continue
            receipts = bound.get(cell.id, [])
            if not receipts:
                out.add("RECEIPT_MISSING", "no receipt for this image and lock", cell=cell.id)
            # A failed run next to a passing one is a flaky cell: it is reported, not averaged away.
            for view in receipts:
                if not view.passed:
                    out.add("RECEIPT_FAILED", "the cell's validation did not pass", cell=cell.id, path=view.path)
        return out


def _env_forbidden(pattern: str, key: str, value: str) -> bool:
    name, sep, wanted = pattern.partition("=")
    if not fnmatch.fnmatchcase(key, name):
        return False
    return not sep or value == wanted


class NoForbiddenSwitches:
    name = "no switch the manifest forbids"

    def run(self, subject: GateSubject) -> Findings:
        out = Findings()
        policy = subject.policy
        reason = f" ({policy.forbidden_reason})" if policy.forbidden_reason else ""
        sources: list[tuple[str | None, str | None, dict[str, str], list[str]]] = [
            (None, "image defaults", subject.image.env, subject.image.entrypoint + subject.image.cmd)
        ]
        views, _ = read_receipts(subject)
        sources += [(v.cell, v.path, v.env, v.args) for v in views if v.image_id == subject.image.id]
        for cell, where, env, args in sources:
            for key, value in sorted(env.items()):
                for pattern in policy.forbidden_env:
                    if _env_forbidden(pattern, key, value):
                        out.add("FORBIDDEN_SWITCH", f"env {key}={_shown(key, value)} is forbidden{reason}", cell=cell, path=where)
            used = flags_of(args)
            for flag in policy.forbidden_args:
                if flag in used:
                    out.add("FORBIDDEN_SWITCH", f"flag {flag} is forbidden{reason}", cell=cell, path=where)
        return out


class NoHiddenSwitches:
    name = "no runtime switch outside the image's defaults and the cell's definition"

    def run(self, subject: GateSubject) -> Findings:
        out = Findings()
        image = subject.image
        default_flags = flags_of(image.entrypoint + image.cmd)
        views, _ = read_receipts(subject)
        for view in views:
            if view.image_id != subject.image.id:
                continue
            cell = subject.policy.cell(view.cell or "") or CellPolicy(id=view.cell or "?")
            for key, value in sorted(view.env.items()):
                if key in PLACEMENT_ENV:
                    continue
                if image.env.get(key) == value or cell.env.get(key) == value:
                    continue
                what = "overrides the image default" if key in image.env else "is not in the image's defaults"
                out.add(
                    "HIDDEN_SWITCH",
                    f"env {key}={_shown(key, value)} {what} and the cell does not declare it",
                    cell=view.cell,
                    path=view.path,
                )
            allowed = default_flags | flags_of(cell.args) | COORDINATE_FLAGS
            for flag in sorted(flags_of(view.args) - allowed):
                out.add(
                    "HIDDEN_SWITCH",
                    f"flag {flag} is neither an image default nor in the cell's extra_args",
                    cell=view.cell,
                    path=view.path,
                )
        return out


class NoCredentialsInEvidence:
    """Receipts are attached to the published digest for anyone who can pull it to read."""

    name = "no credential recorded in the receipts"

    def run(self, subject: GateSubject) -> Findings:
        out = Findings()
        views, _ = read_receipts(subject)
        for view in views:
            for key, value in sorted(view.env.items()):
                if value and _CREDENTIAL_NAME.search(key):
                    out.add(
                        "CREDENTIAL_IN_RECEIPT",
                        f"env {key} holds a value; a receipt must not record credentials (it would be published)",
                        cell=view.cell,
                        path=view.path,
                    )
        return out


class AllOf:
    """Runs every check; passes only when none reports an error."""

    def __init__(self, *checks: Check) -> None:
        self.checks = checks

    def evaluate(self, subject: GateSubject) -> GateReport:
        results: list[CheckResult] = []
        everything = Findings()
        for check in self.checks:
            found = check.run(subject)
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
            receipts=[v for v in views if v.image_id == subject.image.id and v.lock_sha256 == subject.lock_sha256],
        )


def publish_gate() -> AllOf:
    return AllOf(
        ManifestMatchesLock(),
        PlanCheckPassed(),
        ProvenanceVerified(),
        ReceiptsComplete(),
        NoForbiddenSwitches(),
        NoHiddenSwitches(),
        NoCredentialsInEvidence(),
    )


def policy_from_manifest(manifest: object) -> GatePolicy:
    """The gate's view of ``Manifest.validation``: required cells, declared and forbidden switches."""
    from releasekit.validate.receipt import cell_sha256

    validation = manifest.validation  # type: ignore[attr-defined]
    return GatePolicy(
        cells=[
            CellPolicy(
                id=c.id,
                sha256=cell_sha256(c),
                required=c.required,
                env=dict(c.env),
                args=list(c.engine_command or []) + list(c.extra_args),
            )
            for c in validation.cells
        ],
        forbidden_env=list(validation.forbidden.env),
        forbidden_args=list(validation.forbidden.args),
        forbidden_reason=validation.forbidden.reason,
        signed=bool(getattr(getattr(manifest, "publish", None), "signed", False)),
    )
