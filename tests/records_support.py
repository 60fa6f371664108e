"""Records made in a test where only part of them matters: what the release-notes tests share."""

from __future__ import annotations

from typing import Any

from releasekit.records.build import BaseImageRecord, BuildRecord, CacheReport, ImageRecord

NO_TOOLCHAIN = {"cuda": "12.8", "nccl": None, "pytorch": None, "cuda_arch_list": ["12.0a"]}


def notes_build_record(
    name: str, *, manifest_sha256: str = "b" * 64, toolchain: dict[str, Any] | None = None
) -> BuildRecord:
    """A build record with no components: what RELEASE.md needs besides the merge plan."""
    return BuildRecord(
        name=name,
        lock_sha256="a" * 64,
        manifest_sha256=manifest_sha256,
        image_id="sha256:" + "c" * 64,
        toolchain=NO_TOOLCHAIN if toolchain is None else toolchain,
        base_image=BaseImageRecord(name="scratch", image_id="sha256:" + "d" * 64),
        image=ImageRecord(
            created="2026-01-01T00:00:00Z",
            source_date_epoch=1,
            wheels_layer_digest="sha256:" + "e" * 64,
            wheels_layer_size=1,
            base_layers_size=0,
        ),
        components=[],
        labels={},
        cache=CacheReport(),
        smoke={},
        outputs={},
    )
