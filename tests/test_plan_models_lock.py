"""plan lock --models/--datasets: a Hugging Face cache (huggingface_hub's layout, read through its
scan_cache_dir) and a local model directory are hashed into the lock, and validate then takes the
model as pinned (no MODEL_NOT_PINNED), the dataset too (no DATASET_NOT_PINNED)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_run import invoke
from models_support import (
    CONFIG,
    GSM8K,
    HUB_MODEL,
    OLD_REV,
    REV,
    TOKENIZER,
    hub_cache,
    sha,
    tvm_wheel,
    write_manifest,
)

from releasekit.manifest import load_manifest
from releasekit.records.lock import read_lock
from releasekit.validate.locked_inputs import with_locked_inputs
from releasekit.validate.models import check_model, resolve_model, static_model_findings


def lock(manifest: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return invoke(
        "plan", "lock", str(manifest), "-o", str(manifest.parent / "lock.json"), "--no-fetch", *args
    )


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
    r = lock(manifest, "--models", str(cache), "--datasets", "--wheelhouse", str(tvm_wheel(tmp_path)))
    assert r.returncode == 0, r.stdout + r.stderr
    locked = read_lock(tmp_path / "lock.json")
    model = locked.models["tiny"]
    assert (model.source, model.hub, model.revision) == (
        "hub-cache",
        "org/tiny",
        REV,
    )  # refs/main, not the older one
    assert [(f.path, f.sha256, f.size) for f in model.files] == [
        ("config.json", sha(CONFIG), len(CONFIG)),
        ("tokenizer.json", sha(TOKENIZER), len(TOKENIZER)),
    ]
    assert (locked.datasets["gsm8k"].sha256, locked.datasets["gsm8k"].samples) == (sha(GSM8K), 2)
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
    assert (dataset.sha256, dataset.samples) == (sha(GSM8K), 2)
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
    model = {**HUB_MODEL, "revision": OLD_REV, "files": [{"path": "config.json", "sha256": sha(CONFIG)}]}
    manifest = write_manifest(tmp_path, model)
    r = lock(manifest, "--models", str(cache), "--wheelhouse", str(tvm_wheel(tmp_path)), "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    assert [f["code"] for f in json.loads(r.stdout)["findings"]["findings"]] == ["MODEL_HASH_MISMATCH"]
    assert not (tmp_path / "lock.json").exists()


def test_a_local_model_directory_is_locked(tmp_path: Path) -> None:
    directory = tmp_path / "models" / "tiny"
    directory.mkdir(parents=True)
    (directory / "config.json").write_bytes(CONFIG)
    (directory / "model.safetensors").write_bytes(b"weights")
    manifest = write_manifest(tmp_path, {"name": "tiny", "path": "models/tiny"})
    wheels = str(tvm_wheel(tmp_path))
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
    assert findings.passed and record.verified and record.expected == {"config.json": sha(CONFIG)}
    # A directory with none of the files to hash examined nothing: a finding, never a pass.
    (directory / "config.json").unlink()
    r = lock(manifest, "--models", f"tiny={directory}", "--wheelhouse", wheels, "--json")
    assert r.returncode == 1 and [f["code"] for f in json.loads(r.stdout)["findings"]["findings"]] == [
        "MODEL_NOTHING_HASHED"
    ]


def test_a_model_in_no_source_warns_and_strict_refuses(tmp_path: Path) -> None:
    empty_cache = hub_cache(tmp_path / "hub", repo_id="org/other")
    manifest = write_manifest(tmp_path, HUB_MODEL)
    wheels = str(tvm_wheel(tmp_path))
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
