"""Read the CUDA fat binary (``.nv_fatbin``) of an ELF shared library: which GPU arches it carries.

Stage-neutral: the build checks its wheels with it, verify-provenance the image's libraries.
No cuobjdump needed. The section holds one or more fatbin containers; each is a 16-byte
header (magic 0xBA55ED50, version u16, header size u16, payload size u64) followed by
entries. Each entry header starts with kind u16 (1 = PTX, 2 = cubin / machine code),
version u16, header size u32, padded payload size u64; the SM number is the u32 at
offset 28 and the u32 at offset 40 carries flags: 0x00100000 marks an arch-specific
``a`` target (sm_120a), 0x00200000 a family ``f`` target (sm_120f), 0x8000 a compressed
payload. The layout was checked against nvcc 13 output for sm_90a, sm_120, sm_120a and
sm_120f (tests/test_verify_fatbin.py compiles those for real).
"""

from __future__ import annotations

import struct
from typing import BinaryIO

from pydantic import BaseModel, Field

FATBIN_MAGIC = 0xBA55ED50
KIND_PTX = 1
KIND_CUBIN = 2
FLAG_ARCH_SPECIFIC = 0x00100000
FLAG_FAMILY = 0x00200000
FLAG_COMPRESSED = 0x00008000
_MAX_SECTION = 4 * 1024**3


class FatbinEntry(BaseModel):
    kind: str  # "cubin" | "ptx"
    sm: int  # e.g. 120
    variant: str = ""  # "" | "a" | "f"
    compressed: bool = False

    @property
    def target(self) -> str:
        return f"{'sm' if self.kind == 'cubin' else 'compute'}_{self.sm}{self.variant}"


class FatbinReport(BaseModel):
    entries: list[FatbinEntry] = Field(default_factory=list)
    malformed: bool = False

    def targets(self) -> set[str]:
        """``sm_NNN[a|f]`` for every cubin and ``compute_NNN[a|f]`` for every PTX."""
        return {e.target for e in self.entries}

    def cubin_targets(self) -> list[str]:
        return sorted({e.target for e in self.entries if e.kind == "cubin"})

    def ptx_targets(self) -> list[str]:
        return sorted({e.target for e in self.entries if e.kind == "ptx"})

    def has_machine_code_for(self, arch: str) -> bool:
        """``arch`` as the manifest writes it: "12.0a", "9.0", "12.0f"."""
        sm, variant = arch_to_sm(arch)
        for entry in self.entries:
            if entry.kind != "cubin" or entry.sm != sm:
                continue
            # An sm_120a cubin runs on every CC 12.0 device; so does sm_120f. A plain request
            # is met by any of them; "a" only by "a"; "f" by "f" or the narrower "a".
            if variant == "" or entry.variant == variant or (variant == "f" and entry.variant == "a"):
                return True
        return False


def arch_to_sm(arch: str) -> tuple[int, str]:
    text = arch.strip().lower().removeprefix("sm_").removeprefix("compute_")
    variant = ""
    if text and text[-1] in "af":
        text, variant = text[:-1], text[-1]
    if "." in text:
        major, minor = text.split(".", 1)
        return int(major) * 10 + int(minor), variant
    return int(text), variant


def parse_fatbin_section(data: bytes) -> FatbinReport:
    report = FatbinReport()
    pos = 0
    while pos + 16 <= len(data):
        magic, _version, header_size, fat_size = struct.unpack_from("<IHHQ", data, pos)
        if magic != FATBIN_MAGIC:
            # Containers are 8-byte aligned; anything else between them is padding.
            pos += 8
            continue
        off = pos + header_size
        end = min(off + fat_size, len(data))
        while off + 48 <= end:
            kind, _ev, entry_header, payload = struct.unpack_from("<HHIQ", data, off)
            if entry_header < 48 or entry_header > 4096:
                report.malformed = True
                break
            sm = struct.unpack_from("<I", data, off + 28)[0]
            flags = struct.unpack_from("<I", data, off + 40)[0]
            if kind in (KIND_PTX, KIND_CUBIN):
                variant = "a" if flags & FLAG_ARCH_SPECIFIC else "f" if flags & FLAG_FAMILY else ""
                report.entries.append(
                    FatbinEntry(
                        kind="ptx" if kind == KIND_PTX else "cubin",
                        sm=sm,
                        variant=variant,
                        compressed=bool(flags & FLAG_COMPRESSED),
                    )
                )
            off += entry_header + payload
        pos = max(end, pos + 16)
    return report


def read_fatbin(handle: BinaryIO) -> FatbinReport | None:
    """The fatbin of an ELF file, or None when it is not ELF or has no ``.nv_fatbin`` section."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    handle.seek(0)
    if handle.read(4) != b"\x7fELF":
        return None
    handle.seek(0)
    try:
        elf = ELFFile(handle)
        section = elf.get_section_by_name(".nv_fatbin")
        if section is None:
            return None
        if section["sh_size"] > _MAX_SECTION:
            return FatbinReport(malformed=True)
        return parse_fatbin_section(section.data())
    except (ELFError, struct.error, ValueError, OSError):
        return FatbinReport(malformed=True)
