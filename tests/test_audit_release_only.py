"""audit release-only against real histories, and against git cherry where git cherry is right."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_run import invoke
from forge import Forge
from plan_world import FF, VLLM_PLAN, World
from typer.testing import CliRunner

from releasekit.cli import app
from releasekit.git.runner import Git
from releasekit.plan.release_only import find_release_only


def git_cherry_plus(repo: Path, upstream: str, head: str) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(repo), "cherry", upstream, head], capture_output=True, text=True, check=True
    ).stdout
    return [line[2:] for line in out.splitlines() if line.startswith("+ ")]


@pytest.fixture()
def forge(tmp_path: Path) -> Forge:
    f = Forge(tmp_path / "r", "vllm")
    f.init({"a.py": "A = 0\n", "b.py": "B = 0\n"})
    return f


def _audit(forge: Forge, release: str, canonical: str = "main", **kw):
    return find_release_only(Git(forge.work), forge.rev(release), forge.rev(canonical), repo="test", **kw)


def test_linear_matches_git_cherry(forge: Forge) -> None:
    forge.switch("release", "main")
    picked = forge.commit({"a.py": "A = 1\n"}, "fix a (later cherry-picked)")
    only = forge.commit({"b.py": "B = 1\n"}, "release-only tuning")
    forge.commit({"c.py": "C = 1\n"}, "release-only launcher")
    forge.commit({}, "empty release commit")
    forge.switch("main")
    forge.commit({"d.py": "D = 1\n"}, "canonical work")
    forge.cherry_pick(picked, "main")
    report = _audit(forge, "release")
    expected = git_cherry_plus(forge.work, "main", "release")
    assert [c.commit for c in report.release_only] == expected
    assert only in expected and picked not in expected
    assert report.equivalent == 1 and not report.passed


def test_squash_merged_side_branch_is_canonical(forge: Forge) -> None:
    # Release merged a topic branch with a merge commit; canonical took the same branch as one squash.
    forge.switch("topic", "main")
    forge.commit({"t1.py": "1\n"}, "topic 1")
    forge.commit({"t2.py": "2\n"}, "topic 2")
    forge.switch("release", "main")
    forge.git("merge", "--no-ff", "-m", "merge topic", "topic")
    forge.switch("main")
    forge.git("merge", "--squash", "topic")
    forge.git("commit", "-m", "topic squashed")
    report = _audit(forge, "release")
    assert report.release_only == []
    # git cherry cannot see through the squash: it would report both topic commits.
    assert len(git_cherry_plus(forge.work, "main", "release")) == 2


def test_conflict_resolution_in_a_merge_is_release_only(forge: Forge) -> None:
    forge.switch("side", "main")
    forge.commit({"a.py": "A = 'side'\n"}, "side change")
    forge.switch("release", "main")
    forge.commit({"a.py": "A = 'release'\n"}, "release change")
    proc = subprocess.run(
        ["git", "-C", str(forge.work), "merge", "side"], capture_output=True, env=forge._env()
    )
    assert proc.returncode != 0  # conflict
    (forge.work / "a.py").write_text("A = 'resolved by hand'\n")
    forge.git("add", "a.py")
    forge.git("commit", "--no-edit")
    merge = forge.rev("HEAD")
    # Canonical has both sides' commits (cherry-picked), but not the hand resolution.
    forge.switch("main")
    side_commit = forge.rev("side")
    forge.cherry_pick(side_commit, "main")
    report = _audit(forge, "release")
    kinds = {c.commit: c.kind for c in report.release_only}
    assert kinds.get(merge) == "merge-resolution"
    assert side_commit not in kinds
    # A clean merge adds nothing of its own.
    forge.switch("clean", "main")
    forge.commit({"z.py": "z\n"}, "z")
    forge.switch("release2", "main")
    forge.git("merge", "--no-ff", "-m", "clean merge", "clean")
    forge.switch("main")
    forge.cherry_pick(forge.rev("clean"), "main")
    assert _audit(forge, "release2").release_only == []


def test_seed003_release_commit_reported_and_carried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELEASEKIT_ALLOW_LOCAL_REPOS", "1")
    monkeypatch.setenv("RELEASEKIT_CACHE", str(tmp_path / "cache"))
    world = World(tmp_path / "w")
    world.land_b12x()
    runner = CliRunner()
    args = [
        "audit",
        "release-only",
        "--repo",
        world.vllm.url,
        "--release",
        "release/v17",
        "--canonical",
        FF,
        "--json",
    ]
    r = runner.invoke(app, args)
    assert r.exit_code == 1, r.output
    found = {c["commit"]: c for c in json.loads(r.output)["release_only"]}
    assert set(found) == {world.release_only, world.launcher}
    # With the manifest: #97 carries the release-only commit once it is merged; the launcher stays reported.
    world.land_vllm(VLLM_PLAN)
    manifest = world.write_manifest()
    r = runner.invoke(app, [*args, "--manifest", str(manifest), "--component", "vllm"])
    assert r.exit_code == 1, r.output
    data = json.loads(r.output)
    carried = {c["commit"]: c["carried_by"] for c in data["release_only"]}
    assert carried == {world.release_only: 97, world.launcher: None}
    codes = {f["code"] for f in data["findings"]["findings"]}
    assert codes == {"RELEASE_ONLY_CARRIED", "RELEASE_ONLY_COMMIT"}
    # Once the launcher is canonical too, the release branch has nothing of its own.
    world.vllm.cherry_pick(world.launcher, FF)
    r = runner.invoke(app, [*args, "--manifest", str(manifest), "--component", "vllm"])
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("release", ["--output=x", "nope", "main..HEAD"])
def test_unusable_refs_exit_2_with_one_line(forge: Forge, release: str) -> None:
    r = invoke(
        "audit", "release-only", "--repo", str(forge.work), f"--release={release}", "--canonical", "main"
    )
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_ext_transport_refused_before_git_runs(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    r = invoke(
        "audit",
        "release-only",
        "--repo",
        f"ext::sh -c touch% {marker}",
        "--release",
        "a",
        "--canonical",
        "b",
        "--allow-local-repos",
    )
    assert r.returncode == 2 and "transport" in r.stderr
    assert not marker.exists()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_linear_histories_match_git_cherry(tmp_path: Path, seed: int) -> None:
    import random

    rng = random.Random(seed)
    forge = Forge(tmp_path / "r", "x")
    forge.init({f"f{i}.txt": "0\n" for i in range(6)})
    forge.switch("release", "main")
    release = []
    for k in range(rng.randint(8, 15)):
        path = f"f{rng.randrange(6)}.txt"
        release.append(forge.commit({path: f"release {k}\n", f"new{k}.txt": f"{k}\n"}, f"release {k}"))
    forge.switch("main")
    for k in range(rng.randint(0, 5)):
        forge.commit({f"canon{k}.txt": "c\n"}, f"canonical {k}")
    for sha in release:
        if rng.random() < 0.5:
            proc = subprocess.run(
                ["git", "-C", str(forge.work), "cherry-pick", sha], capture_output=True, env=forge._env()
            )
            if proc.returncode != 0:
                forge.git("cherry-pick", "--abort")
    forge.push("main")
    report = _audit(forge, "release")
    assert [c.commit for c in report.release_only] == git_cherry_plus(forge.work, "main", "release")


def test_repository_config_cannot_run_programs(forge: Forge, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    forge.commit({".gitattributes": "* diff=evil\n"}, "attributes", branch="main")
    forge.switch("release", "main")
    forge.commit({"a.py": "A = 2\n"}, "release change")
    # The repository's own config, written last: releasekit must not run any of it.
    forge.git("config", "diff.evil.textconv", f"sh -c 'touch {marker}; cat' --")
    forge.git("config", "diff.external", f"sh -c 'touch {marker}'")
    forge.git("config", "core.fsmonitor", f"sh -c 'touch {marker}'")
    report = _audit(forge, "release")
    assert len(report.release_only) == 1
    assert not marker.exists()


def test_a_shallow_file_planted_in_the_cached_mirror_changes_nothing(
    forge: Forge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 43: a ``shallow`` file in the mirror cut the history at a release commit, so the commits
    before it were no longer reported. releasekit keeps only shallow roots whose parents are absent."""
    monkeypatch.setenv("RELEASEKIT_ALLOW_LOCAL_REPOS", "1")
    monkeypatch.setenv("RELEASEKIT_CACHE", str(tmp_path / "cache"))
    forge.switch("release", "main")
    first = forge.commit({"b.py": "B = 1\n"}, "release-only tuning")
    second = forge.commit({"c.py": "C = 1\n"}, "release-only launcher")
    forge.switch("main")
    forge.commit({"d.py": "D = 1\n"}, "canonical work")
    forge.push("main", "release")
    args = [
        "audit",
        "release-only",
        "--repo",
        f"file://{forge.url}",
        "--release",
        "release",
        "--canonical",
        "main",
        "--json",
    ]
    before = invoke(*args)
    assert before.returncode == 1, before.stderr
    assert [c["commit"] for c in json.loads(before.stdout)["release_only"]] == [first, second]
    (entry,) = (tmp_path / "cache").rglob("packed-refs")
    (entry.parent / "shallow").write_text(f"{second}\n")
    after = invoke(*args, "--no-fetch")
    assert after.returncode == 1, after.stderr
    assert [c["commit"] for c in json.loads(after.stdout)["release_only"]] == [first, second]


@pytest.mark.parametrize("json_flag", [(), ("--json",)])
def test_an_absent_repo_path_is_no_such_repository_not_the_local_path_hint(
    tmp_path: Path, json_flag: tuple[str, ...]
) -> None:
    """``--repo`` naming no path is "no such repository" (exit 2, one line); a path that is a repository
    is read in place without --allow-local-repos, so the hint would be wrong."""
    absent = tmp_path / "nonexistent"
    r = invoke(
        "audit", "release-only", "--repo", str(absent), "--release", "r", "--canonical", "main", *json_flag
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.strip().splitlines() == [f"releasekit: error: no such repository: {absent}"], r.stderr
    forge = Forge(tmp_path / "r", "x")
    forge.init({"a.txt": "0\n"})
    forge.switch("release", "main")
    forge.commit({"b.txt": "1\n"}, "release only")
    r = invoke(
        "audit",
        "release-only",
        "--repo",
        str(forge.work),
        "--release",
        "release",
        "--canonical",
        "main",
        *json_flag,
    )
    assert r.returncode == 1 and "RELEASE_ONLY_COMMIT" in r.stdout + r.stderr, r.stdout + r.stderr
