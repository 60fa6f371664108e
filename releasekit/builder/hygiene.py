"""Build-time environment hygiene: what the builder's environment may inherit, and what the provenance may show.

A wheel build never inherits the host environment (``wheel.build_environment`` starts
from nothing), so a host variable that would change the output is silently dropped
unless it is refused: someone who exports ``NVCC_APPEND_FLAGS`` expects it to act. A
variable in ``OUTPUT_CHANGING`` that is set on the host and not declared by the
component's recipe (``build.env`` gives the value, ``build.pass_env`` passes the
host's) is refused before anything is built.

The environment recorded in the provenance has secrets removed: a variable whose
name looks like a credential is redacted, and credentials inside URLs are stripped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# Variables that change what compilers, CMake, PyTorch's extension builder, vLLM's
# setup.py or setuptools-scm produce. Documented in docs/build.md.
OUTPUT_CHANGING: tuple[str, ...] = (
    "CFLAGS",
    "CXXFLAGS",
    "CPPFLAGS",
    "LDFLAGS",
    "CC",
    "CXX",
    "CUDAHOSTCXX",
    "NVCC_APPEND_FLAGS",
    "NVCC_PREPEND_FLAGS",
    "NVCC_CCBIN",
    "CUDA_NVCC_FLAGS",
    "TORCH_CUDA_ARCH_LIST",
    "CUDAARCHS",
    "CMAKE_ARGS",
    "CMAKE_BUILD_TYPE",
    "CMAKE_GENERATOR",
    "MAX_JOBS",
    "NVCC_THREADS",
    "VLLM_TARGET_DEVICE",
    "VLLM_MAIN_CUDA_VERSION",
    "SETUPTOOLS_SCM_PRETEND_VERSION",
    "PIP_CONSTRAINT",
    "PIP_EXTRA_INDEX_URL",
)
# Prefixes of families of such variables (SETUPTOOLS_SCM_PRETEND_VERSION_FOR_<DIST>, ...).
OUTPUT_CHANGING_PREFIXES: tuple[str, ...] = (
    "SETUPTOOLS_SCM_PRETEND_VERSION_FOR_",
    "SETUPTOOLS_SCM_OVERRIDES",
)

SECRET_NAME = re.compile(
    r"(?i)(token|secret|passw|credential|auth|cookie|private|(^|_)key($|_)|apikey|api_key|session)"
)
REDACTED = "<redacted>"
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s]+@")


def output_changing(name: str) -> bool:
    return name in OUTPUT_CHANGING or name.startswith(OUTPUT_CHANGING_PREFIXES)


def is_secret(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def redact(env: Mapping[str, str]) -> dict[str, str]:
    """The environment as the provenance records it: secrets redacted, URL credentials stripped."""
    out: dict[str, str] = {}
    for name in sorted(env):
        value = env[name]
        out[name] = REDACTED if is_secret(name) else _URL_USERINFO.sub(r"\1", value)
    return out
