"""A Hugging Face cache, a model manifest and a wheelhouse made in a test: what the model-lock tests
and the bounded-reader tests share."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from wheels import write_wheel

REV = "3f1c9a0b7d2e4f6a8b0c1d2e3f4a5b6c7d8e9f01"
OLD_REV = "0" * 39 + "1"
CONFIG, TOKENIZER = b'{"model_type": "llama"}\n', b'{"version": "1.0"}\n'
GSM8K = b'{"question": "1+1?", "answer": "#### 2"}\n{"question": "2+2?", "answer": "#### 4"}\n'


def sha(data: bytes) -> str:
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
            (repo / "blobs" / sha(data)).write_bytes(data)
            (snapshot / name).symlink_to(f"../../blobs/{sha(data)}")
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


HUB_MODEL = {
    "name": "tiny",
    "hub": "org/tiny",
    "revision": "to-be-locked",
    "files": [
        {"path": "config.json", "sha256": "to-be-locked"},
        {"path": "tokenizer.json", "sha256": "to-be-locked"},
    ],
}


def tvm_wheel(tmp_path: Path) -> Path:
    """A wheelhouse for the manifest's one component (a pure wheel: it fits any image)."""
    house = tmp_path / "tvm"
    write_wheel(house, "apache-tvm-ffi", "0.1.12")
    return house
