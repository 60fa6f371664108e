"""What the gate rules read: the image, the lock's sha256, the evidence files and the policy
from the manifest (``GateSubject``), and the helpers several rules share."""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from releasekit.docker_engine import ImageFacts
from releasekit.publish.evidence import Evidence, ReceiptView

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


class CellPolicy(BaseModel):
    id: str
    sha256: str | None = None  # of the cell's canonical JSON: a receipt proves exactly this definition
    required: bool = True
    # The engine whose adapter says which flags only place the server (the manifest's default engine).
    engine: str = "vllm"
    env: dict[str, str] = Field(default_factory=dict)
    args: list[str] = Field(default_factory=list)


class SuitePolicy(BaseModel):
    """A component's test suite (manifest ``tests:``): required suites need a passed receipt."""

    component: str
    suite: str
    required: bool = True
    gpus: int = 0  # what the suite needs: said in a refusal, so the reader knows where to run it
    expect: list[str] = Field(default_factory=list)  # the plan's stated counts ("passed >= 366")

    @property
    def key(self) -> str:
        return f"{self.component}/{self.suite}"


class HygienePolicy(BaseModel):
    """A component's hygiene (manifest ``hygiene:``): required components need every step passed."""

    component: str
    steps: list[str] = Field(default_factory=list)
    required: bool = True


class GatePolicy(BaseModel):
    """What the manifest asks of a release: its cells, suites, hygiene and the switches it forbids."""

    cells: list[CellPolicy] = Field(default_factory=list)
    suites: list[SuitePolicy] = Field(default_factory=list)
    hygiene: list[HygienePolicy] = Field(default_factory=list)
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
