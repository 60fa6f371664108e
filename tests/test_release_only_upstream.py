"""audit release-only on a fork that follows an upstream: upstream commits are reported once.

The shape of the real vLLM fork's dev/unholy-fusion: the fork's canonical branch started
from upstream's main; a release branch has fork-only commits, merges a newer upstream
main (with a conflict resolved by hand) and has more fork commits after it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from cli_run import invoke
from fork_support import UPSTREAM_COMMITS, Fork

from releasekit.git.runner import Git
from releasekit.plan.release_only import Upstream, find_release_only


@pytest.fixture()
def fork_world(tmp_path: Path) -> Fork:
    return Fork(tmp_path)


def _audit(w: Fork, upstream: bool):
    up = Upstream(w.upstream.url, "main", w.upstream_tip) if upstream else None
    return find_release_only(
        Git(w.fork.work), w.fork.rev("release"), w.fork.rev("main"), repo="fork", upstream=up
    )


def test_upstream_commits_reported_once_fork_commits_one_by_one(fork_world: Fork) -> None:
    report = _audit(fork_world, upstream=True)
    # Grouped by origin: the fork's own commits (oldest first), then the conflict resolution.
    assert [(c.commit, c.kind) for c in report.release_only] == [
        (fork_world.r1, "commit"),
        (fork_world.r2, "commit"),
        (fork_world.r3, "commit"),
        (fork_world.merge, "merge-resolution"),
    ]
    origin = report.upstream
    assert origin is not None and origin.commits == UPSTREAM_COMMITS
    assert origin.commit == fork_world.upstream_tip
    assert origin.canonical_base == fork_world.fork_point  # upstream's main when the fork began
    assert [(e.commit, e.via, e.upstream_commit, e.commits) for e in origin.brought_by] == [
        (fork_world.merge, "merge", fork_world.upstream_tip, UPSTREAM_COMMITS)
    ]
    codes = [(f.code, f.severity.value) for f in report.findings]
    assert codes == [("RELEASE_UPSTREAM_BASE", "warning")] + [("RELEASE_ONLY_COMMIT", "error")] * 4
    assert f"{UPSTREAM_COMMITS} commits" in report.findings.findings[0].message
    assert report.findings.findings[0].location.commit == fork_world.merge
    assert report.examined == 4 + 1 + UPSTREAM_COMMITS and report.equivalent == 1
    reported = {f.location.commit for f in report.findings}
    assert not reported & set(fork_world.upstream_commits)


def test_without_an_upstream_every_upstream_commit_is_release_only(fork_world: Fork) -> None:
    report = _audit(fork_world, upstream=False)
    assert report.upstream is None
    assert set(fork_world.upstream_commits) <= {c.commit for c in report.release_only}
    assert len(report.findings) == 4 + UPSTREAM_COMMITS


def test_a_branch_started_on_a_newer_upstream_is_brought_in_by_its_base(fork_world: Fork) -> None:
    f = fork_world.fork
    f.switch("topic", fork_world.upstream_commits[2])  # started on upstream's third new commit
    topic = f.commit({"t.py": "T = 1\n"}, "topic on newer upstream")
    report = find_release_only(
        Git(f.work),
        f.rev("topic"),
        f.rev("main"),
        repo="fork",
        upstream=Upstream(fork_world.upstream.url, "main", fork_world.upstream_tip),
    )
    assert [c.commit for c in report.release_only] == [topic]
    assert report.upstream is not None
    assert [(e.commit, e.via, e.commits) for e in report.upstream.brought_by] == [(topic, "base", 3)]


def _cli(*args: str, env_cache: Path) -> subprocess.CompletedProcess[str]:
    env = {"RELEASEKIT_CACHE": str(env_cache), "RELEASEKIT_ALLOW_LOCAL_REPOS": "1"}
    return invoke("audit", "release-only", *args, env=env)


def _manifest(tmp_path: Path, fork_world: Fork, upstream_repo: str) -> Path:
    data = {
        "schema": "releasekit/v1",
        "name": "fork",
        "components": {
            "vllm": {
                "kind": "git",
                "repo": f"file://{fork_world.fork.remote}",  # a URL: mirrored (a plain path is read in place)
                "canonical_branch": "main",
                "upstream": {"repo": upstream_repo, "ref": "main"},
            }
        },
        "toolchain": {"base_image": {"name": "x", "digest": "to-be-locked"}, "cuda_arch_list": ["12.0a"]},
    }
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_cli_upstream_from_revision_manifest_mirror_and_remote_tracking(
    fork_world: Fork, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    common = ["--release", "release", "--canonical", "main", "--json"]

    def upstream_of(r: subprocess.CompletedProcess[str]) -> dict:
        assert r.returncode == 1 and r.stderr == "", r.stderr
        data = json.loads(r.stdout)
        assert [c["commit"] for c in data["release_only"]] == [
            fork_world.r1,
            fork_world.r2,
            fork_world.r3,
            fork_world.merge,
        ]
        return data["upstream"]

    # --upstream: a revision of the repository read in place.
    got = upstream_of(
        _cli("--repo", str(fork_world.fork.work), "--upstream", "upstream/main", *common, env_cache=cache)
    )
    assert got["commit"] == fork_world.upstream_tip and got["commits"] == UPSTREAM_COMMITS
    manifest = _manifest(tmp_path, fork_world, fork_world.upstream.url)
    # The manifest's upstream, repository read in place: its remote-tracking branch for that URL.
    got = upstream_of(
        _cli("--repo", str(fork_world.fork.work), "--manifest", str(manifest), *common, env_cache=cache)
    )
    assert (got["repo"], got["commit"]) == (fork_world.upstream.url, fork_world.upstream_tip)
    # The manifest's upstream, component mirrored: fetched into the mirror, the fork's remote untouched.
    before = fork_world.fork.remote_git("for-each-ref")
    got = upstream_of(_cli("--manifest", str(manifest), "--allow-local-repos", *common, env_cache=cache))
    assert got["commit"] == fork_world.upstream_tip
    assert fork_world.fork.remote_git("for-each-ref") == before
    # An upstream that cannot be read: said once, and its commits are judged one by one.
    r = _cli(
        "--repo",
        str(fork_world.fork.work),
        "--manifest",
        str(_manifest(tmp_path, fork_world, str(tmp_path / "nowhere.git"))),
        *common,
        env_cache=cache,
    )
    data = json.loads(r.stdout)
    assert r.returncode == 1 and data["upstream"] is None
    assert data["findings"]["findings"][0]["code"] == "RELEASE_UPSTREAM_UNREAD"
    assert set(fork_world.upstream_commits) <= {c["commit"] for c in data["release_only"]}


def test_plan_check_reads_the_component_upstream_too(fork_world: Fork, tmp_path: Path) -> None:
    import os

    manifest = _manifest(tmp_path, fork_world, fork_world.upstream.url)
    env = {**os.environ, "RELEASEKIT_CACHE": str(tmp_path / "cache"), "RELEASEKIT_ALLOW_LOCAL_REPOS": "1"}
    r = invoke("plan", "check", str(manifest), "--release", "vllm=release", "--json", env=env)
    assert r.returncode == 1, r.stderr
    (report,) = json.loads(r.stdout)["release_only"]
    assert report["upstream"]["commits"] == UPSTREAM_COMMITS
    assert [c["commit"] for c in report["release_only"]] == [
        fork_world.r1,
        fork_world.r2,
        fork_world.r3,
        fork_world.merge,
    ]
    codes = [f["code"] for f in json.loads(r.stdout)["findings"]["findings"]]
    assert codes.count("RELEASE_UPSTREAM_BASE") == 1 and codes.count("RELEASE_ONLY_COMMIT") == 4


def test_the_fork_audit_runs_few_git_processes_and_no_full_patch_ids(
    fork_world: Fork, tmp_path: Path
) -> None:
    # A git on PATH that logs each call and runs the real one: what the CLI asks git for.
    import os
    import shutil

    real = shutil.which("git")
    assert real
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "git-calls"
    (bindir / "git").write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{log}"\nexec {real} "$@"\n')
    (bindir / "git").chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "RELEASEKIT_CACHE": str(tmp_path / "c")}
    args = ["--repo", str(fork_world.fork.work), "--release", "release", "--canonical", "main"]
    r = invoke("audit", "release-only", *args, "--upstream", "upstream/main", "--json", env=env)
    assert r.returncode == 1 and json.loads(r.stdout)["upstream"]["commits"] == UPSTREAM_COMMITS

    def subcommand(line: str) -> str:
        words = line.split()
        i = 0
        while i < len(words) and words[i].startswith("-"):
            i += 2 if words[i] in ("-C", "-c", "--git-dir") else 1
        return words[i] if i < len(words) else ""

    calls = [subcommand(line) for line in log.read_text().splitlines()]
    # log walk, one rev-parse, rev-list, cherry, merge-tree for the upstream merge, merge-base.
    assert sorted(calls) == sorted(["log", "rev-parse", "rev-list", "cherry", "merge-tree", "merge-base"])
    # Without an upstream, the upstream merge's side branch is checked for a squash on canonical:
    # by changed paths first, so no full diff is read when no canonical commit changes those paths.
    log.unlink()
    r = invoke("audit", "release-only", *args, "--json", env=env)
    assert r.returncode == 1 and len(json.loads(r.stdout)["release_only"]) == 4 + UPSTREAM_COMMITS
    calls = [subcommand(line) for line in log.read_text().splitlines()]
    assert "patch-id" not in calls and "diff" in calls
