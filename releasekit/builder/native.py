"""Native (CUDA) builds: the arch list handed to build systems, and what the binaries contain.

The manifest writes arches as CUDA compute capabilities (``12.0a`` for SM120 with
arch-specific features). Build systems read them from different variables, so all
the usual ones are set. After the build, the ``.nv_fatbin`` ELF section of every
shared library in the wheel is read to confirm a cubin for each requested arch.

nvcc names its intermediate files ``tmpxft_<pid>_<n>-<k>_<source>.cudafe1.cpp`` in
``/tmp``, and the host compiler writes that name, PID included, into the object's
symbol table; a parallel build (ninja, ``MAX_JOBS``) gives every run other PIDs, so
two builds of one commit differ and verification by reproduction could never pass.
``--objdir-as-tempdir`` (nvcc 12.x+) puts those files beside the object under the
object's name instead: the same sources give the same bytes. It acts on every
``nvcc -c``/``-dc`` call (what CMake and PyTorch's extension builder make); a build
that compiles and links in one nvcc call keeps the PID and needs ``-c`` or a stripped
symbol table. releasekit adds the flag through ``NVCC_APPEND_FLAGS``, after any flags
the recipe sets there; it is recorded with the rest of the build environment.
"""

from __future__ import annotations

import io
from pathlib import Path

from releasekit.bounded_read import WHEEL_MAX_BYTES, open_zip
from releasekit.errors import BuildFailed
from releasekit.fatbin import FatbinReport, read_fatbin


def sm_name(arch: str) -> str:
    """``12.0a`` -> ``120a``."""
    major, _, rest = arch.partition(".")
    return major + rest


# Appended to every nvcc command line of a native build (see the module docstring).
REPRODUCIBLE_NVCC_FLAGS = "--objdir-as-tempdir"


def nvcc_append_flags(declared: str | None) -> str:
    """``NVCC_APPEND_FLAGS`` for a native build: the recipe's own flags, then releasekit's."""
    if not declared:
        return REPRODUCIBLE_NVCC_FLAGS
    if {REPRODUCIBLE_NVCC_FLAGS, "-objtemp"} & set(declared.split()):
        return declared
    return f"{declared} {REPRODUCIBLE_NVCC_FLAGS}"


def arch_environment(arches: list[str]) -> dict[str, str]:
    gencode = " ".join(f"-gencode arch=compute_{sm_name(a)},code=sm_{sm_name(a)}" for a in arches)
    return {
        "TORCH_CUDA_ARCH_LIST": ";".join(arches),
        "CUDAARCHS": ";".join(sm_name(a) for a in arches),
        "RELEASEKIT_CUDA_ARCH_LIST": ";".join(arches),
        "RELEASEKIT_NVCC_GENCODE": gencode,
    }


def fatbin_report(elf_bytes: bytes) -> FatbinReport | None:
    """The fat binaries of one ELF file (None: not ELF, or no ``.nv_fatbin`` section)."""
    return read_fatbin(io.BytesIO(elf_bytes))


def fatbin_arches(elf_bytes: bytes) -> set[str]:
    """``sm_NNN[a|f]`` for every cubin and ``compute_NNN[a|f]`` for every PTX in an ELF's fat binaries."""
    report = fatbin_report(elf_bytes)
    return report.targets() if report is not None else set()


def check_wheel_arches(component: str, wheel: Path, arches: list[str]) -> list[str]:
    """Every requested arch must have a cubin in the wheel's shared libraries; returns what was found."""
    found: set[str] = set()
    with open_zip(wheel, limit=WHEEL_MAX_BYTES) as zf:
        for name in zf.namelist():
            if name.endswith(".so") or ".so." in name:
                report = fatbin_report(zf.read(name))
                if report is None:
                    continue
                if report.malformed:
                    raise BuildFailed(
                        f"{component}: {wheel.name} has a malformed .nv_fatbin section in {name}"
                    )
                found |= report.targets()
    if not found:
        raise BuildFailed(f"{component}: native build produced no CUDA code in {wheel.name}")
    # A request for 12.0 is met by any sm_120 cubin; 12.0a only by sm_120a (its features are not in sm_120).
    missing = [
        a
        for a in arches
        if not any(
            t == f"sm_{sm_name(a)}" or (not a[-1].isalpha() and t.startswith(f"sm_{sm_name(a)}"))
            for t in found
        )
    ]
    if missing:
        raise BuildFailed(
            f"{component}: {wheel.name} has no cubin for {', '.join(missing)} (found {', '.join(sorted(found))})"
        )
    return sorted(found)
