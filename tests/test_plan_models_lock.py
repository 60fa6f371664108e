"""plan lock --models/--datasets: a Hugging Face cache (huggingface_hub's layout, read through its
scan_cache_dir) and a local model directory are hashed into the lock, and validate then takes the
model as pinned (no MODEL_NOT_PINNED), the dataset too (no DATASET_NOT_PINNED)."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from cli_run import invoke
from wheels import write_wheel

from releasekit.manifest import load_manifest
from releasekit.records.lock import read_lock
from releasekit.validate.locked_inputs import with_locked_inputs
from releasekit.validate.models import check_model, resolve_model, static_model_findings

REV = "3f1c9a0b7d2e4f6a8b0c1d2e3f4a5b6c7d8e9f01"
OLD_REV = "0" * 39 + "1"
CONFIG, TOKENIZER = b'{"model_type": "llama"}\n', b'{"version": "1.0"}\n'
GSM8K = b'{"question": "1+1?", "answer": "#### 2"}\n{"question": "2+2?", "answer": "#### 4"}\n'


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def hub_cache(root: Path, repo_id: str = "org/tiny") -> Path:
    """huggingface_hub's cache layout: models--org--name/{blobs/<hash>, snapshots/<rev>/<file> -> blob, refs/main}."""
    repo = root / ("models--" + repo_id.replace("/", "--"))
    (repo / "blobs").mkdir(parents=True)
    (repo / "refs").mkdir()
    for rev, files in (
        (REV, {"config.json": CONFIG, "tokenizer.json": TOKENIZER}),
        (OLD_REV, {"config.json": b"{}"}),
    ):
        snapshot = repo / "snapshots" / rev
        snapshot.mkdir(parents=True)
        for name, data in files.items():
            (repo / "blobs" / _sha(data)).write_bytes(data)
            (snapshot / name).symlink_to(f"../../blobs/{_sha(data)}")
    (repo / "refs" / "main").write_text(REV)
    return root


def write_manifest(tmp_path: Path, model: dict) -> Path:
    data = {
        "schema": "releasekit/v1",
        "name": "models",
        "components": {
            "tvm": {"kind": "wheel", "requirement": "apache-tvm-ffi==0.1.12", "sha256": "to-be-locked"},
        },
        "toolchain": {
            "base_image": {"name": "runtime", "digest": "sha256:" + "0" * 64},
            "cuda_arch_list": ["12.0a"],
        },
        "validation": {
            "models": {"tiny": model},
            "datasets": {"gsm8k": {"path": "data/gsm8k.jsonl"}},
            "cells": [{"id": "tiny-tp1", "model": "tiny", "gpus": 0, "checks": [{"kind": "log_scan"}]}],
        },
    }
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "data" / "gsm8k.jsonl").write_bytes(GSM8K)
    path = tmp_path / "manifest.yaml"
    path.write_text(json.dumps(data, indent=1))  # JSON is YAML
    return path


def lock(manifest: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return invoke(
        "plan", "lock", str(manifest), "-o", str(manifest.parent / "lock.json"), "--no-fetch", *args
    )


HUB_MODEL = {
    "name": "tiny",
    "hub": "org/tiny",
    "revision": "to-be-locked",
    "files": [
        {"path": "config.json", "sha256": "to-be-locked"},
        {"path": "tokenizer.json", "sha256": "to-be-locked"},
    ],
}


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RELEASEKIT_CACHE", str(tmp_path / "cache"))
    # Nothing from this host's own hub cache: the model is where the test put it.
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "no-hub"))


def test_a_hub_cache_snapshot_is_locked_and_validate_takes_it_as_pinned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = hub_cache(tmp_path / "hub")
    manifest = write_manifest(tmp_path, HUB_MODEL)
    r = lock(manifest, "--models", str(cache), "--datasets", "--wheelhouse", str(_tvm_wheel(tmp_path)))
    assert r.returncode == 0, r.stdout + r.stderr
    locked = read_lock(tmp_path / "lock.json")
    model = locked.models["tiny"]
    assert (model.source, model.hub, model.revision) == (
        "hub-cache",
        "org/tiny",
        REV,
    )  # refs/main, not the older one
    assert [(f.path, f.sha256, f.size) for f in model.files] == [
        ("config.json", _sha(CONFIG), len(CONFIG)),
        ("tokenizer.json", _sha(TOKENIZER), len(TOKENIZER)),
    ]
    assert (locked.datasets["gsm8k"].sha256, locked.datasets["gsm8k"].samples) == (_sha(GSM8K), 2)
    # validate: without the lock the model is not pinned; with it, it is, and the runner's copy checks out.
    loaded = load_manifest(manifest)
    cell = loaded.manifest.validation.cells[0]
    assert "MODEL_NOT_PINNED" in static_model_findings(cell.model).codes()
    pinned = with_locked_inputs(loaded, locked)
    cell = pinned.manifest.validation.cells[0]
    assert static_model_findings(cell.model).codes() == []
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    record, findings = check_model(cell.model, resolve_model(cell.model, pinned.directory))
    assert findings.passed and record.verified and record.revision == REV
    dataset = pinned.manifest.validation.datasets["gsm8k"]
    assert (dataset.sha256, dataset.samples) == (_sha(GSM8K), 2)
    assert pinned.sha256 == loaded.sha256  # receipts still name the manifest as written
    # The same inputs give the same lock, byte for byte.
    first = (tmp_path / "lock.json").read_bytes()
    assert (
        lock(manifest, "--models", str(cache), "--datasets", "--wheelhouse", str(tmp_path / "tvm")).returncode
        == 0
    )
    assert (tmp_path / "lock.json").read_bytes() == first


def test_a_pinned_revision_picks_that_snapshot_and_a_changed_file_is_a_finding(tmp_path: Path) -> None:
    cache = hub_cache(tmp_path / "hub")
    model = {**HUB_MODEL, "revision": OLD_REV, "files": [{"path": "config.json", "sha256": _sha(CONFIG)}]}
    manifest = write_manifest(tmp_path, model)
    r = lock(manifest, "--models", str(cache), "--wheelhouse", str(_tvm_wheel(tmp_path)), "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    assert [f["code"] for f in json.loads(r.stdout)["findings"]["findings"]] == ["MODEL_HASH_MISMATCH"]
    assert not (tmp_path / "lock.json").exists()


def test_a_local_model_directory_is_locked(tmp_path: Path) -> None:
    directory = tmp_path / "models" / "tiny"
    directory.mkdir(parents=True)
    (directory / "config.json").write_bytes(CONFIG)
    (directory / "model.safetensors").write_bytes(b"weights")
    manifest = write_manifest(tmp_path, {"name": "tiny", "path": "models/tiny"})
    wheels = str(_tvm_wheel(tmp_path))
    # No files listed: the identity files present are hashed (config.json), never unlisted weights.
    r = lock(manifest, "--models", f"tiny={directory}", "--wheelhouse", wheels)
    assert r.returncode == 0, r.stdout + r.stderr
    model = read_lock(tmp_path / "lock.json").models["tiny"]
    assert (model.source, model.revision, [f.path for f in model.files]) == (
        "directory",
        None,
        ["config.json"],
    )
    loaded = load_manifest(manifest)
    assert "MODEL_NOT_PINNED" not in static_model_findings(loaded.manifest.validation.cells[0].model).codes()
    pinned = with_locked_inputs(loaded, read_lock(tmp_path / "lock.json"))
    cell = pinned.manifest.validation.cells[0]
    record, findings = check_model(cell.model, resolve_model(cell.model, pinned.directory))
    assert findings.passed and record.verified and record.expected == {"config.json": _sha(CONFIG)}
    # A directory with none of the files to hash examined nothing: a finding, never a pass.
    (directory / "config.json").unlink()
    r = lock(manifest, "--models", f"tiny={directory}", "--wheelhouse", wheels, "--json")
    assert r.returncode == 1 and [f["code"] for f in json.loads(r.stdout)["findings"]["findings"]] == [
        "MODEL_NOTHING_HASHED"
    ]


def test_a_model_in_no_source_warns_and_strict_refuses(tmp_path: Path) -> None:
    empty_cache = hub_cache(tmp_path / "hub", repo_id="org/other")
    manifest = write_manifest(tmp_path, HUB_MODEL)
    wheels = str(_tvm_wheel(tmp_path))
    r = lock(manifest, "--models", str(empty_cache), "--wheelhouse", wheels, "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert [(f["code"], f["severity"]) for f in json.loads(r.stdout)["findings"]["findings"]] == [
        ("MODEL_NOT_FOUND", "warning")
    ]
    assert read_lock(tmp_path / "lock.json").models == {}
    r = lock(manifest, "--models", str(empty_cache), "--wheelhouse", wheels, "--strict", "--json")
    assert r.returncode == 1
    r = lock(manifest, "--models", str(tmp_path / "nowhere"), "--wheelhouse", wheels)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def _tvm_wheel(tmp_path: Path) -> Path:
    """A wheelhouse for the manifest's one component (a pure wheel: it fits any image)."""
    house = tmp_path / "tvm"
    write_wheel(house, "apache-tvm-ffi", "0.1.12")
    return house
