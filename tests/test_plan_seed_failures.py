"""The seeds' own failures, on repositories made in the test (issue 11): carried and duplicated
commits, a PR that arrived inside another, checkable exclusions, the manifest's release refs."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path

import pytest
import yaml
from forge import Forge
from plan_world import FF, VLLM_PLAN, World, plan_check, plan_lock
from records_support import notes_build_record

from releasekit.findings import Severity
from releasekit.manifest import load_manifest, validate_manifest
from releasekit.plan.check import PlanCheckOptions
from releasekit.records.plan_check import PlanCheckResult

REPO = Path(__file__).resolve().parent.parent
FF_NEXT = REPO / "manifests" / "ff-next.yaml"


pytestmark = pytest.mark.usefixtures("local_repos")


def _check(world: World, data: dict, **kwargs: object) -> PlanCheckResult:
    options = PlanCheckOptions(allow_local=True, **kwargs)  # type: ignore[arg-type]
    return plan_check(load_manifest(world.write_manifest(data)), options)


def _found(result: PlanCheckResult, code: str) -> list:
    return [f for f in result.findings if f.code == code]


def _vllm_status(result: PlanCheckResult, pr: int):
    vllm = next(c for c in result.components if c.component == "vllm")
    return next(s for s in vllm.statuses if s.pr == pr and s.role == "planned")


# --- carries: ------------------------------------------------------------------------------


def test_a_true_carries_downgrades_the_release_only_commit_from_the_manifest_release_ref(
    world: World,
) -> None:
    world.land_b12x()
    world.land_vllm(VLLM_PLAN)
    data = world.manifest()
    data["components"]["vllm"]["release_refs"] = ["release/v17"]
    result = _check(world, data)  # no --release: the manifest names the release ref
    assert [r.release for r in result.release_only] == ["release/v17"]
    carried = _found(result, "RELEASE_ONLY_CARRIED")
    assert [(f.location.commit, f.location.pr, f.severity) for f in carried] == [
        (world.release_only, 97, Severity.info)
    ]
    # The launcher is on the release branch only: found without anyone passing --release.
    assert [f.location.commit for f in _found(result, "RELEASE_ONLY_COMMIT")] == [world.launcher]
    assert not _found(result, "CARRIED_CHANGE_ABSENT") and not _found(result, "CARRIED_COMMIT_MISSING")
    data["components"]["vllm"]["release_refs"] = ["release/v99"]
    missing = _found(_check(world, data), "RELEASE_REF_MISSING")
    assert len(missing) == 1 and missing[0].severity == Severity.error and "release/v99" in missing[0].message


def test_a_false_carries_and_a_missing_carried_commit_are_errors(world: World) -> None:
    # #97 re-written: an adapted change to mtp.py that is not the release-only commit's change.
    world.vllm.force_push_pr(97, [{"vllm/mtp.py": "SYNC = False\nFIXED_WIDTH = True\n"}])
    world.land_b12x()
    world.land_vllm(VLLM_PLAN)
    data = world.manifest()
    data["components"]["vllm"]["release_refs"] = ["release/v17"]
    pr98 = next(p for p in data["components"]["vllm"]["merge_plan"] if p["pr"] == 98)
    pr98["carries"] = ["0123456789abcdef"]  # a commit that does not exist
    result = _check(world, data)
    absent = _found(result, "CARRIED_CHANGE_ABSENT")
    assert [(f.location.pr, f.location.commit, f.severity) for f in absent] == [
        (97, world.release_only, Severity.error)
    ]
    assert "vllm/mtp.py" in absent[0].message
    missing = _found(result, "CARRIED_COMMIT_MISSING")
    assert [(f.location.pr, f.severity) for f in missing] == [
        (98, Severity.error)
    ] and "0123456789abcdef" in missing[0].message
    # A false carries: does not downgrade: the release-only commit stays an error.
    assert not _found(result, "RELEASE_ONLY_CARRIED")
    assert {f.location.commit for f in _found(result, "RELEASE_ONLY_COMMIT")} == {
        world.release_only,
        world.launcher,
    }
    assert not result.passed
    assert "CARRIED_CHANGE_ABSENT" in _vllm_status(result, 97).codes


def test_a_cherry_picked_carried_commit_is_verified_by_its_own_patch_id(world: World) -> None:
    head = world.vllm.force_push_pr(97, [])
    world.vllm.switch("pr-97", head)
    world.vllm.git("cherry-pick", world.release_only)
    world.vllm.git("push", "--quiet", "--force", "origin", "HEAD:refs/pull/97/head")
    world.vllm.switch(FF)
    world.land_b12x()
    world.land_vllm(VLLM_PLAN)
    result = _check(world, world.manifest())
    assert result.passed, [f.render() for f in result.findings]


# --- a duplicated prerequisite commit, a PR that arrived inside another ---------------------


def test_a_duplicated_prerequisite_commit_names_both_prs_and_both_commits(world: World) -> None:
    # #103 (after #97) holds its own copy of #97's commit, as seed 000's #648 held one of #645's.
    pr97 = world.vllm.git("show", "--format=", "--name-only", world.vllm.pr_head(97)).split()
    files = {f: world.vllm.git("show", f"{world.vllm.pr_head(97)}:{f}") for f in pr97}
    world.vllm.force_push_pr(103, [files, {"vllm/pr103_0.py": "A = 1\n"}])
    copy_of_97 = world.vllm.remote_rev("refs/pull/103/head~1")
    result = _check(world, world.manifest())
    dup = _found(result, "DUPLICATED_PREREQUISITE_COMMIT")
    assert len(dup) == 1 and dup[0].severity == Severity.warning
    assert (dup[0].location.pr, dup[0].location.commit) == (103, copy_of_97)
    assert "#103" in dup[0].message and "#97" in dup[0].message
    assert copy_of_97[:12] in dup[0].message and world.vllm.pr_head(97)[:12] in dup[0].message
    # Landed in order, merged twice: still reported (the tree is the same; the record is not).
    world.land_b12x()
    world.land_vllm(VLLM_PLAN)
    landed = _check(world, world.manifest())
    assert [f.location.pr for f in _found(landed, "DUPLICATED_PREREQUISITE_COMMIT")] == [103]
    assert landed.passed


def test_a_pr_that_arrived_inside_a_later_one_is_reported_with_both_named(world: World) -> None:
    # #103 is built on #97; #103 is merged first and #97 never gets its own merge.
    world.vllm.force_push_pr(103, [{"vllm/pr103_0.py": "A = 1\n"}], start=world.vllm.pr_head(97))
    world.land_b12x()
    world.land_vllm([n for n in VLLM_PLAN if n != 97])
    result = _check(world, world.manifest())
    inside = _found(result, "PR_ARRIVED_INSIDE_ANOTHER")
    # A deviation from the plan ("merge #97, then #103"): an error, the check fails.
    assert [(f.location.pr, f.severity) for f in inside] == [(97, Severity.error)]
    assert not result.passed
    assert "#97" in inside[0].message and "inside PR #103" in inside[0].message
    assert "arrived_in: 103" in inside[0].message
    s97, s103 = _vllm_status(result, 97), _vllm_status(result, 103)
    assert (s97.state, s97.arrival, s97.arrived_inside) == ("merged", "inside", 103)
    assert (s103.arrival, s103.arrived_inside) == ("merge", None)
    assert s97.codes == ["PR_ARRIVED_INSIDE_ANOTHER"] and not s97.arrival_acknowledged
    assert not _found(result, "DUPLICATED_PREREQUISITE_COMMIT")  # stacked (the same commits), not duplicated


def test_an_acknowledged_arrival_passes_and_release_notes_say_so(world: World) -> None:
    from releasekit.builder.release_notes import notes_plan

    world.vllm.force_push_pr(103, [{"vllm/pr103_0.py": "A = 1\n"}], start=world.vllm.pr_head(97))
    world.land_b12x()
    world.land_vllm([n for n in VLLM_PLAN if n != 97])
    data = world.manifest()
    plan = data["components"]["vllm"]["merge_plan"]
    next(p for p in plan if p["pr"] == 97)["arrived_in"] = 103
    result = _check(world, data)
    assert result.passed, [f.render() for f in result.findings]
    [ack] = _found(result, "PR_ARRIVAL_ACKNOWLEDGED")
    assert (ack.location.pr, ack.severity) == (97, Severity.info) and "arrived_in: 103" in ack.message
    assert _vllm_status(result, 97).arrival_acknowledged
    loaded = load_manifest(world.write_manifest(data))
    lock = plan_lock(loaded)
    result = plan_check(loaded, PlanCheckOptions(lock=lock, lock_sha256="a" * 64, allow_local=True))
    [line] = [p for p in notes_plan(lock, [], result, "a" * 64).merged if p.number == 97]
    assert "inside #103 (no merge of its own; acknowledged in the manifest: `arrived_in: 103`)" in line.landed
    # An acknowledgement git contradicts is an error: another carrier, or an own merge.
    next(p for p in plan if p["pr"] == 97)["arrived_in"] = 108
    wrong = _check(world, data)
    assert {f.code for f in wrong.findings if f.location.pr == 97} == {
        "PR_ARRIVED_INSIDE_ANOTHER",
        "ARRIVED_IN_CONTRADICTED",
    }
    next(p for p in plan if p["pr"] == 103)["arrived_in"] = 97
    own = _found(_check(world, data), "ARRIVED_IN_CONTRADICTED")
    assert {f.location.pr for f in own} == {97, 103}
    assert any("it arrived by merge" in f.message for f in own if f.location.pr == 103)


def test_arrivals_name_each_way_of_landing(world: World) -> None:
    world.land_b12x()
    world.land_vllm(VLLM_PLAN, methods={97: "squash", 103: "rebase", 109: "squash"})
    result = _check(world, world.manifest())
    arrivals = {n: _vllm_status(result, n).arrival for n in (108, 97, 103, 109)}
    assert arrivals == {108: "merge", 97: "rebase", 103: "rebase", 109: "squash"}
    assert not _found(result, "PR_ARRIVED_INSIDE_ANOTHER")


# --- exclusions ----------------------------------------------------------------------------


def test_every_ff_next_exclusion_is_checkable() -> None:
    loaded = validate_manifest(FF_NEXT)
    assert loaded.manifest.exclusions and all(e.checkable() for e in loaded.manifest.exclusions)
    assert "EXCLUSION_NOT_CHECKABLE" not in loaded.findings.codes()
    upstream = next(e for e in loaded.manifest.exclusions if e.id == "upstream-47979-sp-sm120-pcie").upstream
    assert upstream is not None and (upstream.repo, upstream.pr) == (
        "https://github.com/vllm-project/vllm.git",
        47979,
    )
    assert loaded.manifest.git_components()["vllm"].release_refs == ["release/v17"]


def test_a_required_exclusion_without_recognisers_is_a_warning(tmp_path: Path) -> None:
    data = yaml.safe_load(FF_NEXT.read_text())
    data["exclusions"] = [
        {
            "id": "nothing-to-see",
            "description": "unrecognisable",
            "reason": "r",
            "disposition": "own-pr-required",
        },
        {"id": "later", "description": "unrecognisable", "reason": "r", "disposition": "deferred"},
        {"id": "short-form", "description": "d", "reason": "r", "upstream": "vllm-project/vllm#47979"},
    ]
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(data))
    found = validate_manifest(path).findings
    severities = {f.message.split("'")[1]: f.severity for f in found if f.code == "EXCLUSION_NOT_CHECKABLE"}
    assert severities == {"nothing-to-see": Severity.warning, "later": Severity.info}


def test_planted_excluded_changes_are_found_by_the_ff_next_recognisers(world: World, tmp_path: Path) -> None:
    # Upstream vLLM with PR #47979, in a repository of its own.
    up = Forge(tmp_path / "upstream", "vllm-upstream", default_branch="main")
    up.init({"README": "upstream\n"})
    up.open_pr(47979, [{"vllm/sp_pcie.py": "SEQUENCE_PARALLEL_PCIE = True\n"}], title="Experimental SP")
    sp_commit = up.pr_head(47979)
    world.land_b12x()
    world.land_vllm(VLLM_PLAN)
    data = world.manifest()
    exclusions = copy.deepcopy(yaml.safe_load(FF_NEXT.read_text())["exclusions"])
    for excl in exclusions:
        if "upstream" in excl:
            excl["upstream"]["repo"] = up.url
    data["exclusions"] = exclusions
    clean = _check(world, data)
    assert not _found(clean, "EXCLUDED_CHANGE_PRESENT"), [f.render() for f in clean.findings]
    assert not _found(clean, "EXCLUSION_UPSTREAM_UNREAD")
    # Plant one change of each kind on canonical.
    world.vllm.commit(
        {"vllm/sp_pcie.py": "SEQUENCE_PARALLEL_PCIE = True\n"}, "Bring over an experiment", branch=FF
    )  # = upstream's patch
    world.vllm.commit({"vllm/envelope.py": "GPU_MEM = 0.93\n"}, "Release: raise KV headroom for v17")
    world.vllm.push(FF)
    world.vllm.cherry_pick(world.launcher, FF)  # deploy/launch.sh, "Deployment launcher with NUMA pinning"
    world.vllm.commit({"overlays/attn.py": "PATCHED = True\n"}, "debug helper", branch=FF)
    world.vllm.push(FF)
    result = _check(world, data)
    hits = _found(result, "EXCLUDED_CHANGE_PRESENT")
    by_id: dict[str, list[str]] = {}
    for f in hits:
        by_id.setdefault(f.message.split("'")[1], []).append(f.message)
    assert set(by_id) == {e["id"] for e in exclusions}, by_id
    assert any(sp_commit[:12] in m and "patch-equivalent" in m for m in by_id["upstream-47979-sp-sm120-pcie"])
    assert any("deploy/launch.sh" in m for m in by_id["deployment-launchers"])
    assert any("NUMA pinning" in m for m in by_id["deployment-launchers"])
    assert any("KV headroom" in m for m in by_id["release-kv-headroom-graph-tuning"])
    assert any("overlays/attn.py" in m for m in by_id["docker-ab-overlays"])
    assert not result.passed


def test_a_mistyped_upstream_pr_is_an_error_naming_it(world: World, tmp_path: Path) -> None:
    """Issue 44: an exclusion's upstream PR the upstream repository has no refs/pull/N/head for names
    nothing; the plan depends on an own-pr-required exclusion, so it is an error (a deferred one: a warning)."""
    up = Forge(tmp_path / "upstream", "vllm-upstream", default_branch="main")
    up.init({"README": "upstream\n"})
    up.open_pr(47979, [{"vllm/sp_pcie.py": "SP = True\n"}], title="Experimental SP")
    data = world.manifest()
    data["exclusions"] = [
        {
            "id": f"sp-{disposition}",
            "description": "SP experiments",
            "reason": "own PR",
            "component": "vllm",
            "disposition": disposition,
            "upstream": {"repo": up.url, "pr": 47997},
        }
        for disposition in ("own-pr-required", "deferred")
    ]
    result = _check(world, data)
    unread = {f.message.split("'")[1]: f for f in _found(result, "EXCLUSION_UPSTREAM_UNREAD")}
    assert {k: f.severity for k, f in unread.items()} == {
        "sp-own-pr-required": Severity.error,
        "sp-deferred": Severity.warning,
    }
    message = unread["sp-own-pr-required"].message
    assert "PR #47997" in message and "refs/pull/47997/head" in message and "names nothing there" in message
    assert not result.passed


def test_an_unreachable_upstream_is_a_warning_and_listed_patch_ids_still_count(
    world: World, tmp_path: Path
) -> None:
    world.land_b12x()
    world.land_vllm(VLLM_PLAN)
    planted = world.vllm.commit({"vllm/sp_pcie.py": "SP = 1\n"}, "Something else entirely", branch=FF)
    world.vllm.push(FF)
    patch = world.vllm.git("show", planted)
    out = subprocess.run(
        ["git", "patch-id", "--stable"], input=patch, capture_output=True, text=True, check=True
    ).stdout.split()[0]
    data = world.manifest()
    data["exclusions"] = [
        {
            "id": "sp",
            "description": "SP experiments",
            "reason": "own PR",
            "component": "vllm",
            "upstream": {"repo": str(tmp_path / "no-such-upstream.git"), "pr": 5, "patch_ids": [out]},
        }
    ]
    result = _check(world, data)
    assert [f.severity for f in _found(result, "EXCLUSION_UPSTREAM_UNREAD")] == [Severity.warning]
    hits = _found(result, "EXCLUDED_CHANGE_PRESENT")
    assert len(hits) == 1 and planted[:12] in hits[0].message


# --- release notes ---------------------------------------------------------------------------


def test_release_notes_list_prs_how_they_landed_and_the_release_only_audit(world: World) -> None:
    from releasekit.builder.release_notes import notes_plan, render_release_notes

    world.land_b12x()
    world.land_vllm(VLLM_PLAN, methods={109: "squash"})
    data = world.manifest()
    data["components"]["vllm"]["release_refs"] = ["release/v17"]
    loaded = load_manifest(world.write_manifest(data))
    lock = plan_lock(loaded)
    result = plan_check(loaded, PlanCheckOptions(lock=lock, lock_sha256="a" * 64))
    record = notes_build_record(
        "ff-next-test",
        manifest_sha256=loaded.sha256,
        toolchain=lock.toolchain.model_dump(mode="json", exclude={"base_image"}),
    )
    notes = render_release_notes(record, notes_plan(lock, loaded.manifest.exclusions, result, "a" * 64))
    head108 = world.vllm.pr_head(108)[:12]
    assert f"| vllm | #108 | PR 108 | `{head108}` | planned | own merge at" in notes
    assert "| vllm | #109 | PR 109 |" in notes and "| squash at" in notes
    assert "| vllm | #105 | `" in notes and "| superseded | absent |" in notes
    assert "| closed | absent |" in notes  # #88
    assert "- **launchers** (excluded, vllm): Deployment launchers." in notes
    assert "Plan check: failed." in notes  # the launcher is release-only
    assert (
        f"`{world.release_only[:12]}` Remove fixed-width MTP host sync: carried onto canonical by #97"
        in notes
    )
    assert (
        f"`{world.launcher[:12]}` Deployment launcher with NUMA pinning: **on the release side only**"
        in notes
    )
    # Another lock's plan-check.json is not used; without one the landing is "not checked".
    other = notes_plan(lock, [], result, "f" * 64)
    assert other.plan_check.startswith("plan-check.json is for another lock") and not other.release_only
    bare = render_release_notes(record, notes_plan(lock, [], None, "a" * 64))
    assert (
        "not checked (no plan-check.json)" in bare
        and "No release branch was audited (no plan-check.json" in bare
    )
