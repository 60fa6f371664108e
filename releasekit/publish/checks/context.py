"""What the gate rules read: the image, the lock's sha256, the evidence files and the policy
from the manifest (``GateSubject``), and the helpers several rules share."""

from __future__ import annotations

import re

from pydantic import BaseModel

from releasekit.docker_engine import ImageFacts
from releasekit.publish.evidence import Evidence
from releasekit.records.gate import CellPolicy, GatePolicy, HygienePolicy, ReceiptView, SuitePolicy

__all__ = [
    "CellPolicy",
    "GatePolicy",
    "GateSubject",
    "HygienePolicy",
    "ReceiptView",
    "SuitePolicy",
    "flags_of",
    "read_receipts",
    "shown",
]

# Where a server runs and which GPUs it sees: placement, not behaviour.
PLACEMENT_ENV = frozenset(
    {
        "CUDA_VISIBLE_DEVICES",
        "NVIDIA_VISIBLE_DEVICES",
        "HF_HOME",
        "HF_HUB_CACHE",
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
    }
)

CREDENTIAL_NAME = re.compile(
    r"(TOKEN|PASSWORD|PASSWD|SECRET|API_KEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIAL)", re.I
)


def shown(key: str, value: str) -> str:
    """A value fit for a finding message: never one of a credential-like variable."""
    return "***" if CREDENTIAL_NAME.search(key) else value


class GateSubject(BaseModel):
    image: ImageFacts
    image_digest: str | None = None  # publish --staged: receipts must name this registry digest
    lock_sha256: str
    manifest_sha256: str | None = None
    lock_manifest_sha256: str | None = None
    evidence: Evidence
    policy: GatePolicy


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
        view = loaded.record
        if view is None:
            invalid.append((loaded.path, loaded.invalid or "not a receipt"))
            continue
        if not view.cell or not view.image_id or not view.lock_sha256:
            invalid.append((loaded.path, "a receipt must name its cell, image_id and lock_sha256"))
            continue
        views.append(view)
    return views, invalid
