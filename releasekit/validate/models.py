"""Models as pinned inputs: where a cell's weights come from, and the check before any server starts.

A model directory is found from the manifest (``path``, or the hub cache's snapshot of
``hub`` at ``revision``), its pinned files (``sha256``) are hashed, and a directory whose
files are missing or differ is refused before the server starts. The receipt records the
source, the revision and every hash measured (the pinned files plus the small files that
say what a model is: its config, tokenizer files and weight index).
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, Field

from releasekit.digests import file_sha256
from releasekit.findings import Findings, Severity
from releasekit.manifest.validation import IDENTITY_FILES, TO_BE_LOCKED, ModelRef
from releasekit.records.receipt import ModelRecord

MODEL_MOUNT = "/models"
_CHUNK = 1 << 20


class ResolvedModel(BaseModel):
    engine_arg: str = Field(
        description="what the engine is told to load (a path inside the container, or a hub id)"
    )
    directory: str | None = Field(
        default=None, description="the model directory on this host, if there is one"
    )
    mounts: dict[str, str] = Field(
        default_factory=dict, description="host path -> container path (read-only)"
    )


def hub_cache() -> Path:
    """The Hugging Face hub cache of this host (HF_HUB_CACHE, HF_HOME/hub, ~/.cache/huggingface/hub)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]) / "hub"
    return Path.home() / ".cache" / "huggingface" / "hub"


def resolve_model(model: ModelRef, manifest_dir: Path) -> ResolvedModel:
    if model.path:
        local = Path(model.path) if Path(model.path).is_absolute() else (manifest_dir / model.path)
        local = local.resolve()
        if local.is_dir():
            inside = f"{MODEL_MOUNT}/{local.name}"
            return ResolvedModel(engine_arg=inside, directory=str(local), mounts={str(local): inside})
        return ResolvedModel(engine_arg=model.path)
    if model.hub:
        if model.revision and model.revision != TO_BE_LOCKED:
            repo = hub_cache() / ("models--" + model.hub.replace("/", "--"))
            snapshot = repo / "snapshots" / model.revision
            if snapshot.is_dir():
                # The whole repository directory: a snapshot's files are links into its blobs/.
                inside = f"{MODEL_MOUNT}/{repo.name}"
                return ResolvedModel(
                    engine_arg=f"{inside}/snapshots/{model.revision}",
                    directory=str(snapshot),
                    mounts={str(repo): inside},
                )
        return ResolvedModel(engine_arg=model.hub)
    return ResolvedModel(engine_arg=model.name)


def static_model_findings(model: ModelRef, *, cell: str | None = None, image: str | None = None) -> Findings:
    """What is wrong with a model's pinning without looking at any file (matrix, dry-run, runner)."""
    findings = Findings()
    if model.source is None:
        findings.add(
            "MODEL_SOURCE_MISSING",
            f"model '{model.name}' names no hub repository or path: the engine is given its name",
            severity=Severity.warning,
            cell=cell,
            image=image,
        )
    if model.hub and not model.path and model.revision in (None, TO_BE_LOCKED):
        findings.add(
            "MODEL_NOT_PINNED",
            f"model '{model.name}' ({model.hub}) has no revision commit (revision: {model.revision or 'absent'})",
            cell=cell,
            image=image,
        )
    unpinned = sorted(f for f, h in model.sha256.items() if h == TO_BE_LOCKED)
    if unpinned:
        findings.add(
            "MODEL_NOT_PINNED",
            f"model '{model.name}': sha256 of {', '.join(unpinned)} is to-be-locked",
            cell=cell,
            image=image,
        )
    return findings


def check_model(
    model: ModelRef, resolved: ResolvedModel, *, cell: str | None = None, image: str | None = None
) -> tuple[ModelRecord, Findings]:
    """Hash the pinned (and identity) files of the model directory; refuse missing or different ones."""
    findings = static_model_findings(model, cell=cell, image=image)
    pinned = {f: h for f, h in model.sha256.items() if h != TO_BE_LOCKED}
    observed: dict[str, str] = {}
    directory = Path(resolved.directory) if resolved.directory else None
    if directory is None:
        if model.sha256:
            findings.add(
                "MODEL_FILE_MISSING",
                f"model '{model.name}' pins {len(model.sha256)} file(s), but no model directory is on this runner "
                f"(looked for {model.path or f'{model.hub}@{model.revision} in {hub_cache()}'})",
                cell=cell,
                image=image,
            )
    else:
        for name in sorted({*model.sha256, *IDENTITY_FILES}):
            file = directory / name
            if not file.is_file():
                if name in model.sha256:
                    findings.add(
                        "MODEL_FILE_MISSING",
                        f"model '{model.name}': {name} is not in {directory}",
                        cell=cell,
                        image=image,
                    )
                continue
            observed[name] = file_sha256(file)
            if name in pinned and observed[name] != pinned[name]:
                findings.add(
                    "MODEL_HASH_MISMATCH",
                    f"model '{model.name}': {name} has sha256 {observed[name][:12]}, the manifest pins {pinned[name][:12]}",
                    cell=cell,
                    image=image,
                )
    verified = (
        bool(model.sha256) and findings.passed and all(observed.get(f) == h for f, h in model.sha256.items())
    )
    record = ModelRecord(
        name=model.name,
        display_name=model.display_name,
        hub=model.hub,
        revision=model.revision,
        path=model.path,
        directory=resolved.directory,
        engine_arg=resolved.engine_arg,
        expected=dict(model.sha256),
        observed=observed,
        verified=verified,
    )
    return record, findings
