"""What ``plan lock --models/--datasets`` pinned, applied to the manifest's validation inputs.

A model or dataset the manifest leaves ``to-be-locked`` (a revision, a file's sha256) or
unpinned (a dataset's sha256 and record count) takes the lock's value; a value the
manifest gives is never replaced (the lock was checked against it when it was made).
The manifest's sha256 stays that of its file: receipts still name the manifest as written.
"""

from __future__ import annotations

import dataclasses

from releasekit.manifest import LoadedManifest
from releasekit.manifest.validation import TO_BE_LOCKED, Dataset, ModelFile, ModelRef, ValidationSpec
from releasekit.records.lock import Lock, LockedDataset, LockedModel


def _model(model: ModelRef, locked: LockedModel) -> ModelRef:
    hashes = {f.path: f.sha256 for f in locked.files}
    files = [
        ModelFile(path=f.path, sha256=hashes.get(f.path, f.sha256) if f.sha256 == TO_BE_LOCKED else f.sha256)
        for f in model.files
    ] or [ModelFile(path=f.path, sha256=f.sha256) for f in locked.files]
    revision = model.revision
    if model.hub and revision in (None, TO_BE_LOCKED) and locked.revision:
        revision = locked.revision
    return model.model_copy(update={"files": files, "revision": revision})


def _dataset(dataset: Dataset, locked: LockedDataset) -> Dataset:
    if dataset.path != locked.path:
        return dataset
    return dataset.model_copy(
        update={
            "sha256": dataset.sha256 or locked.sha256,
            "samples": dataset.samples if dataset.samples is not None else locked.samples,
        }
    )


def pinned_spec(spec: ValidationSpec, lock: Lock) -> ValidationSpec:
    models = {k: _model(m, lock.models[k]) if k in lock.models else m for k, m in spec.models.items()}
    cells = []
    for cell in spec.cells:
        # A cell's `model: KEY` was expanded from validation.models: find its key by equality.
        key = next((k for k, m in spec.models.items() if m == cell.model and k in lock.models), None)
        cells.append(cell if key is None else cell.model_copy(update={"model": models[key]}))
    datasets = {
        k: _dataset(d, lock.datasets[k]) if k in lock.datasets else d for k, d in spec.datasets.items()
    }
    return spec.model_copy(update={"models": models, "cells": cells, "datasets": datasets})


def with_locked_inputs(loaded: LoadedManifest, lock: Lock) -> LoadedManifest:
    if not lock.models and not lock.datasets:
        return loaded
    spec = pinned_spec(loaded.manifest.validation, lock)
    return dataclasses.replace(loaded, manifest=loaded.manifest.model_copy(update={"validation": spec}))
