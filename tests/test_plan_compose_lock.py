"""plan compose (real merges on a fresh checkout) and the parts of plan lock beyond git."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from cli_run import invoke
from plan_world import FF, VLLM_PLAN, World, plan_lock
from wheels import write_wheel

from releasekit.errors import InputError
from releasekit.manifest import load_manifest
from releasekit.plan.compose import compose_plan

pytestmark = pytest.mark.usefixtures("local_repos")


def test_compose_predicts_the_canonical_tree(world: World) -> None:
    loaded = load_manifest(world.write_manifest())
    before = plan_lock(loaded, compose=True)
    vllm = before.git_components()["vllm"]
    assert vllm.composed_tree and vllm.composed_tree != vllm.tree
    result = compose_plan(loaded, lock=before)
    assert result.passed, [f.render() for f in result.findings]
    comp = next(c for c in result.components if c.component == "vllm")
    assert [s.pr for s in comp.steps] == VLLM_PLAN and {s.result for s in comp.steps} == {"merged"}
    assert comp.matches_lock
    # The forge then lands the plan with merge commits: canonical ends at exactly the composed tree.
    world.land_b12x()
    world.land_vllm(VLLM_PLAN)
    assert world.vllm.tree(FF) == vllm.composed_tree
    after = plan_lock(loaded)
    again = compose_plan(loaded, lock=after, components=["vllm"])
    assert again.passed and {s.result for s in again.components[0].steps} == {"already-contained"}


def test_conflict_names_pr_and_files(world: World) -> None:
    world.vllm.open_pr(110, [{"vllm/pr108_0.py": "# a different fix of the same helper\n"}])
    data = world.manifest()
    data["components"]["vllm"]["merge_plan"].append({"pr": 110, "title": "conflicting"})
    result = compose_plan(load_manifest(world.write_manifest(data)), components=["vllm"])
    assert not result.passed
    conflict = [f for f in result.findings if f.code == "MERGE_CONFLICT"]
    assert len(conflict) == 1 and conflict[0].location.pr == 110 and "vllm/pr108_0.py" in conflict[0].message


def test_tree_mismatch_with_lock(world: World, tmp_path: Path) -> None:
    path = world.write_manifest()
    locked = invoke("plan", "lock", str(path), "-o", str(tmp_path / "lock.json"))
    assert locked.returncode == 0, locked.stderr
    r = invoke(
        "plan", "compose", str(path), "--lock", str(tmp_path / "lock.json"), "--component", "vllm", "--json"
    )
    assert r.returncode == 1, r.stderr
    assert [f["code"] for f in json.loads(r.stdout)["findings"]["findings"]] == ["COMPOSED_TREE_MISMATCH"]


def _wheel(house: Path, dist: str = "apache-tvm-ffi", version: str = "0.1.12") -> str:
    path = write_wheel(house, dist, version)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _wheel_manifest(world: World, sha: str) -> Path:
    data = world.manifest()
    data["components"]["tvm-ffi"] = {"kind": "wheel", "requirement": "apache-tvm-ffi==0.1.12", "sha256": sha}
    return world.write_manifest(data, "wheel.yaml")


def test_wheel_pins_are_hashed_and_checked(world: World, tmp_path: Path) -> None:
    house = tmp_path / "wheels"
    digest = _wheel(house)
    _wheel(house, "other", "1.0")
    lock = plan_lock(load_manifest(_wheel_manifest(world, "to-be-locked")), wheelhouses=[house])
    wheel = lock.wheel_components()["tvm-ffi"]
    assert (wheel.sha256, wheel.filename) == (digest, "apache_tvm_ffi-0.1.12-py3-none-any.whl")
    assert (
        plan_lock(load_manifest(_wheel_manifest(world, digest)), wheelhouses=[house])
        .wheel_components()["tvm-ffi"]
        .sha256
        == digest
    )
    with pytest.raises(InputError, match="the manifest pins"):
        plan_lock(load_manifest(_wheel_manifest(world, "0" * 64)), wheelhouses=[house])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no wheel"):
        plan_lock(load_manifest(_wheel_manifest(world, "to-be-locked")), wheelhouses=[tmp_path / "empty"])


def test_missing_planned_pr_cannot_be_locked(world: World, tmp_path: Path) -> None:
    data = world.manifest()
    data["components"]["vllm"]["merge_plan"].append({"pr": 4242, "title": "does not exist"})
    path = world.write_manifest(data)
    r = invoke("plan", "lock", str(path), "-o", str(tmp_path / "l.json"))
    assert r.returncode == 2 and "refs/pull/4242/head" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "l.json").exists()


def test_local_repos_refused_without_the_option(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RELEASEKIT_ALLOW_LOCAL_REPOS")
    path = world.write_manifest()
    args = ["plan", "lock", str(path), "-o", str(tmp_path / "l.json")]
    r = invoke(*args)
    assert r.returncode == 2 and "allow-local-repos" in r.stderr
    r = invoke(*args, "--allow-local-repos")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize(
    "repo",
    ["ext::sh -c touch% PWNED", "-uhack", "http://example.com/x.git"],
)
def test_unsafe_repos_are_one_line_exit_2(world: World, tmp_path: Path, repo: str) -> None:
    data = world.manifest()
    data["components"]["vllm"]["repo"] = repo
    path = world.write_manifest(data)
    r = invoke("plan", "check", str(path), cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert "secret" not in r.stderr + r.stdout
    assert not (tmp_path / "PWNED").exists()


def test_wheel_source_is_checked_when_reachable(world: World, tmp_path: Path) -> None:
    house = tmp_path / "wheels"
    _wheel(house)
    b12x = world.b12x
    on_master = b12x.remote_rev("refs/heads/master")
    off_master = b12x.pr_head(33)

    def lock_with(source: dict):
        data = world.manifest()
        data["components"]["tvm-ffi"] = {
            "kind": "wheel",
            "requirement": "apache-tvm-ffi==0.1.12",
            "sha256": "to-be-locked",
            "source": source,
        }
        return (
            plan_lock(load_manifest(world.write_manifest(data, "src.yaml")), wheelhouses=[house])
            .wheel_components()["tvm-ffi"]
            .source
        )

    src = lock_with({"repo": b12x.url, "ref": "master", "commit": on_master[:10]})
    assert (src.commit, src.verified) == (on_master, True)
    assert lock_with({"repo": b12x.url, "ref": "master", "commit": "to-be-locked"}).commit == on_master
    with pytest.raises(InputError, match="not on master"):
        lock_with({"repo": b12x.url, "ref": "master", "commit": off_master})
    unreachable = lock_with(
        {
            "repo": "https://127.0.0.1:9/deepseek-ai/DeepGEMM.git",
            "ref": "nv_dev",
            "commit": "a6b593d2826719dcf4892609af7b84ee23aaf32a",
        }
    )
    assert (unreachable.commit, unreachable.verified) == ("a6b593d2826719dcf4892609af7b84ee23aaf32a", False)


def test_compose_says_how_many_planned_prs_merged(world: World, tmp_path: Path) -> None:
    """``composed tree … (matches the lock)`` was all it said, even when no planned PR merged: the line
    names the merged and planned counts and what became of the others."""
    path = world.write_manifest()
    lock = tmp_path / "lock.json"
    assert invoke("plan", "lock", str(path), "-o", str(lock), "--compose").returncode == 0
    r = invoke("plan", "compose", str(path), "--lock", str(lock), "--component", "vllm")
    assert r.returncode == 0, r.stdout + r.stderr
    n = len(VLLM_PLAN)
    assert f"vllm: {n} of {n} planned PRs merged; composed tree " in r.stdout, r.stdout
    world.land_b12x()
    world.land_vllm(VLLM_PLAN)
    assert invoke("plan", "lock", str(path), "-o", str(lock)).returncode == 0
    r = invoke("plan", "compose", str(path), "--lock", str(lock), "--component", "vllm")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"vllm: 0 of {n} planned PRs merged ({n} already on the base); composed tree " in r.stdout, (
        r.stdout
    )
    assert "(matches the lock)" in r.stdout
