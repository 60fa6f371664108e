"""Every cell of the real manifests rendered faithfully, never silently; models as pinned inputs.

`releasekit matrix` once rendered the TP6 A4, A16 and online-quantisation cells of ff-next to
the same argv (the scheme was dropped) and used a display name with spaces as a model path.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path

import pytest
from cli_run import invoke
from pydantic import ValidationError
from ruamel.yaml import YAML

from releasekit.manifest import load_manifest
from releasekit.manifest.validation import Cell, ModelRef, QuantizationScheme, ValidationSpec
from releasekit.records.receipt import read_receipt
from releasekit.validate.engines import engine_for
from releasekit.validate.matrix import MatrixRow, matrix_rows
from releasekit.validate.models import check_model, resolve_model

REPO = Path(__file__).resolve().parent.parent
MANIFESTS = ("ff-next.yaml", "ds4-sm120.yaml")


def _rows(name: str) -> tuple[list[Cell], list[MatrixRow]]:
    spec = load_manifest(REPO / "manifests" / name).manifest.validation
    return list(spec.cells), matrix_rows(spec)


def _arguments(row: MatrixRow) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    return tuple(row.serve_argv), tuple(sorted(row.serve_env.items()))


@pytest.mark.parametrize("manifest", MANIFESTS)
def test_every_cell_is_rendered_or_reported(manifest: str) -> None:
    cells, rows = _rows(manifest)
    assert cells
    for cell, row in zip(cells, rows, strict=True):
        # Never silent: arguments, or the reason there are none.
        assert row.serve_argv or row.serve_problems, cell.id
        # Model paths and served names are identifiers, never display names.
        for value in (cell.model.name, cell.model.path or "", cell.model.hub or "", row.model_source or ""):
            assert not any(ch.isspace() for ch in value), (cell.id, value)
        assert cell.model.source, f"{cell.id}: the model names no source"
        if row.serve_argv:
            assert not any(" " in a for a in row.serve_argv if not a.startswith("{")), row.serve_argv
            assert cell.model.source in row.serve_argv


@pytest.mark.parametrize("manifest", MANIFESTS)
def test_cells_that_differ_in_quantisation_kv_dtype_or_speculation_differ_in_arguments(manifest: str) -> None:
    cells, rows = _rows(manifest)
    rendered = [(c, r) for c, r in zip(cells, rows, strict=True) if r.serve_argv]
    for (a, ra), (b, rb) in itertools.combinations(rendered, 2):
        differs = (
            a.quantization != b.quantization
            or a.kv_cache_dtype != b.kv_cache_dtype
            or a.speculative != b.speculative
        )
        if differs:
            assert _arguments(ra) != _arguments(rb), f"{a.id} and {b.id} render the same arguments"


def test_ff_next_quantisation_schemes_reach_the_engine() -> None:
    cells, rows = _rows("ff-next.yaml")
    by_id = {r.id: r for r in rows}
    tp6 = ["glm52-tp6-dcp2-mtp3-a4", "glm52-tp6-dcp2-mtp3-a16", "glm52-tp6-dcp2-mtp3-online-quant"]
    argvs = [tuple(by_id[c].serve_argv) for c in tp6]
    assert len(set(argvs)) == 3
    online = by_id["glm52-tp6-dcp2-mtp3-online-quant"].serve_argv
    assert online[online.index("--quantization") + 1] == "fp8"
    a8 = by_id["a8-w4a8-aux-streams-capture"].serve_argv
    assert "--quantization" in a8 and "--moe-act-dtype" in a8
    nf3 = by_id["glm52-tp6-dcp2-mtp3-nf3-hybrid"]
    assert nf3.model == "GLM-5.2-NF3-hybrid" and nf3.model_source == "/models/GLM-5.2-NF3-hybrid"
    assert all(not r.serve_problems for r in rows)
    # Every model is a source with a revision or path and pinned files (still to be locked).
    for cell in cells:
        assert cell.model.files and (cell.model.revision or cell.model.path)
    assert all(any(p.startswith("MODEL_NOT_PINNED") for p in r.model_problems) for r in rows)


def test_settings_the_adapter_cannot_render_are_reported() -> None:
    engine = engine_for("vllm")
    schemes = {
        "w4": QuantizationScheme(method="awq", args=["--x"]),
        "ts": QuantizationScheme(engine="tokenspeed"),
    }
    cases = {
        "quantisation scheme 'missing' has no argument set": {"quantization": {"scheme": "missing"}},
        "defined for engine 'tokenspeed'": {"quantization": {"scheme": "ts"}},
        "online=True, scheme 'w4' says online=False": {"quantization": {"scheme": "w4", "online": True}},
        "online quantisation without a scheme or method": {"quantization": {"online": True}},
        "vLLM's EP size is TP x DP = 2": {"parallel": {"tp": 2, "ep": 4}},
        "needs params.model": {"speculative": {"mode": "eagle3", "num_tokens": 2}},
        "option 'turbo' has no vLLM mapping": {"options": {"turbo": True}},
    }
    for needle, settings in cases.items():
        cell = Cell.model_validate({"id": "c", "model": {"name": "m", "hub": "org/m"}, **settings})
        problems = engine.serve_command(cell, "org/m", schemes=schemes).problems
        assert any(needle in p for p in problems), (needle, problems)
    ok = Cell.model_validate(
        {"id": "c", "model": {"name": "m", "hub": "org/m"}, "quantization": {"scheme": "w4"}}
    )
    cmd = engine.serve_command(ok, "org/m", schemes=schemes)
    assert not cmd.problems and cmd.argv[-3:] == ["--quantization", "awq", "--x"]
    assert cmd.expected["quantization"] == "awq"


@pytest.mark.parametrize(
    "model",
    [
        {"name": "GLM-5.2 NF3 hybrid"},
        {"name": "m", "path": "models/GLM 5.2"},
        {"name": "m", "hub": "zai-org/GLM 5.2"},
        {"name": "m", "revision": "0" * 40},
        {"name": "m", "hub": "org/m", "revision": "main"},
        {"name": "m", "files": [{"path": "../config.json", "sha256": "0" * 64}]},
        {"name": "m", "files": [{"path": "config.json", "sha256": "abc"}]},
    ],
    ids=[
        "display-name",
        "path-spaces",
        "hub-spaces",
        "revision-without-hub",
        "branch-revision",
        "escape",
        "bad-hash",
    ],
)
def test_model_rules_refuse_display_names_spaces_and_loose_pins(model: dict) -> None:
    with pytest.raises(ValidationError):
        ModelRef.model_validate(model)


def test_a_cell_names_a_model_by_key() -> None:
    spec = ValidationSpec.model_validate(
        {
            "models": {"m": {"name": "m", "hub": "org/m", "revision": "a" * 40}},
            "cells": [{"id": "c", "model": "m"}],
        }
    )
    assert spec.cells[0].model.hub == "org/m"
    with pytest.raises(ValidationError, match="not a key of validation.models"):
        ValidationSpec.model_validate({"cells": [{"id": "c", "model": "nope"}]})


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_model_directory_hashes_are_checked(tmp_path: Path) -> None:
    model_dir = tmp_path / "m"
    model_dir.mkdir()
    (model_dir / "config.json").write_bytes(b'{"a": 1}')
    (model_dir / "tokenizer.json").write_bytes(b"{}")
    good = ModelRef.model_validate(
        {"name": "m", "path": "m", "files": [{"path": "config.json", "sha256": _sha(b'{"a": 1}')}]}
    )
    record, findings = check_model(good, resolve_model(good, tmp_path), cell="c")
    assert findings.passed and record.verified
    assert record.observed == {"config.json": _sha(b'{"a": 1}'), "tokenizer.json": _sha(b"{}")}
    (model_dir / "config.json").write_bytes(b'{"a": 2}')
    record, findings = check_model(good, resolve_model(good, tmp_path), cell="c")
    assert findings.codes() == ["MODEL_HASH_MISMATCH"] and not record.verified
    missing = ModelRef.model_validate(
        {"name": "m", "path": "m", "files": [{"path": "model.safetensors.index.json", "sha256": "0" * 64}]}
    )
    _, findings = check_model(missing, resolve_model(missing, tmp_path))
    assert findings.codes() == ["MODEL_FILE_MISSING"]
    nowhere = ModelRef.model_validate(
        {
            "name": "m",
            "hub": "org/m",
            "revision": "b" * 40,
            "files": [{"path": "config.json", "sha256": "0" * 64}],
        }
    )
    _, findings = check_model(nowhere, resolve_model(nowhere, tmp_path))
    assert findings.codes() == ["MODEL_FILE_MISSING"]


def test_hub_snapshot_in_the_local_cache_is_mounted_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rev = "c" * 40
    repo = tmp_path / "hub" / "models--org--m"
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / "x").write_bytes(b"{}")
    (repo / "snapshots" / rev).mkdir(parents=True)
    (repo / "snapshots" / rev / "config.json").symlink_to("../../blobs/x")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    model = ModelRef.model_validate(
        {
            "name": "m",
            "hub": "org/m",
            "revision": rev,
            "files": [{"path": "config.json", "sha256": _sha(b"{}")}],
        }
    )
    resolved = resolve_model(model, tmp_path)
    assert resolved.engine_arg == f"/models/models--org--m/snapshots/{rev}"
    assert resolved.mounts == {str(repo): "/models/models--org--m"}
    record, findings = check_model(model, resolved)
    assert findings.passed and record.verified


def _write_manifest(tmp_path: Path, model: dict) -> Path:
    data = {
        "schema": "releasekit/v1",
        "name": "models",
        "components": {
            "app": {"kind": "git", "repo": "https://example.invalid/app.git", "canonical_branch": "main"}
        },
        "toolchain": {"base_image": {"name": "base", "digest": "to-be-locked"}, "cuda_arch_list": ["12.0a"]},
        "validation": {
            "models": {"m": model},
            "cells": [
                {
                    "id": "c",
                    "model": "m",
                    "gpus": 0,
                    "engine_command": ["python3", "-c", "print('served')"],
                    "startup_timeout_s": 8,
                    "checks": [{"kind": "log_scan"}],
                }
            ],
        },
    }
    path = tmp_path / "m.yaml"
    YAML(typ="safe", pure=True).dump(data, path)
    return path


@pytest.mark.docker
def test_a_model_whose_files_differ_is_refused_before_the_server_starts(
    tmp_path: Path, base_image, docker_client
) -> None:
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "config.json").write_text('{"model_type": "llama"}')
    manifest = _write_manifest(
        tmp_path,
        {
            "name": "m",
            "display_name": "My model",
            "path": "weights",
            "files": [
                {"path": "config.json", "sha256": "1" * 64},
                {"path": "tokenizer.json", "sha256": "2" * 64},
            ],
        },
    )
    proc = invoke(
        "validate",
        str(manifest),
        "--image",
        base_image.name,
        "-o",
        str(tmp_path / "receipts"),
        "--gpus",
        "0",
        "--json",
        cwd=REPO,
    )
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr
    assert json.loads(proc.stdout)["cells"][0]["codes"] == ["MODEL_FILE_MISSING", "MODEL_HASH_MISMATCH"]
    receipt = read_receipt(tmp_path / "receipts" / "c.json")
    assert receipt.startup_s is None and not receipt.checks and not receipt.log_tail
    assert receipt.model is not None and receipt.model.path == "weights" and not receipt.model.verified
    assert receipt.model.expected == {"config.json": "1" * 64, "tokenizer.json": "2" * 64}
    assert receipt.model.observed == {"config.json": _sha(b'{"model_type": "llama"}')}


def test_a_schemes_arguments_are_declared_switches_for_the_publish_gate() -> None:
    from releasekit.publish.gate import policy_from_manifest

    policy = policy_from_manifest(load_manifest(REPO / "manifests" / "ff-next.yaml").manifest)
    a4 = policy.cell("glm52-tp6-dcp2-mtp3-a4")
    assert a4 is not None and a4.args == ["--moe-act-dtype", "fp4"]
