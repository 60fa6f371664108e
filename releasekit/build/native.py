"""Native (CUDA) builds: the arch list handed to build systems, and what the binaries contain.

The manifest writes arches as CUDA compute capabilities (``12.0a`` for SM120 with
arch-specific features). Build systems read them from different variables, so all
the usual ones are set. After the build, the ``.nv_fatbin`` ELF section of every
shared library in the wheel is read to confirm a cubin for each requested arch.
"""

from __future__ import annotations

import io
import struct
import zipfile
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from releasekit.errors import BuildFailed

FATBIN_MAGIC = 0xBA55ED50
KIND_PTX, KIND_CUBIN = 1, 2
# Entry flags (u32 at offset 40 of an entry header), as nvcc 13 writes them.
FLAG_ARCH_SPECIFIC, FLAG_FAMILY = 0x00100000, 0x00200000


def sm_name(arch: str) -> str:
    """``12.0a`` -> ``120a``."""
    major, _, rest = arch.partition(".")
    return major + rest


def arch_environment(arches: list[str]) -> dict[str, str]:
    gencode = " ".join(f"-gencode arch=compute_{sm_name(a)},code=sm_{sm_name(a)}" for a in arches)
    return {
        "TORCH_CUDA_ARCH_LIST": ";".join(arches),
        "CUDAARCHS": ";".join(sm_name(a) for a in arches),
        "RELEASEKIT_CUDA_ARCH_LIST": ";".join(arches),
        "RELEASEKIT_NVCC_GENCODE": gencode,
    }


def fatbin_arches(elf_bytes: bytes) -> set[str]:
    """``sm_NNN[a|f]`` for every cubin and ``compute_NNN[a|f]`` for every PTX in an ELF's fat binaries."""
    try:
        elf = ELFFile(io.BytesIO(elf_bytes))
    except ELFError:
        return set()
    section = elf.get_section_by_name(".nv_fatbin")
    if section is None:
        return set()
    data = section.data()
    found: set[str] = set()
    offset = 0
    while offset + 16 <= len(data):
        magic, _version, header_size, fat_size = struct.unpack_from("<IHHQ", data, offset)
        if magic != FATBIN_MAGIC:
            # Fat binaries are 8-byte aligned back to back; skip padding.
            offset += 8
            continue
        entry = offset + header_size
        end = entry + fat_size
        while entry + 48 <= end:
            kind, _ev, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
            (arch,) = struct.unpack_from("<I", data, entry + 28)
            (flags,) = struct.unpack_from("<I", data, entry + 40)
            variant = "a" if flags & FLAG_ARCH_SPECIFIC else "f" if flags & FLAG_FAMILY else ""
            if kind == KIND_CUBIN:
                found.add(f"sm_{arch}{variant}")
            elif kind == KIND_PTX:
                found.add(f"compute_{arch}{variant}")
            if entry_header < 48:
                break
            entry += entry_header + payload
        offset = end
    return found


def check_wheel_arches(component: str, wheel: Path, arches: list[str]) -> list[str]:
    """Every requested arch must have a cubin in the wheel's shared libraries; returns what was found."""
    found: set[str] = set()
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if name.endswith(".so") or ".so." in name:
                found |= fatbin_arches(zf.read(name))
    if not found:
        raise BuildFailed(f"{component}: native build produced no CUDA code in {wheel.name}")
    # A request for 12.0 is met by any sm_120 cubin; 12.0a only by sm_120a (its features are not in sm_120).
    missing = [
        a for a in arches
        if not any(t == f"sm_{sm_name(a)}" or (not a[-1].isalpha() and t.startswith(f"sm_{sm_name(a)}")) for t in found)
    ]
    if missing:
        raise BuildFailed(
            f"{component}: {wheel.name} has no cubin for {', '.join(missing)} (found {', '.join(sorted(found))})"
        )
    return sorted(found)
