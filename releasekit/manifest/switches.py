"""Runtime switches: environment settings that change the serving engine's behaviour (issue 44).

Which names count (``is_switch``), and which a manifest declares (``declared``). ``plan check``
names the switches a component's recipes set at the checked commit (``plan/content/switches.py``),
verify-provenance those of the release image's own config (``provenance/checks/switches.py``);
both judge them here, against ``policy.runtime_switches``.
"""

from __future__ import annotations

from typing import Any

# The engine's own, its collectives', its framework's, its compilers' and its kernels' variables.
SWITCH_PREFIXES = (
    "VLLM_",
    "SGLANG_",
    "TOKENSPEED_",
    "NCCL_",
    "NVSHMEM_",
    "TORCH_",
    "TORCHINDUCTOR_",
    "PYTORCH_",
    "CUDA_",
    "CUBLAS_",
    "CUBLASLT_",
    "CUDNN_",
    "TRITON_",
    "FLASHINFER_",
)
SWITCH_NAMES = frozenset({"OMP_NUM_THREADS"})
# Set by the CUDA base images to say which toolkit they hold; nothing reads them to change behaviour.
NOT_SWITCHES = frozenset({"CUDA_PKG_VERSION"})


# Where a source comes from and what it is called (``FLASHINFER_COMMIT``, ``VLLM_BUILD_VERSION``): a build
# input's identity, which the content rules and the lock judge, not a behaviour of the engine.
IDENTITY_SUFFIXES = ("_REPO", "_REPOSITORY", "_URL", "_COMMIT", "_BRANCH", "_REF", "_SHA", "_VERSION")


def is_switch(name: str) -> bool:
    if name in NOT_SWITCHES or name.endswith(IDENTITY_SUFFIXES):
        return False
    return name in SWITCH_NAMES or name.startswith(SWITCH_PREFIXES)


def declared(policy: Any, name: str, value: str) -> Any | None:
    """The ``policy.runtime_switches`` entry declaring ``name`` (with ``value``, when it names one), or None."""
    for entry in getattr(policy, "runtime_switches", None) or []:
        if entry.name == name and (entry.value is None or entry.value == value):
            return entry
    return None


def declared_other_value(policy: Any, name: str) -> str | None:
    """The value ``policy.runtime_switches`` declares for ``name``, when it declares one."""
    for entry in getattr(policy, "runtime_switches", None) or []:
        if entry.name == name and entry.value is not None:
            return entry.value
    return None


__all__ = ["SWITCH_PREFIXES", "declared", "declared_other_value", "is_switch"]
