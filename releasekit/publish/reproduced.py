"""Promote's last line: an independent reproduction, signed by a key of its own (``publish.require_reproduced``).

When the locked manifest says ``require_reproduced`` and promote moves a digest into the
manifest's stable channel, it reads the reproduce receipt given as ``--reproduced FILE``
(``releasekit reproduce --receipt``) and its envelope beside it (``sign --reproduce-receipt``)
and runs the checks below, composed with ``AllOf``. Each reports its own code; any finding
refuses the promotion (exit 1, nothing moved):

- ``REPRODUCTION_REQUIRED``: no receipt given, or the file is not a reproduce receipt;
- ``REPRODUCTION_UNSIGNED``: no envelope beside it;
- ``REPRODUCTION_UNTRUSTED``: the envelope is not by one of ``publish.reproducer_keys`` (the
  release key is never one), does not verify, or the receipt was edited after signing;
- ``REPRODUCTION_WRONG_DIGEST``: the receipt is about another digest or image;
- ``REPRODUCTION_DIFFERED``: the rebuild was not the published image, layer for layer;
- ``REPRODUCTION_SAME_RUNNER``: the reproducer is the runner the attached provenance says
  built the image, or the provenance names none.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from releasekit.bounded_read import TEXT_MAX_BYTES, read_bounded
from releasekit.checks import AllOf
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


class _HasReceipt:
    def applies(self, subject: ReproductionSubject) -> bool:
        return subject.receipt is not None


class ReceiptGiven:
    name = "reproduce receipt given"
    codes = ("REPRODUCTION_REQUIRED",)

    def run(self, subject: ReproductionSubject) -> Findings:
        out = Findings()
        if subject.receipt is None:
            out.add(
                "REPRODUCTION_REQUIRED", subject.problem or "no reproduce receipt", image=subject.image_id
            )
        return out


class ReceiptSigned(_HasReceipt):
    name = "reproduce receipt signed by a reproducer key"
    codes = ("REPRODUCTION_UNSIGNED", "REPRODUCTION_UNTRUSTED")

    def run(self, subject: ReproductionSubject) -> Findings:
        out = Findings()
        if not subject.signed:
            out.add(
                "REPRODUCTION_UNSIGNED",
                f"{subject.path}: no {Path(str(subject.path)).name.removesuffix('.json')}.dsse.json beside it "
                "(sign it: releasekit sign --reproduce-receipt FILE --key REPRODUCER_KEY)",
                image=subject.image_id,
            )
        elif subject.signer is None:
            out.add(
                "REPRODUCTION_UNTRUSTED", subject.signature_problem or "not verified", image=subject.image_id
            )
        return out


class ReceiptForThisDigest(_HasReceipt):
    name = "reproduce receipt names this digest"
    codes = ("REPRODUCTION_WRONG_DIGEST",)

    def run(self, subject: ReproductionSubject) -> Findings:
        out = Findings()
        receipt = subject.receipt
        assert receipt is not None
        if receipt.digest_only() != subject.digest or receipt.published_image_id != subject.image_id:
            out.add(
                "REPRODUCTION_WRONG_DIGEST",
                f"the receipt reproduced {receipt.digest} (image {receipt.published_image_id[:19]}), "
                f"not {subject.digest} (image {subject.image_id[:19]})",
                image=subject.image_id,
            )
        return out


class ReceiptReproduced(_HasReceipt):
    name = "reproduction was the published image"
    codes = ("REPRODUCTION_DIFFERED",)

    def run(self, subject: ReproductionSubject) -> Findings:
        out = Findings()
        receipt = subject.receipt
        assert receipt is not None
        same_image = receipt.rebuilt_image_id == receipt.published_image_id
        if not (receipt.reproduced and same_image and receipt.examined.layers > 0):
            out.add(
                "REPRODUCTION_DIFFERED",
                f"the reproduction rebuilt {receipt.rebuilt_image_id[:19] or 'nothing'}, not the published "
                f"image {receipt.published_image_id[:19]} layer for layer",
                image=subject.image_id,
            )
        return out


class ReproducerNotBuilder(_HasReceipt):
    name = "reproduced on a runner that did not build"
    codes = ("REPRODUCTION_SAME_RUNNER",)

    def run(self, subject: ReproductionSubject) -> Findings:
        out = Findings()
        receipt = subject.receipt
        assert receipt is not None
        builders = {r for r in (subject.build_runner, receipt.build.runner) if r}
        if not builders:
            out.add(
                "REPRODUCTION_SAME_RUNNER",
                "the build's provenance names no runner: nothing shows the reproduction ran elsewhere",
                image=subject.image_id,
            )
        elif receipt.reproducer in builders:
            out.add(
                "REPRODUCTION_SAME_RUNNER",
                f"reproduced on {receipt.reproducer!r}, the runner that built the image: not independent",
                image=subject.image_id,
            )
        return out


def reproduction_checks() -> AllOf[ReproductionSubject]:
    return AllOf(
        ReceiptGiven(),
        ReceiptSigned(),
        ReceiptForThisDigest(),
        ReceiptReproduced(),
        ReproducerNotBuilder(),
        name=CHECK_NAME,
    )


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
    from dataclasses import replace

    return replace(base, **changes)  # type: ignore[arg-type]


def add_reproduction_check(report: GateReport, findings: Findings) -> None:
    """The reproduction check joins the gate's checks, so a refusal reads like any other gate's."""
    report.checks.append(CheckResult(name=CHECK_NAME, passed=findings.passed, findings=findings))
    report.findings.extend(findings)
    report.passed = report.passed and findings.passed
