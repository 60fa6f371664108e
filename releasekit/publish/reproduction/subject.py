"""What promote's reproduction checks judge: the locked manifest's ask, the receipt as read, and its signature."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from releasekit.bounded_read import TEXT_MAX_BYTES, read_bounded
from releasekit.errors import InputError
from releasekit.findings import Findings
from releasekit.records.base import RecordError, record_from_bytes
from releasekit.records.gate import CheckResult, GateReport
from releasekit.records.reproduce_receipt import REPRODUCE_RECEIPT_PAYLOAD_TYPE, ReproduceReceipt
from releasekit.signing.dsse import SignatureError
from releasekit.signing.keys import TrustedKeys, load_trusted_keys
from releasekit.signing.statements import envelope_path
from releasekit.signing.verify import verify_record_envelope

CHECK_NAME = "independent reproduction"
CODES = (
    "REPRODUCTION_REQUIRED",
    "REPRODUCTION_UNSIGNED",
    "REPRODUCTION_UNTRUSTED",
    "REPRODUCTION_WRONG_DIGEST",
    "REPRODUCTION_DIFFERED",
    "REPRODUCTION_SAME_RUNNER",
)


@dataclass(frozen=True)
class ReproductionPolicy:
    """What the locked manifest asks: whether, for which channels, and whose signatures count."""

    required: bool
    channels: frozenset[str]
    keys: tuple[Path, ...]
    release_keys: tuple[Path, ...] = ()  # the manifest's trusted_keys: never a reproducer key


@dataclass(frozen=True)
class ReproductionSubject:
    """What the checks judge: the receipt as read (or why not), its signature, and the digest promoted."""

    path: str | None  # --reproduced (None: not given)
    digest: str  # sha256:... being promoted
    image_id: str
    build_runner: str | None  # the attached provenance's internalParameters.runner
    receipt: ReproduceReceipt | None = None
    problem: str | None = None  # why there is no receipt to judge
    signed: bool = False  # an envelope lies beside it
    signer: str | None = None  # the reproducer key that verified
    signature_problem: str | None = None
    notes: list[str] = field(default_factory=list)


class HasReceipt:
    def applies(self, subject: ReproductionSubject) -> bool:
        return subject.receipt is not None


def reproduction_policy(manifest_path: Path | None, locked_sha256: str | None) -> ReproductionPolicy | None:
    """The locked manifest's ask (``--manifest``, held to the digest the lock records, read again here
    and held again); None: no manifest given."""
    if manifest_path is None:
        return None
    from releasekit.errors import LockManifestMismatch
    from releasekit.manifest import load_manifest, lock_manifest_mismatch

    loaded = load_manifest(manifest_path)
    why = lock_manifest_mismatch(loaded.sha256, locked_sha256)
    if why is not None:
        raise LockManifestMismatch(f"promote: LOCK_MANIFEST_MISMATCH: {why}")
    section = loaded.manifest.publish
    if section is None:
        return ReproductionPolicy(required=False, channels=frozenset(), keys=())
    return ReproductionPolicy(
        required=section.require_reproduced,
        channels=frozenset(section.stable_channels()),
        keys=tuple(loaded.directory / name for name in section.reproducer_keys),
        release_keys=tuple(loaded.trusted_key_files()),
    )


def reproducer_keys(policy: ReproductionPolicy, given_release_keys: list[Path]) -> TrustedKeys:
    """The reproducer keys; exit 2 when there are none or one is also a release key (a key of its own:
    the manifest's trusted_keys and every --trusted-key, compared by keyid)."""
    if not policy.keys:
        raise InputError("publish.require_reproduced: the manifest names no publish.reproducer_keys")
    keys = load_trusted_keys(list(policy.keys))
    release = load_trusted_keys([*policy.release_keys, *given_release_keys])
    shared = sorted(set(keys.keyids) & set(release.keyids))
    if shared:
        raise InputError(
            f"publish.reproducer_keys: key {shared[0][:16]} is also a release key (trusted_keys or "
            "--trusted-key); a reproduction must be signed by a key of its own"
        )
    return keys


def read_subject(given: Path | None, keys: TrustedKeys, base: ReproductionSubject) -> ReproductionSubject:
    """The receipt at ``given`` and its envelope, read once and verified against ``keys``."""
    if given is None:
        return _with(
            base, problem="promotion to this channel requires --reproduced FILE (a reproduce receipt)"
        )
    try:
        raw = read_bounded(given, ReproduceReceipt.max_bytes, within=given.parent)
        receipt = record_from_bytes(ReproduceReceipt, raw, str(given))
    except FileNotFoundError:
        return _with(base, problem=f"--reproduced {given}: no such file")
    except RecordError as exc:
        return _with(base, problem=f"--reproduced: {exc.one_line()}")
    sealed = envelope_path(given)
    if not os.path.lexists(sealed):
        return _with(base, receipt=receipt)
    try:
        envelope = read_bounded(sealed, TEXT_MAX_BYTES, within=given.parent)
        verified = verify_record_envelope(
            envelope,
            keys,
            where=str(sealed),
            payload_type=REPRODUCE_RECEIPT_PAYLOAD_TYPE,
            copy=raw,
            copy_name=given.name,
        )
    except SignatureError as exc:
        return _with(base, receipt=receipt, signed=True, signature_problem=f"{exc.code}: {exc.one_line()}")
    return _with(base, receipt=receipt, signed=True, signer=verified.keyid)


def _with(base: ReproductionSubject, **changes: object) -> ReproductionSubject:
    return replace(base, **changes)  # type: ignore[arg-type]


def add_reproduction_check(report: GateReport, findings: Findings) -> None:
    """The reproduction check joins the gate's checks, so a refusal reads like any other gate's."""
    report.checks.append(CheckResult(name=CHECK_NAME, passed=findings.passed, findings=findings))
    report.findings.extend(findings)
    report.passed = report.passed and findings.passed
