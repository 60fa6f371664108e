"""Every component answered (issue 35): what a partial or unreadable repository costs is one
finding or one line for what needs it, never the whole answer, never an internal error.

Real git repositories made here (and the seeds' corpus, read-only) with objects or refs taken
away the way a partial mirror lacks them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_run import invoke
from corpus import Corpus

REPO = Path(__file__).resolve().parent.parent
DS4 = REPO / "manifests" / "ds4-sm120.yaml"


def _git(repo: Path, *args: str, **kw: object) -> str:
    env = {"PATH": os.environ["PATH"], "HOME": str(repo), "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"}
    env |= {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x",
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    ).stdout


def _releasekit(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    return invoke(*args, env={"RELEASEKIT_CACHE": str(cache)})


def _repo_missing_a_blob(root: Path) -> tuple[Path, dict[str, str]]:
    """A repository whose second commit adds a file and third deletes it; the file's blob is then
    removed from the object store. Returns the repository and {step: commit}."""
    repo = root / "r"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    commits = {}
    for step, (path, text) in enumerate(
        [("a.py", "A = 1\n"), ("big.bin", "profile\n" * 50), ("a.py", "A = 2\n")]
    ):
        (repo / path).write_text(text)
        _git(repo, "add", path)
        _git(repo, "commit", "-q", "-m", f"step {step}")
        commits[f"step{step}"] = _git(repo, "rev-parse", "HEAD").strip()
    _git(repo, "rm", "-q", "big.bin")
    _git(repo, "commit", "-q", "-m", "delete the profile")
    commits["delete"] = _git(repo, "rev-parse", "HEAD").strip()
    blob = _git(repo, "rev-parse", f"{commits['step1']}:big.bin").strip()
    (repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    return repo, commits


def test_patch_ids_answer_every_commit_but_the_ones_needing_a_missing_blob(tmp_path: Path) -> None:
    from releasekit.git.history import EMPTY_PATCH, UNREADABLE_PATCH, patch_id_set, patch_ids
    from releasekit.git.runner import Git

    repo, commits = _repo_missing_a_blob(tmp_path)
    # git itself cannot read the range whole:
    whole = subprocess.run(["git", "-C", str(repo), "log", "-p", "main"], capture_output=True, text=True)
    assert whole.returncode != 0 and "unable to read" in whole.stderr
    ids = patch_ids(Git(repo / ".git"), "main")
    unreadable = {c for c, pid in ids.items() if pid.startswith(UNREADABLE_PATCH)}
    assert unreadable == {commits["step1"], commits["delete"]}
    for step in ("step0", "step2"):
        commit = commits[step]
        diff = _git(repo, "show", "--format=commit %H", "--full-index", "--binary", commit)
        expected = subprocess.run(
            ["git", "patch-id", "--stable"], input=diff, capture_output=True, text=True, check=True
        ).stdout.split()[0]
        assert ids[commit] == expected and ids[commit] != EMPTY_PATCH
    assert patch_id_set(Git(repo / ".git"), "main") == {ids[commits["step0"]], ids[commits["step2"]]}


def test_a_pinned_commit_the_repository_lacks_is_unpublished_commit(corpus: Corpus, tmp_path: Path) -> None:
    text = DS4.read_text(encoding="utf-8")
    absent = "f" * 40
    assert subprocess.run(
        ["git", "--git-dir", str(corpus.path("tokenspeed")), "cat-file", "-e", absent]
    ).returncode
    pinned = text.replace(
        "    canonical_branch: main\n", f'    canonical_branch: main\n    commit: "{absent}"\n', 1
    )
    assert pinned != text
    manifest = tmp_path / "ds4-pinned.yaml"
    manifest.write_text(pinned, encoding="utf-8")
    out = _releasekit(
        "plan",
        "check",
        str(manifest),
        "--no-forge",
        "--json",
        *corpus.mirror_args("tokenspeed"),
        cache=tmp_path / "c",
    )
    assert out.returncode == 1, out.stderr
    findings = json.loads(out.stdout)["findings"]
    findings = findings["findings"] if isinstance(findings, dict) else findings
    codes = [(f["code"], f["location"]["commit"]) for f in findings if f["severity"] == "error"]
    assert codes == [("UNPUBLISHED_COMMIT", absent)]


def test_a_release_ref_whose_commit_the_repository_lacks_is_one_line_naming_ref_and_object(
    tmp_path: Path,
) -> None:
    repo, commits = _repo_missing_a_blob(tmp_path)
    ghost = "2" * 40
    (repo / ".git" / "refs" / "heads" / "release").write_text(ghost + "\n")
    out = _releasekit(
        "audit",
        "release-only",
        "--repo",
        str(repo),
        "--release",
        "release",
        "--canonical",
        "main",
        cache=tmp_path / "c",
    )
    assert out.returncode == 2
    (line,) = out.stderr.strip().splitlines()
    assert "'release'" in line and ghost in line and "lacks" in line and "git:" in line, line
    # The same through --mirror: the line names the mirror too.
    bare = tmp_path / "mirror.git"
    shutil.copytree(repo / ".git", bare)
    url = "https://git.example.invalid/org/r"
    out = _releasekit(
        "audit", "release-only", "--repo", url, "--mirror", f"{url}={bare}", "--allow-local-repos",
        "--release", "release", "--canonical", "main", cache=tmp_path / "c2",
    )  # fmt: skip
    assert out.returncode == 2
    (line,) = out.stderr.strip().splitlines()
    assert str(bare) in line and "refs/heads/release" in line and ghost in line, line
    assert "internal error" not in out.stderr


@pytest.mark.parametrize("case", ["not-a-repository", "missing-branch"])
def test_an_unreadable_component_is_one_finding_and_no_crash(
    case: str, corpus: Corpus, tmp_path: Path
) -> None:
    manifest, mirror = DS4, corpus.mirror_args("tokenspeed")
    if case == "not-a-repository":
        (tmp_path / "empty").mkdir()
        mirror = ["--mirror", f"{corpus.url('tokenspeed')}={tmp_path / 'empty'}"]
    else:
        manifest = tmp_path / "ds4-branch.yaml"
        manifest.write_text(
            DS4.read_text(encoding="utf-8").replace("canonical_branch: main", "canonical_branch: gone")
        )
    out = _releasekit("plan", "check", str(manifest), "--no-forge", "--json", *mirror, cache=tmp_path / "c")
    assert out.returncode == 1 and "internal error" not in out.stderr, out.stderr
    findings = json.loads(out.stdout)["findings"]
    findings = findings["findings"] if isinstance(findings, dict) else findings
    errors = [f for f in findings if f["severity"] == "error"]
    assert [(f["code"], f["location"]["component"]) for f in errors] == [
        ("COMPONENT_UNREADABLE", "tokenspeed")
    ]
    assert (
        ("gone" in errors[0]["message"])
        if case == "missing-branch"
        else str(tmp_path / "empty") in errors[0]["message"]
    )
