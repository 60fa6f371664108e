"""``releasekit demo`` end to end on the real engine: example repos -> lock -> check -> build."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from releasekit.demo.cpu_matrix import (
    CROSS_CHECK_ATTEMPTS,
    CROSS_CHECK_TOLERANCE,
    MIN_ACCURACY,
    SIDE_BY_SIDE_MIN_RATIO,
    SIDE_BY_SIDE_RUNS,
)
from releasekit.demo.example import make_example
from releasekit.manifest import load_manifest
from releasekit.validate.checks.decode import ENGINE_TIMED
from releasekit.validate.interleave import side_order

HAS_NVCC = shutil.which("nvcc") is not None


@pytest.mark.docker
@pytest.mark.slow
def test_demo_runs_green(demo_run, docker_client):
    proc, root = demo_run.proc, demo_run.root
    assert proc.returncode == 0, proc.stderr + proc.stdout[-4000:]
    result = demo_run.result
    assert result["passed"] is True
    assert all(isinstance(s["seconds"], float) for s in result["stages"])
    assert [s["name"] for s in result["stages"]] == [
        "base-image",
        "engine image",
        "example",
        "validation matrix",
        "plan lock",
        "plan check",
        "signing key",
        "build",
        "verify-provenance",
        "sign",
        "stage",
        "baseline image",
        "hygiene",
        "test",
        "validate",
        "publish",
    ]
    assert all(s["status"] == "passed" for s in result["stages"])
    release = root / "demo" / "release"
    check = json.loads((release / "plan-check.json").read_text())
    assert check["passed"] is True
    record = json.loads((release / "build.json").read_text())
    lock_sha = hashlib.sha256((root / "demo" / "lock.json").read_bytes()).hexdigest()
    assert record["image_tag"] == result["image_tag"] == f"releasekit-demo/rkdemo:{lock_sha[:12]}"
    assert record["image_id"] == result["image_id"] == docker_client.images.get(result["image_tag"]).id
    lock = json.loads((root / "demo" / "lock.json").read_text())
    labels = docker_client.images.get(result["image_id"]).labels
    for name, comp in lock["components"].items():
        assert labels[f"io.releasekit.component.{name}.commit"] == comp["commit"]
    assert ("kernels" in lock["components"]) == HAS_NVCC
    greeting = docker_client.containers.run(
        result["image_id"],
        ["python3", "-c", "import rkdemo_runtime; print(rkdemo_runtime.greet())"],
        remove=True,
    ).decode()
    assert greeting.strip() == f"hello from rkdemo 0.1.0+g{lock['components']['runtime']['commit'][:12]}"
    _check_test_stage(root / "demo", result, lock_sha)
    _check_validate_stage(root / "demo", result, lock_sha, docker_client)
    _check_signed(root / "demo", result)
    _check_sbom(root / "demo", result)
    docker_client.images.remove(result["image_tag"])


def _check_signed(demo: Path, result: dict) -> None:
    """The demo signs: a throwaway key in its own directory signed the provenance and the VSA, the
    envelopes were verified and attached at publish, verified again at promote, and RELEASE.md says so."""
    from releasekit.signing import keyid_of, load_trusted_keys, verify_envelope
    from releasekit.signing.keys import load_public_key

    public = demo / "keys" / "releasekit.pub"
    assert (demo / "keys" / "releasekit.key").is_file() and public.is_file()
    keyid = keyid_of(load_public_key(public))
    release = demo / "release"
    trusted = load_trusted_keys([public])
    for name in ("provenance.intoto.json", "verification_summary.json", "sbom.cdx.json"):
        envelope = release / name.replace(".json", ".dsse.json")
        kind = "application/vnd.cyclonedx+json" if name == "sbom.cdx.json" else "application/vnd.in-toto+json"
        verified = verify_envelope(envelope.read_bytes(), trusted, where=envelope.name, payload_type=kind)
        assert verified.keyid == keyid and verified.payload == (release / name).read_bytes()
    summary = json.loads((release / "verification_summary.json").read_text())
    sbom_sha = hashlib.sha256((release / "sbom.cdx.json").read_bytes()).hexdigest()
    assert summary["predicate"]["releasekit"]["sbom_sha256"] == sbom_sha  # the signed summary names it
    assert summary["_type"] == "https://in-toto.io/Statement/v1"
    assert summary["subject"][0]["digest"] == {"sha256": result["image_id"].removeprefix("sha256:")}
    publish = next(s for s in result["stages"] if s["name"] == "publish")
    assert "EVIDENCE_UNSIGNED" not in {f["code"] for f in publish["findings"]["findings"]}
    assert f"signed by {keyid[:16]}" in publish["summary"] and "and at promote" in publish["summary"]
    record = json.loads((release / "publish.json").read_text())
    # Every link the gate read was signed by the host that wrote it, and attached with the statements.
    receipts = sorted(
        p.stem for p in (release / "receipts").glob("*.json") if not p.name.endswith(".dsse.json")
    )
    suites = sorted(p.stem for p in (release / "tests").glob("*.json") if not p.name.endswith(".dsse.json"))
    assert receipts and suites
    assert record["signed"]["files"] == sorted(
        ["provenance.intoto.dsse.json", "sbom.cdx.dsse.json", "verification_summary.dsse.json"]
        + [f"receipts/{name}.dsse.json" for name in receipts]
        + [f"tests/{name}.dsse.json" for name in suites]
    )
    assert (release / "staging.dsse.json").is_file()
    assert set(record["signers"].values()) == {keyid}
    notes = (release / "RELEASE.md").read_text()
    assert "## Signatures" in notes and f"signature by key `{keyid[:16]}` verified" in notes


def _check_sbom(demo: Path, result: dict) -> None:
    """verify-provenance wrote the image's CycloneDX SBOM; publish listed it in RELEASE.md (and attached it)."""
    from releasekit.records.sbom import SBOM_FILE, SbomView

    release = demo / "release"
    sbom = SbomView.from_json(json.loads((release / SBOM_FILE).read_text()))
    assert sbom.names_image(result["image_id"])
    counts = sbom.counts()
    assert counts["library"] > 100 and counts["files"] > 1000  # vllm's distributions, Debian's files
    assert (
        f"- `{SBOM_FILE}` (CycloneDX 1.6, attached): serial `{sbom.serial_number}`"
        in (release / "RELEASE.md").read_text()
    )


def _check_test_stage(demo: Path, result: dict, lock_sha: str) -> None:
    """The component tests ran in the candidate; the pre-existing failure was judged on the baseline image."""
    release = demo / "release"
    unit = json.loads((release / "tests" / "runtime.unit.json").read_text())
    assert (unit["status"], unit["image_id"], unit["lock_sha256"]) == ("passed", result["image_id"], lock_sha)
    assert unit["counts"] == {"passed": 3, "failed": 1, "skipped": 0, "errors": 0}
    assert [r["ok"] for r in unit["expected"]] == [True, True]
    [failure] = unit["failures"]
    assert failure["test"] == "tests/test_greet.py::test_version_is_a_public_version"
    assert failure["verdict"] == "pre-existing"
    # Both results are recorded: the candidate's rerun and the baseline image's run.
    assert failure["candidate_rerun"]["outcome"] == "failed"
    assert failure["baseline"]["outcome"] == "failed"
    assert failure["baseline"]["image_id"] == unit["baseline_image_id"] != result["image_id"]
    gpu = json.loads((release / "tests" / "runtime.gpu.json").read_text())
    assert gpu["status"] == "skipped" and gpu["required"] is False
    assert gpu["skip_reason"].startswith("needs 1 GPU(s); this host has")
    hygiene = json.loads((release / "hygiene.json").read_text())
    assert hygiene["status"] == "failed"
    # What a real component's hygiene runs; only git diff --check finds the planted space.
    [component] = hygiene["components"]
    assert [(s["step"], s["status"]) for s in component["steps"]] == [
        ("ruff-check", "passed"),
        ("ruff-format", "passed"),
        ("git-diff-check", "failed"),
    ]
    [planted] = hygiene["findings"]["findings"]
    assert planted["code"] == "WHITESPACE_ERROR"
    assert (planted["location"]["file"], planted["location"]["line"]) == ("tests/fixtures/greetings.txt", 1)
    # The gate: the skipped optional suite and the non-required hygiene are warnings, nothing blocks.
    publish = next(s for s in result["stages"] if s["name"] == "publish")
    warnings = {f["code"] for f in publish["findings"]["findings"] if f["severity"] == "warning"}
    assert {"TEST_SUITE_SKIPPED", "HYGIENE_FAILED"} <= warnings
    notes = (release / "RELEASE.md").read_text()
    assert (
        "| runtime/unit | passed | 3 passed, 1 failed, 0 errors, 0 skipped | passed >= 3: 3 ok; failed <= 1: 1 ok | 1 pre-existing |"
        in notes
    )
    report = (release / "validation-report" / "REPORT.md").read_text()
    assert (
        "| runtime/unit | passed | 3 passed, 1 failed, 0 errors, 0 skipped | passed >= 3: 3 ok; failed <= 1: 1 ok |"
        in report
    )


def _check_validate_stage(demo: Path, result: dict, lock_sha: str, docker_client) -> None:
    """Both cells served by a real vLLM in the candidate; the ngram cell really speculated and was gated.

    (tests/test_validate_e2e.py holds a broken candidate of the same model to this spec-off receipt.)
    """
    from releasekit.records.receipt import read_receipt

    receipts = demo / "release" / "receipts"
    off = read_receipt(receipts / "cpu-spec-off.json")
    ngram = read_receipt(receipts / "cpu-ngram3.json")
    # One pipeline with the workflow: the cells ran the staged digest, which publish published.
    staged = json.loads((demo / "release" / "staging.json").read_text())
    published = json.loads((demo / "release" / "publish.json").read_text())
    assert staged["image_id"] == result["image_id"] and published["digest"] == staged["digest"]
    tests = json.loads((demo / "release" / "tests" / "runtime.unit.json").read_text())
    assert tests["image_digest"] == staged["digest"]
    for r in (off, ngram):
        assert r.image_digest == staged["digest"]
        assert (r.image_id, r.lock_sha256, r.passed, r.status) == (
            result["image_id"],
            lock_sha,
            True,
            "passed",
        )
        assert r.metrics["throughput.c4.completed"].value == 4
        assert r.invocation is not None and r.invocation.env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    # The spec-off cell: real accuracy on every question of the pinned 30-question set, well above zero.
    assert off.metrics["gsm8k.n"].value == 30
    assert off.metrics["gsm8k.accuracy"].value > MIN_ACCURACY
    assert off.metrics["gsm8k.accuracy"].low is not None
    gsm8k = next(c for c in off.checks if c.kind == "gsm8k")
    assert gsm8k.details["fewshot"] == "arith-train" and gsm8k.details["num_fewshot"] == 6
    assert off.metrics["long_context.prompt_tokens"].value > 900
    assert off.metrics["throughput.c4.output_tok_s"].value > 0
    assert "--dtype" in off.invocation.argv and "float32" in off.invocation.argv
    # The sweep's top level measured again by `vllm bench serve` in the server's container, same
    # workload: the two output token rates agree within the manifest's tolerance.
    theirs = off.metrics["throughput.c4.bench_serve_output_tok_s"].value
    assert theirs is not None and theirs > 0
    # The best of each side's rounds (a round disturbed by load is measured again, docs/benchmarks.md).
    ours = off.metrics["throughput.c4.cross_check_output_tok_s"].value
    assert abs(ours - theirs) / theirs <= CROSS_CHECK_TOLERANCE
    assert 1 <= off.metrics["throughput.c4.cross_check_rounds"].value <= CROSS_CHECK_ATTEMPTS
    sweep = next(c for c in off.checks if c.kind == "throughput")
    assert sweep.details["cross_check"]["c4"]["completed"] == 4 and sweep.passed
    assert "throughput.c4.bench_serve_output_tok_s" not in ngram.metrics  # only the spec-off cell asks for it
    assert ngram.metrics["acceptance.rate"].value > 0
    assert ngram.metrics["acceptance.drafts"].value > 0
    assert ngram.metrics["decode.output_tok_s"].value > 0
    # Both cells' decode speed is vLLM's own account of exactly our one 32-token request a run (its
    # decode histograms), not a difference of latencies: 31 tokens after the first.
    for r in (off, ngram):
        decode = next(c for c in r.checks if c.kind == "decode")
        for run in decode.details.get("runs", [decode.details]):
            assert run["method"] == ENGINE_TIMED and run["engine_timed"]["decode_tokens"] == 31, run
    assert ngram.invocation is not None and "--speculative-config" in ngram.invocation.argv
    gate = next(g for g in ngram.gates if g.baseline == "spec-off")
    assert gate.passed and gate.baseline_value == off.metrics["decode.output_tok_s"].value
    # A baseline from an earlier receipt is marked as such, with the host it names (the same one here).
    assert gate.baseline_receipt is not None and gate.baseline_host == off.host
    # Like with like (issue 45): the spec-off cell against the same cell on the baseline image, both
    # servers up at once, their decode runs interleaved (A B B A ...), judged on the paired bound.
    (side,) = off.gates
    assert side.passed and side.baseline_kind == "interleaved" and side.test == "paired-t-one-sided-95"
    assert side.baseline_image_id == off.interleaved_baseline.image_id != off.image_id
    assert side.runs == len(side.ratios) == SIDE_BY_SIDE_RUNS and side.gate_power is not None
    assert off.interleaved_baseline.order["decode"] == ["baseline warm-up", *side_order(SIDE_BY_SIDE_RUNS)]
    assert not side.gate_power.underpowered and side.ratio_low >= SIDE_BY_SIDE_MIN_RATIO
    # The same real measurements against a baseline they cannot meet: the gate fails with its code.
    from releasekit.manifest.validation import Gate
    from releasekit.validate.gates import BaselineValues, evaluate_gate

    spec_off = {
        "spec-off": BaselineValues(name="spec-off", values={k: m.value for k, m in off.metrics.items()})
    }
    # Twice the ratio measured, whatever this host measured (ngram drafts 3 tokens a step: its decode
    # rate is a multiple of spec-off's, by how much depends on how well this host's run drafted).
    measured = ngram.metrics["decode.output_tok_s"].value / off.metrics["decode.output_tok_s"].value
    unmeetable = Gate(
        metric="decode.output_tok_s", baseline="spec-off", min_ratio=2 * max(measured, 1.0), runs=1
    )
    result_gate, gate_findings = evaluate_gate(unmeetable, ngram.metrics, spec_off)
    assert not result_gate.passed and gate_findings.codes() == ["GATE_BELOW_BASELINE"]
    report = demo / "release" / "validation-report"
    summary = json.loads((report / "summary.json").read_text())
    assert summary["passed"] and sorted(c["cell_id"] for c in summary["cells"]) == [
        "cpu-ngram3",
        "cpu-spec-off",
    ]
    assert (report / "throughput.png").read_bytes()[:4] == b"\x89PNG"
    assert (report / "gates.png").read_bytes()[:4] == b"\x89PNG"
    assert "cpu-ngram3" in (report / "REPORT.md").read_text()
    # The gates drawn against their thresholds: an SVG of our own and the same picture as text.
    assert (report / "gates.svg").read_text().startswith("<svg")
    assert "interleaved (A B B A" in (report / "REPORT.md").read_text()
    assert "```text" in (report / "REPORT.md").read_text()
    # Nothing left behind of the candidate's cells (the Docker Engine may be shared with other runs).
    assert not docker_client.containers.list(
        all=True, filters={"label": "io.releasekit.validate.cell", "ancestor": result["image_id"]}
    )


def test_without_nvcc_the_cuda_component_is_left_out_with_a_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    if shutil.which("nvcc"):
        pytest.skip("nvcc is in /usr/bin here: cannot hide it")
    example = make_example(tmp_path, base_image="releasekit/base-python:bookworm")
    assert example.native is False
    assert example.skipped and "nvcc not found" in example.skipped[0]
    manifest = load_manifest(Path(example.manifest)).manifest
    assert sorted(manifest.components) == ["runtime"]
    assert manifest.components["runtime"].merge_plan[1].supersedes == [3]
