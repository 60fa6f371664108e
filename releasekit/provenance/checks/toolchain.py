"""Torch, CUDA, NCCL and cuDNN as the image's torch reports them, against the locked toolchain."""

from __future__ import annotations

from releasekit.checks import Examined
from releasekit.findings import Findings, Severity
from releasekit.provenance.context import NeedsImageFiles, VerifyContext


def version_agrees(have: str | None, want: str) -> bool:
    """ "12.8" agrees with "12.8" and "12.8.1"; "2.13.0+cu128" with "2.13.0"."""
    if have is None:
        return False
    have_parts = have.split("+", 1)[0].split(".")
    want_parts = want.split("+", 1)[0].split(".")
    n = min(len(have_parts), len(want_parts))
    return n > 0 and have_parts[:n] == want_parts[:n] and ("+" not in want or have == want)


def _wanted(ctx: VerifyContext) -> dict[str, str]:
    """The versions to compare: what the lock (and the manifest, for cuDNN) pins, null ones left out."""
    tc = ctx.lock.toolchain
    manifest_tc = getattr(ctx.manifest, "toolchain", None)
    candidates: dict[str, str | None] = {
        "torch": tc.pytorch,
        "cuda": tc.cuda,
        "nccl": tc.nccl,
        "cudnn": getattr(manifest_tc, "cudnn", None),
    }
    return {k: str(v) for k, v in candidates.items() if v}


class ToolchainCheck(NeedsImageFiles):
    name = "toolchain"
    codes = ("TOOLCHAIN_MISMATCH", "TOOLCHAIN_UNCHECKED")

    def examines(self, ctx: VerifyContext) -> Examined:
        """Each toolchain value the lock (or the manifest, for cuDNN) pins, when torch can report it."""
        wanted = _wanted(ctx)
        if not wanted:
            return Examined.of(
                "values",
                (),
                absent="the lock pins no PyTorch, CUDA or NCCL version and the manifest no cuDNN",
            )
        info = (ctx.probe.report or {}).get("toolchain") or {}
        if not info.get("torch_present"):
            return Examined.of(
                "values",
                (),
                absent=f"torch is not importable in the image, so {', '.join(sorted(wanted))} cannot be read",
            )
        return Examined.of("values", (f"{k}={v}" for k, v in wanted.items()))

    def run(self, ctx: VerifyContext) -> Findings:
        found = Findings()
        wanted = _wanted(ctx)
        if not wanted:
            return found
        info = (ctx.probe.report or {}).get("toolchain") or {}
        if not info.get("torch_present"):
            found.add(
                "TOOLCHAIN_UNCHECKED",
                "torch is not importable in the image: toolchain versions not checked",
                severity=Severity.info,
            )
            return found
        for key, want in wanted.items():
            raw = info.get(key)
            have = None if raw is None else str(raw)
            if key == "cudnn" and have and have.isdigit() and "." in want:
                # torch reports cuDNN as one integer, e.g. 90800 for 9.8.0
                n = int(have)
                have = f"{n // 10000}.{n // 100 % 100}.{n % 100}"
            if not version_agrees(have, want):
                found.add(
                    "TOOLCHAIN_MISMATCH",
                    f"the image's torch reports {key} {have}; the lock says {want}",
                    field=key,
                )
        return found
