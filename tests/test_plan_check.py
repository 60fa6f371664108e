"""plan lock / plan check on the seed-003 scenario, built as real git repositories."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_run import invoke
from forge import Forge
from plan_world import FF, VLLM_PLAN, World, plan_check, plan_lock

from releasekit.manifest import load_manifest
from releasekit.plan.check import PlanCheckOptions
from releasekit.records.lock import read_lock

pytestmark = pytest.mark.usefixtures("local_repos")


def _check(world: World, lock=None, data: dict | None = None):
    loaded = load_manifest(world.write_manifest(data))
    return plan_check(loaded, PlanCheckOptions(lock=lock))


def _codes(result) -> list[tuple[str, str | None, int | None]]:
    found = [(f.code, f.location.component, f.location.pr) for f in result.findings if f.severity == "error"]
    return sorted(found, key=lambda t: (t[0], t[1] or "", t[2] or 0))


def test_planned_order_with_mixed_merge_methods_passes(world: World) -> None:
    world.land_b12x(methods={32: "squash", 35: "rebase"})
    world.land_vllm(VLLM_PLAN, methods={97: "squash", 103: "rebase", 109: "squash"})
    result = _check(world)
    assert _codes(result) == [], [f.render() for f in result.findings]
    assert result.passed
    vllm = next(c for c in result.components if c.component == "vllm")
    by_pr = {s.pr: s for s in vllm.statuses if s.role == "planned"}
    # A one-commit PR squashed is patch-equivalent commit by commit; a two-commit squash needs the combined diff.
    assert by_pr[97].how == "patch-id" and by_pr[109].how == "squash"
    assert by_pr[103].how == "patch-id" and by_pr[108].how == "ancestry"
    positions = [by_pr[n].landed_position for n in VLLM_PLAN]
    assert positions == sorted(positions)
    # The landing commit of a merge-commit PR is the merge itself, on the first-parent line.
    assert (
        by_pr[108].landed_at
        == world.vllm.git("rev-list", "--first-parent", "--merges", "-n1", "--grep", "#108", FF).strip()
    )
    superseded = {s.pr: s.state for s in vllm.statuses if s.role in ("superseded", "closed")}
    assert superseded == {88: "absent", 96: "absent", 105: "absent", 106: "absent", 107: "absent"}


def test_103_before_97_is_out_of_order(world: World) -> None:
    world.land_b12x()
    order = [108, 103, 97, 98, 99, 100, 101, 102, 104, 109]
    world.land_vllm(order)
    result = _check(world)
    assert _codes(result) == [("MERGED_OUT_OF_ORDER", "vllm", 103)]
    assert "'after:' names #97" in next(f.message for f in result.findings if f.code == "MERGED_OUT_OF_ORDER")


def test_109_before_108_is_out_of_order_even_when_squashed(world: World) -> None:
    world.land_b12x()
    order = [109, 108, 97, 103, 98, 99, 100, 101, 102, 104]
    world.land_vllm(order, methods={109: "squash"})
    result = _check(world)
    assert ("MERGED_OUT_OF_ORDER", "vllm", 109) in _codes(result)
    assert {c for c, _, _ in _codes(result)} == {"MERGED_OUT_OF_ORDER"}


def test_cross_component_after_uses_landing_times(world: World) -> None:
    # vLLM #104 must land after b12x#34: land all of vLLM first, then B12X.
    world.land_vllm(VLLM_PLAN)
    world.land_b12x()
    result = _check(world)
    assert _codes(result) == [("AFTER_VIOLATED", "vllm", 104)]


def test_prerequisite_not_merged(world: World) -> None:
    world.land_b12x([28, 32])
    world.land_vllm(VLLM_PLAN)
    codes = _codes(_check(world))
    assert ("AFTER_VIOLATED", "vllm", 104) in codes
    assert ("PR_NOT_MERGED", "b12x", 34) in codes and ("PR_NOT_MERGED", "b12x", 35) in codes


def test_not_merged_and_partially_merged(world: World) -> None:
    world.land_b12x()
    world.land_vllm([108, 97, 98, 99, 100, 101, 102, 104, 109])
    # Only the first commit of #103 cherry-picked onto canonical.
    first = world.vllm.git("rev-list", "--reverse", f"{FF}..{world.vllm.pr_head(103)}").split()[0]
    world.vllm.cherry_pick(first, FF)
    codes = _codes(_check(world))
    assert codes == [("PR_PARTIALLY_MERGED", "vllm", 103)]
    world.vllm.git("reset", "--hard", "HEAD~1")
    world.vllm.push(FF)
    assert _codes(_check(world)) == [("PR_NOT_MERGED", "vllm", 103)]


def test_superseded_and_closed_prs_present(world: World) -> None:
    world.land_b12x()
    world.land_vllm(VLLM_PLAN)
    world.vllm.cherry_pick(world.vllm.pr_head(106), FF)  # a cherry-picked copy counts
    world.vllm.merge_pr(88, "merge")
    world.b12x.merge_pr(33, "squash")
    codes = _codes(_check(world))
    assert ("SUPERSEDED_PR_MERGED", "vllm", 106) in codes
    assert ("CLOSED_PR_MERGED", "vllm", 88) in codes
    assert ("SUPERSEDED_PR_MERGED", "b12x", 33) in codes
    assert ("SUPERSEDED_PR_MERGED", "vllm", 105) not in codes


def test_superseded_commit_carried_inside_superseder_is_not_blamed(world: World) -> None:
    # #109 is rebuilt on top of #105's head (it consolidates it); #105 itself is never merged.
    world.vllm.force_push_pr(109, [{"vllm/pr109_1.py": "X = 1\n"}], start=world.vllm.pr_head(105))
    world.land_b12x()
    world.land_vllm(VLLM_PLAN)
    assert _codes(_check(world)) == []


def test_excluded_change_present(world: World) -> None:
    world.land_b12x()
    world.land_vllm(VLLM_PLAN)
    world.vllm.cherry_pick(world.launcher, FF)
    codes = [c for c in _codes(_check(world))]
    assert codes.count(("EXCLUDED_CHANGE_PRESENT", "vllm", None)) == 2  # path glob and subject pattern


def test_already_canonical_missing(world: World) -> None:
    world.land_b12x()
    world.land_vllm(VLLM_PLAN)
    data = world.manifest()
    data["components"]["vllm"]["already_canonical"].append({"pr": 98, "title": "fine"})
    data["components"]["vllm"]["merge_plan"] = [
        p for p in data["components"]["vllm"]["merge_plan"] if p["pr"] != 98
    ]
    assert _codes(_check(world, data=data)) == []
    world.vllm.open_pr(77, [{"vllm/never.py": "N = 1\n"}])
    data["components"]["vllm"]["already_canonical"].append({"pr": 77, "title": "never merged"})
    assert _codes(_check(world, data=data)) == [("ALREADY_CANONICAL_MISSING", "vllm", 77)]


def test_lock_records_heads_trees_and_detects_moved_head(world: World, tmp_path: Path) -> None:
    world.land_b12x()
    world.land_vllm(VLLM_PLAN)
    path = world.write_manifest()
    loaded = load_manifest(path)
    lock = plan_lock(loaded)
    vllm = lock.git_components()["vllm"]
    assert vllm.commit == world.vllm.remote_rev(f"refs/heads/{FF}")
    assert vllm.tree == world.vllm.tree(vllm.commit)
    assert lock.manifest.sha256 == loaded.sha256
    heads = {p.number: (p.head, p.role) for p in vllm.pull_requests}
    assert heads[103] == (world.vllm.pr_head(103), "planned")
    assert heads[106][1] == "superseded" and heads[88][1] == "closed"
    assert [c.commit for c in vllm.canonical_commits] == [world.tp6]
    assert lock.toolchain.base_image.digest is None and lock.toolchain.base_image.note
    assert plan_check(loaded, PlanCheckOptions(lock=lock)).passed
    world.vllm.force_push_pr(101, [{"vllm/pr101_0.py": "REWRITTEN = 1\n"}])
    result = plan_check(loaded, PlanCheckOptions(lock=lock))
    assert _codes(result) == [("PR_HEAD_MOVED", "vllm", 101)]


def test_unpublished_commit(world: World) -> None:
    world.land_b12x()
    world.land_vllm(VLLM_PLAN)
    local_only = world.vllm.commit({"vllm/local.py": "HACK = 1\n"}, "local hotfix", branch=FF)  # never pushed
    data = world.manifest()
    data["components"]["vllm"]["commit"] = local_only
    assert ("UNPUBLISHED_COMMIT", "vllm", None) in _codes(_check(world, data=data))
    # Pushed to a branch, then the branch is deleted: the mirror has the object but no ref reaches it.
    world.vllm.git("push", "--quiet", "origin", f"{local_only}:refs/heads/tmp")
    path = world.write_manifest(data)
    lock = plan_lock(load_manifest(path))
    world.vllm.delete_remote_ref("refs/heads/tmp")
    result = plan_check(load_manifest(path), PlanCheckOptions(lock=lock))
    assert ("UNPUBLISHED_COMMIT", "vllm", None) in _codes(result)


def test_lock_manifest_mismatch(world: World) -> None:
    world.land_b12x()
    world.land_vllm(VLLM_PLAN)
    lock = plan_lock(load_manifest(world.write_manifest()))
    data = world.manifest(name="other-name")
    codes = _codes(_check(world, lock=lock, data=data))
    assert ("LOCK_MANIFEST_MISMATCH", None, None) in codes


def test_cli_lock_then_check_writes_output(world: World, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from releasekit.cli import app

    world.land_b12x()
    world.land_vllm(VLLM_PLAN)
    path = world.write_manifest()
    runner = CliRunner()
    r = runner.invoke(app, ["plan", "lock", str(path), "-o", str(tmp_path / "lock.json"), "--json"])
    assert r.exit_code == 0, r.output
    assert read_lock(tmp_path / "lock.json").name == "ff-next-test"
    out = tmp_path / "rel" / "plan-check.json"
    r = runner.invoke(
        app, ["plan", "check", str(path), "--lock", str(tmp_path / "lock.json"), "--output", str(out)]
    )
    assert r.exit_code == 0, r.output
    assert "where it landed" in r.output
    written = json.loads(out.read_text())
    assert written["passed"] is True and len(written["lock_sha256"]) == 64
    world.vllm.cherry_pick(world.vllm.pr_head(105), FF)
    r = runner.invoke(app, ["plan", "check", str(path), "--json"])
    assert r.exit_code == 1
    assert "SUPERSEDED_PR_MERGED" in {f["code"] for f in json.loads(r.output)["findings"]["findings"]}


def test_check_folds_in_release_only_and_pins(world: World, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from releasekit.cli import app
    from releasekit.errors import InputError

    world.land_b12x()
    world.land_vllm(VLLM_PLAN)
    locked_inputs = world.vllm.commit(
        {"requirements.txt": "apache-tvm-ffi==0.1.11\n"}, "pin inputs", branch=FF
    )
    world.vllm.push(FF)
    data = world.manifest(pins=[{"package": "apache-tvm-ffi", "version": "0.1.12"}])
    path = world.write_manifest(data)
    lock = tmp_path / "lock.json"
    assert CliRunner().invoke(app, ["plan", "lock", str(path), "-o", str(lock)]).exit_code == 0
    # Canonical moves on and fixes the pin: the lock's commit is what is checked, not the branch.
    world.vllm.commit({"requirements.txt": "apache-tvm-ffi==0.1.12\n"}, "fix the pin", branch=FF)
    world.vllm.push(FF)
    args = ["plan", "check", str(path), "--lock", str(lock), "--release", "vllm=release/v17"]
    r = CliRunner().invoke(app, [*args, "--pins", "vllm", "--json"])
    assert r.exit_code == 1, r.output
    data = json.loads(r.output)
    codes = sorted(
        (f["code"], f["location"]["component"], f["location"]["commit"])
        for f in data["findings"]["findings"]
        if f["severity"] != "info"
    )
    assert codes == [
        ("PIN_MISMATCH", "vllm", None),
        ("RELEASE_ONLY_COMMIT", "vllm", world.launcher),
    ]
    assert data["release_only"][0]["examined"] == 2
    [pins] = data["pins"]
    assert pins["commit"] == locked_inputs and pins["component"] == "vllm"
    assert pins["files"] == ["requirements.txt"] and pins["files_scanned"] == 1
    # --pins-repo: a work tree at another commit than the locked one is refused (exit 2) ...
    clone = tmp_path / "wt"
    subprocess.run(["git", "clone", "-q", "-b", FF, world.vllm.url, str(clone)], check=True)
    r = CliRunner().invoke(app, [*args, "--pins-repo", str(clone), "--json"])
    assert isinstance(r.exception, InputError) and "not at the checked commit" in str(r.exception)
    # ... and so is one at the locked commit with uncommitted changes; a clean one is read.
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", locked_inputs], check=True)
    (clone / "requirements.txt").write_text("apache-tvm-ffi==0.1.12\n")
    r = CliRunner().invoke(app, [*args, "--pins-repo", str(clone), "--json"])
    assert isinstance(r.exception, InputError) and "uncommitted changes" in str(r.exception)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", "--", "requirements.txt"], check=True)
    r = CliRunner().invoke(app, [*args, "--pins-repo", str(clone), "--json"])
    assert r.exit_code == 1 and json.loads(r.output)["pins"][0]["commit"] == locked_inputs


def test_pin_inputs_in_the_manifest_audit_the_checked_commit_without_a_flag(world: World) -> None:
    world.land_b12x()
    world.land_vllm(VLLM_PLAN)
    data = world.manifest(pins=[{"package": "apache-tvm-ffi", "version": "0.1.12"}])
    skip = {"paths": ["/requirements/rocm*.txt"], "reason": "a CUDA image"}
    data["components"]["vllm"]["pin_inputs"] = {"skip": [skip]}
    # No release input in the tree: the pins were checked nowhere, which is an error.
    result = _check(world, data=data)
    assert [(f.code, f.location.component) for f in result.findings if f.code.startswith("PIN")] == [
        ("PINS_NOTHING_SCANNED", "vllm"),
        ("PIN_NOT_FOUND", "vllm"),
    ]
    assert not result.passed and [p.files_scanned for p in result.pins] == [0]
    world.vllm.commit(
        {
            "requirements/cuda.txt": "apache-tvm-ffi==0.1.12\n",
            "requirements/rocm.txt": "fastsafetensors @ git+https://example.com/f.git\n",
        },
        "inputs",
        branch=FF,
    )
    world.vllm.push(FF)
    result = _check(world, data=data)
    assert result.passed, [f.render() for f in result.findings]
    [pins] = result.pins
    assert (pins.component, pins.commit, pins.files) == (
        "vllm",
        world.vllm.rev(FF),
        ["requirements/cuda.txt"],
    )
    assert [(s.file, s.reason) for s in pins.skipped] == [("requirements/rocm.txt", "a CUDA image")]


def test_after_an_already_canonical_pr_and_canonical_advanced(world: World) -> None:
    world.land_b12x()
    data = world.manifest()
    world.vllm.open_pr(90, [{"vllm/pr90.py": "P = 90\n"}])
    data["components"]["vllm"]["already_canonical"].append({"pr": 90, "title": "lands late"})
    data["components"]["vllm"]["merge_plan"][0]["after"] = [90]  # #108 must follow #90
    world.land_vllm(VLLM_PLAN)
    world.vllm.merge_pr(90, "merge")
    assert _codes(_check(world, data=data)) == [("AFTER_VIOLATED", "vllm", 108)]
    lock = plan_lock(load_manifest(world.write_manifest()))
    world.vllm.commit({"vllm/later.py": "L = 1\n"}, "later work", branch=FF)
    world.vllm.push(FF)
    result = _check(world, lock=lock)
    assert result.passed and "CANONICAL_ADVANCED" in result.findings.codes()


def test_remaining_findings_each_when_due(world: World) -> None:
    world.land_b12x()
    world.land_vllm(VLLM_PLAN)
    path = world.write_manifest()
    lock = plan_lock(load_manifest(path))
    # A locked planned PR whose ref disappears: a warning, the locked head is still checked.
    world.vllm.delete_remote_ref("refs/pull/99/head")
    result = plan_check(load_manifest(path), PlanCheckOptions(lock=lock))
    assert result.passed and ("PR_HEAD_GONE", "vllm", 99) in [
        (f.code, f.location.component, f.location.pr) for f in result.findings
    ]
    # Without a lock a planned PR with no ref cannot be checked.
    assert _codes(_check(world)) == [("PR_MISSING", "vllm", 99)]
    data = world.manifest()
    data["components"]["vllm"]["merge_plan"] = [
        p for p in data["components"]["vllm"]["merge_plan"] if p["pr"] != 99
    ]
    # A pin on a published commit that is not on canonical.
    data["components"]["vllm"]["commit"] = world.vllm.pr_head(88)
    codes = _codes(_check(world, data=data))
    assert ("COMMIT_NOT_ON_CANONICAL", "vllm", None) in codes
    del data["components"]["vllm"]["commit"]
    # Exclusions by PR number and by commit (a cherry-picked copy counts); an already-canonical commit absent.
    world.vllm.open_pr(47, [{"vllm/sp_pcie.py": "SP = 1\n"}])
    data["exclusions"].append(
        {
            "id": "sp-pcie",
            "description": "SP/PCIe experiments",
            "reason": "own PR",
            "component": "vllm",
            "pr": 47,
        }
    )
    data["exclusions"].append(
        {
            "id": "kv-tuning",
            "description": "KV headroom",
            "reason": "own PR",
            "commits": [world.launcher[:12]],
        }
    )
    data["components"]["vllm"]["already_canonical"].append(
        {"commit": world.release_only[:10], "title": "not canonical"}
    )
    data["exclusions"][0]["paths"] = []
    data["exclusions"][0]["message_pattern"] = None
    assert _codes(_check(world, data=data)) == [("ALREADY_CANONICAL_MISSING", "vllm", None)]
    # A listed commit that no repository has (a mistyped hash) is said, never skipped.
    data["exclusions"][-1]["commits"].append("0123456789ab")
    found = _check(world, data=data)
    unknown = [f for f in found.findings if f.code == "EXCLUSION_COMMIT_UNKNOWN"]
    assert (
        len(unknown) == 1 and unknown[0].severity == "error"
    )  # disposition excluded: the plan depends on it
    assert "commit 0123456789ab is in no repository it applies to (b12x, vllm)" in unknown[0].message
    assert _codes(found) == [
        ("ALREADY_CANONICAL_MISSING", "vllm", None),
        ("EXCLUSION_COMMIT_UNKNOWN", None, None),
    ]
    data["exclusions"][-1]["commits"].pop()
    world.vllm.merge_pr(47, "squash")
    world.vllm.cherry_pick(world.launcher, FF)
    codes = _codes(_check(world, data=data))
    assert codes.count(("EXCLUDED_CHANGE_PRESENT", "vllm", 47)) == 1
    assert codes.count(("EXCLUDED_CHANGE_PRESENT", "vllm", None)) == 1


def test_an_orphan_pr_head_is_absent(world: World) -> None:
    world.land_b12x()
    world.land_vllm(VLLM_PLAN)
    world.vllm.git("checkout", "--quiet", "--orphan", "orphan")
    world.vllm.git("rm", "-r", "--quiet", "--cached", ".")
    orphan = world.vllm.commit({"unrelated.txt": "x\n"}, "unrelated history")
    world.vllm.git("push", "--quiet", "origin", f"{orphan}:refs/pull/88/head", "--force")
    world.vllm.git("checkout", "--quiet", "-f", FF)
    result = _check(world)
    assert result.passed
    status = next(s for c in result.components for s in c.statuses if s.pr == 88)
    assert status.state == "absent"


def _json_findings(result: dict) -> list[dict]:
    found = result["findings"]
    return found["findings"] if isinstance(found, dict) else found


def _conflicting_repo(root: Path) -> tuple[Path, Forge]:
    """A repository where planned PR #1 changes the line canonical changed since (a conflict in
    app/config.py), #2 adds a file (clean), and #3 is merged; and its manifest."""
    repo = Forge(root / "app", "app")
    repo.init({"app/config.py": "LEVEL = 1\n", "app/other.py": "X = 1\n"})
    repo.open_pr(1, [{"app/config.py": "LEVEL = 2\n", "app/other.py": "X = 2\n"}])
    repo.open_pr(2, [{"app/new.py": "NEW = 1\n"}])
    repo.open_pr(3, [{"app/three.py": "THREE = 1\n"}])
    repo.merge_pr(3)
    repo.commit({"app/config.py": "LEVEL = 3\n"}, "canonical moves on", branch="main")
    repo.push("main")
    manifest = root / "m.json"
    plan = [{"pr": n, "title": f"PR {n}"} for n in (3, 1, 2)]
    component = {"kind": "git", "repo": repo.url, "canonical_branch": "main", "merge_plan": plan}
    toolchain = {"base_image": {"name": "releasekit-test/none", "digest": "sha256:" + "0" * 64}}
    data = {"schema": "releasekit/v1", "name": "conflicts", "components": {"app": component}}
    manifest.write_text(json.dumps({**data, "toolchain": {**toolchain, "cuda_arch_list": ["12.0a"]}}))
    return manifest, repo


def test_a_planned_pr_that_conflicts_with_canonical_is_named_with_the_files(tmp_path: Path) -> None:
    """Issue 44: only `plan compose` said that planned PRs conflict; `plan check` now asks git's
    own merge (`git merge-tree --write-tree`) of the checked commit and each unmerged planned PR."""
    manifest, repo = _conflicting_repo(tmp_path)
    proc = invoke("plan", "check", str(manifest), "--no-forge", "--json")
    assert proc.returncode == 1, proc.stderr
    result = json.loads(proc.stdout)
    errors = sorted(
        (f["code"], f["location"]["pr"]) for f in _json_findings(result) if f["severity"] == "error"
    )
    assert errors == [("PR_CONFLICTS_WITH_CANONICAL", 1), ("PR_NOT_MERGED", 1), ("PR_NOT_MERGED", 2)]
    (conflict,) = [f for f in _json_findings(result) if f["code"] == "PR_CONFLICTS_WITH_CANONICAL"]
    main = repo.remote_rev("refs/heads/main")
    assert conflict["location"]["path"] == "app/config.py"
    assert f"conflicts with main@{main[:12]} in 1 file(s): app/config.py" in conflict["message"]
    assert "app/other.py" not in conflict["message"]  # changed by #1 only: it merges
    statuses = {s["pr"]: s["codes"] for s in result["components"][0]["statuses"]}
    assert sorted(statuses[1]) == ["PR_CONFLICTS_WITH_CANONICAL", "PR_NOT_MERGED"]
    assert statuses[2] == ["PR_NOT_MERGED"]


def test_a_git_too_old_for_merge_tree_says_cannot_tell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git before 2.38 has no `merge-tree --write-tree`: each unmerged planned PR is "cannot tell", never clean."""
    manifest, _repo = _conflicting_repo(tmp_path)
    real = shutil.which("git")
    bindir = tmp_path / "oldgit"
    bindir.mkdir()
    (bindir / "git").write_text(
        # releasekit puts its own -c options first: "version" is the last argument.
        f'#!/bin/sh\nfor a; do last="$a"; done\n'
        f'if [ "$last" = version ]; then echo "git version 2.37.1"; exit 0; fi\nexec {real} "$@"\n'
    )
    (bindir / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    proc = invoke("plan", "check", str(manifest), "--no-forge", "--json")
    assert proc.returncode == 1, proc.stderr
    result = json.loads(proc.stdout)
    unchecked = {
        f["location"]["pr"]: f for f in _json_findings(result) if f["code"] == "PR_CONFLICT_UNCHECKED"
    }
    assert sorted(unchecked) == [1, 2]
    assert "git 2.37.1 is too old: merge-tree --write-tree needs git 2.38 or later" in unchecked[1]["message"]
    assert unchecked[1]["severity"] == "warning"
    assert not [f for f in _json_findings(result) if f["code"] == "PR_CONFLICTS_WITH_CANONICAL"]


def test_a_superseded_pr_whose_ref_is_gone_is_judged_by_its_reviewed_head(tmp_path: Path) -> None:
    """`superseded: [{pr, head}]` names the head that was reviewed: where the forge's refs/pull/N/head
    is gone but the commit is still in the repository, git judges it by that head (a copy on main is
    found); without the head it is `PR_UNKNOWN`, never "absent"."""
    repo = Forge(tmp_path / "app", "app")
    repo.init({"app/config.py": "LEVEL = 1\n"})
    head = repo.open_pr(7, [{"app/draft.py": "DRAFT = 1\n"}])
    repo.push("pr-7")  # the draft's branch stays; its PR ref is deleted below
    repo.delete_remote_ref("refs/pull/7/head")
    repo.open_pr(2, [{"app/two.py": "TWO = 1\n"}])
    repo.merge_pr(2)
    repo.cherry_pick(head, "main")
    repo.push("main")
    entry = {"pr": 2, "title": "two", "supersedes": [7], "superseded": [{"pr": 7, "head": head}]}
    component = {"kind": "git", "repo": repo.url, "canonical_branch": "main", "merge_plan": [entry]}
    toolchain = {"base_image": {"name": "releasekit-test/none", "digest": "sha256:" + "0" * 64}}
    data = {"schema": "releasekit/v1", "name": "reviewed", "components": {"app": component}}
    data["toolchain"] = {**toolchain, "cuda_arch_list": ["12.0a"]}
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps(data))
    result = json.loads(invoke("plan", "check", str(manifest), "--no-forge", "--json").stdout)
    errors = sorted(
        (f["code"], f["location"]["pr"]) for f in _json_findings(result) if f["severity"] == "error"
    )
    assert errors == [("SUPERSEDED_PR_MERGED", 7)]
    del entry["superseded"]
    manifest.write_text(json.dumps(data))
    result = json.loads(invoke("plan", "check", str(manifest), "--no-forge", "--json").stdout)
    errors = sorted(
        (f["code"], f["location"]["pr"]) for f in _json_findings(result) if f["severity"] == "error"
    )
    assert errors == [("PR_UNKNOWN", 7)]
