"""A server that exits, never becomes healthy, or hangs mid-run: a failed receipt, never a hung run.

The engine here is a few lines of Python's http.server in a container of the base image,
started through the same adapter, runner and checks as vLLM: a real vLLM cannot be made
to hang on demand, and these paths must be proven on every CI run in seconds.
"""

from __future__ import annotations

import hashlib
import subprocess
import time
from pathlib import Path

import pytest
from cli_run import invoke
from ruamel.yaml import YAML

from releasekit.records.receipt import read_receipt

pytestmark = [pytest.mark.docker]

REPO = Path(__file__).resolve().parent.parent

EXITS = "import sys; print('RuntimeError: engine core initialization failed', flush=True); sys.exit(3)"
NEVER_READY = "import time; print('loading weights forever', flush=True); time.sleep(3600)"
HANGS = """
import http.server, json, time
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"data": [{"id": "stub"}]}).encode() if self.path == "/v1/models" else b"ok"
        self.send_response(200); self.send_header("content-length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def do_POST(self):
        print("request received, hanging", flush=True)
        time.sleep(3600)
print("stub engine up", flush=True)
http.server.ThreadingHTTPServer(("0.0.0.0", 8000), H).serve_forever()
"""


DIES = HANGS.replace(
    'print("request received, hanging", flush=True)\n        time.sleep(3600)',
    'print("request received, crashing", flush=True)\n        import os; os._exit(7)',
)


def manifest(tmp_path: Path, script: str) -> Path:
    data_file = tmp_path / "q.jsonl"
    data_file.write_text('{"question": "1 + 1?", "answer": "#### 2"}\n')
    pin = {"sha256": hashlib.sha256(data_file.read_bytes()).hexdigest(), "samples": 1}
    data = {
        "schema": "releasekit/v1",
        "name": "failures",
        "components": {
            "app": {"kind": "git", "repo": "https://example.invalid/app.git", "canonical_branch": "main"}
        },
        "toolchain": {"base_image": {"name": "base", "digest": "to-be-locked"}, "cuda_arch_list": ["12.0a"]},
        "validation": {
            "datasets": {"q": {"path": "q.jsonl", **pin}},
            "cells": [
                {
                    "id": "stub",
                    "model": {"name": "stub"},
                    "gpus": 0,
                    "engine_command": ["python3", "-c", script],
                    "startup_timeout_s": 8,
                    "request_timeout_s": 3,
                    "checks": [{"kind": "gsm8k", "dataset": "q", "num_fewshot": 0, "max_tokens": 4}],
                }
            ],
        },
    }
    path = tmp_path / "m.yaml"
    YAML(typ="safe", pure=True).dump(data, path)
    return path


def validate(tmp_path: Path, script: str, image: str) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    proc = invoke(
        "validate",
        str(manifest(tmp_path, script)),
        "--image",
        image,
        "-o",
        str(tmp_path / "receipts"),
        "--gpus",
        "0",
        "--json",
        cwd=REPO,
    )
    return proc, time.monotonic() - start


@pytest.mark.parametrize(
    ("script", "code", "in_log"),
    [
        (EXITS, "SERVER_EXITED", "engine core initialization failed"),
        (NEVER_READY, "SERVER_NOT_READY", "loading weights forever"),
        (HANGS, "REQUEST_FAILED", "request received, hanging"),
        (DIES, "SERVER_EXITED", "request received, crashing"),
    ],
    ids=["exits", "never-ready", "hangs-mid-run", "dies-mid-run"],
)
def test_a_broken_server_gives_a_failed_receipt(
    tmp_path: Path, base_image, docker_client, script, code, in_log
) -> None:
    proc, seconds = validate(tmp_path, script, base_image.name)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr
    receipt = read_receipt(tmp_path / "receipts" / "stub.json")
    assert not receipt.passed
    assert code in [f.code for f in receipt.findings] + [f.code for c in receipt.checks for f in c.findings]
    assert any(in_log in line for line in receipt.log_tail)
    assert seconds < 60
    assert not docker_client.containers.list(all=True, filters={"label": "io.releasekit.validate.cell=stub"})


def test_an_image_that_does_not_exist_is_an_input_error(tmp_path: Path, docker_client) -> None:
    proc, _ = validate(tmp_path, EXITS, "releasekit-test/no-such-image:0")
    assert (
        proc.returncode == 2
        and proc.stderr.startswith("releasekit: error: image")
        and "Traceback" not in proc.stderr
    )


def test_a_gpu_cell_on_a_host_without_the_nvidia_runtime_fails_cleanly(
    tmp_path: Path, base_image, docker_client
) -> None:
    # The device request reaches the engine, which refuses it here (no GPU, no NVIDIA runtime):
    # a failed receipt with the engine's reason, and no created container left behind.
    path = manifest(tmp_path, HANGS)
    data = YAML(typ="safe", pure=True).load(path)
    data["validation"]["cells"][0]["gpus"] = 1
    YAML(typ="safe", pure=True).dump(data, path)
    proc = invoke(
        "validate",
        str(path),
        "--image",
        base_image.name,
        "-o",
        str(tmp_path / "receipts"),
        "--gpus",
        "1",
        "--json",
        cwd=REPO,
    )
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr
    receipt = read_receipt(tmp_path / "receipts" / "stub.json")
    # (Besides a MODEL_SOURCE_MISSING warning: the stub model names no hub repository or path.)
    assert [f.code for f in receipt.findings if f.severity == "error"] == ["SERVER_NOT_STARTED"]
    assert receipt.status == "error"
    assert receipt.invocation.gpus == [0]
    assert not docker_client.containers.list(all=True, filters={"label": "io.releasekit.validate.cell=stub"})
