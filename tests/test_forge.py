"""The forge: plan lock records what GitHub says about every named PR; plan check judges it.

Real git repositories (tests/forge.py), the real githubkit client, and a GitHub-REST-shaped
server on 127.0.0.1 (tests/github_server.py) named by the manifest's ``forge.api_url``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_run import invoke
from forge import Forge
from github_server import PR, GitHubServer
from plan_world import plan_check, plan_lock
from records_support import notes_build_record

from releasekit.errors import EnvironmentProblem
from releasekit.forge import ForgeLocation, locate, token_from_env
from releasekit.manifest import load_manifest
from releasekit.manifest.models import ForgeSpec
from releasekit.plan.check import PlanCheckOptions
from releasekit.plan.forge_read import named_prs
from releasekit.records.lock import Lock, read_lock, write_lock

REPO = Path(__file__).resolve().parent.parent
TOKEN = "ghp_releasekitTestToken0123456789abcdef"
FORGE_CODES = {
    "FORGE_PR_NOT_FOUND",
    "PLANNED_PR_IS_DRAFT",
    "PLANNED_PR_WRONG_BASE",
    "FORGE_HEAD_MOVED",
    "SUPERSEDED_PR_OPEN",
    "CLOSED_PR_OPEN",
    "SUPERSEDED_PR_MERGED_ON_FORGE",
    "CLOSED_PR_MERGED_ON_FORGE",
    "FORGE_MERGE_COMMIT_MISMATCH",
    "CANONICAL_PR_NOT_MERGED_ON_FORGE",
}


@pytest.fixture(autouse=True)
def _env(local_repos: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.delenv("GH_TOKEN", raising=False)


class World:
    """One repository: #3 merged (already canonical), #1 and #2 planned (#2 supersedes #5), #4 closed."""

    def __init__(self, root: Path) -> None:
        self.git = Forge(root, "app")
        self.git.init()
        self.git.open_pr(3, [{"three.py": "3\n"}])
        self.merged3 = self.git.merge_pr(3)
        self.git.open_pr(1, [{"one.py": "1\n"}])
        self.git.open_pr(2, [{"two.py": "2\n"}])
        self.git.open_pr(4, [{"four.py": "4\n"}])
        self.git.open_pr(5, [{"five.py": "5\n"}])
        self.server = GitHubServer(owner="lab", repo="app").start()
        self.honest()

    def honest(self) -> None:
        """The forge agrees with the seed-style facts: planned open non-draft PRs into main, the rest closed."""
        s, g = self.server, self.git
        s.pulls.clear()
        s.add(PR(1, g.pr_head(1), "one"))
        s.add(PR(2, g.pr_head(2), "two"))
        s.add(
            PR(
                3,
                g.pr_head(3),
                "three",
                "closed",
                merged_at="2026-11-02T00:00:00Z",
                merge_commit_sha=self.merged3,
            )
        )
        s.add(PR(4, g.pr_head(4), "four", "closed"))
        s.add(PR(5, g.pr_head(5), "five", "closed"))

    def manifest(self, path: Path, **forge: object) -> Path:
        data = {
            "schema": "releasekit/v1",
            "name": "forge-test",
            "components": {
                "app": {
                    "kind": "git",
                    "repo": self.git.url,
                    "canonical_branch": "main",
                    "forge": {"api_url": self.server.api_url, "repo": "lab/app", **forge},
                    "merge_plan": [
                        {"pr": 1, "title": "one"},
                        {"pr": 2, "title": "two", "supersedes": [5]},
                    ],
                    "already_canonical": [{"pr": 3, "title": "three"}],
                    "closed": [{"pr": 4, "title": "four", "reason": "re-extracted"}],
                }
            },
            "toolchain": {
                "base_image": {"name": "releasekit-test/none", "digest": "sha256:" + "0" * 64},
                "cuda_arch_list": ["12.0a"],
            },
        }
        path.write_text(json.dumps(data, indent=1))
        return path


@pytest.fixture(scope="module")
def forge_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    w = World(tmp_path_factory.mktemp("forge") / "w")
    yield w
    w.server.stop()


@pytest.fixture()
def honest(forge_world: World) -> World:
    forge_world.honest()
    forge_world.server.faults.clear()
    forge_world.server.log.clear()
    forge_world.server.max_per_page = 100
    return forge_world


def _forge_findings(result) -> list[tuple[str, str, int | None]]:
    return sorted((f.code, f.severity.value, f.location.pr) for f in result.findings if f.code in FORGE_CODES)


def test_lock_records_forge_facts_and_a_relock_is_identical_and_costs_no_rate_limit(
    honest: World, tmp_path: Path
) -> None:
    loaded = load_manifest(honest.manifest(tmp_path / "m.yaml"))
    lock = plan_lock(loaded, allow_local=True)
    assert lock.forge is not None
    app = lock.forge.components["app"]
    assert (app.status, app.repo, app.api_url, app.base_branch) == (
        "read",
        "lab/app",
        honest.server.api_url,
        "main",
    )
    by = {p.number: p for p in app.pull_requests}
    assert sorted(by) == [1, 2, 3, 4, 5]
    assert (
        by[5].roles == ["superseded"] and by[4].roles == ["closed"] and by[3].roles == ["already_canonical"]
    )
    assert (by[3].state, by[3].merge_commit_sha, by[3].merged_at) == (
        "merged",
        honest.merged3,
        "2026-11-02T00:00:00Z",
    )
    assert (by[1].state, by[1].draft, by[1].base_ref, by[1].head_sha) == (
        "open",
        False,
        "main",
        honest.git.pr_head(1),
    )
    assert by[4].merge_commit_sha is None and by[1].updated_at == "2026-11-30T10:00:00Z"
    first = tmp_path / "lock1.json"
    write_lock(lock, first)
    assert [s for s in honest.server.statuses()] == [200]  # one page held all five
    honest.server.log.clear()
    # The same forge state, read again: byte-identical forge record, every answer a 304.
    again = plan_lock(loaded, allow_local=True)
    assert again.forge == lock.forge
    assert honest.server.statuses() == [304]
    assert _forge_findings(plan_check(loaded, PlanCheckOptions(lock=lock, allow_local=True))) == []


def test_plan_check_catches_each_forge_fact(honest: World, tmp_path: Path) -> None:
    loaded = load_manifest(honest.manifest(tmp_path / "m.yaml"))
    lock = plan_lock(loaded, allow_local=True)
    honest_result = plan_check(loaded, PlanCheckOptions(lock=lock, allow_local=True))
    assert _forge_findings(honest_result) == []
    assert not [f for f in honest_result.findings if f.code == "FORGE_CHECK_NOT_RUN" and f.location.component]
    s = honest.server
    s.pulls[1].draft = True
    s.pulls[2].base_ref = "release/v17"
    s.pulls[2].head_sha = "f" * 40  # force-pushed on the forge since locking
    s.pulls[3].state, s.pulls[3].merged_at, s.pulls[3].merge_commit_sha = "open", None, None
    s.pulls[4].state, s.pulls[4].merged_at, s.pulls[4].merge_commit_sha = (
        "closed",
        "2026-11-03T00:00:00Z",
        "e" * 40,
    )
    s.pulls[5].state = "open"
    result = plan_check(loaded, PlanCheckOptions(lock=lock, allow_local=True))
    assert _forge_findings(result) == [
        ("CANONICAL_PR_NOT_MERGED_ON_FORGE", "error", 3),
        ("CLOSED_PR_MERGED_ON_FORGE", "error", 4),
        ("FORGE_HEAD_MOVED", "error", 2),
        ("PLANNED_PR_IS_DRAFT", "error", 1),
        ("PLANNED_PR_WRONG_BASE", "error", 2),
        ("SUPERSEDED_PR_OPEN", "error", 5),
    ]
    statuses = {(st.pr, st.role): st.codes for st in result.components[0].statuses}
    assert "PLANNED_PR_IS_DRAFT" in statuses[(1, "planned")]
    # A merged PR whose merge commit git does not have; a closed PR left open.
    honest.honest()
    s.pulls[3].merge_commit_sha = "d" * 40
    s.pulls[4].state = "open"
    result = plan_check(loaded, PlanCheckOptions(lock=lock, allow_local=True))
    assert _forge_findings(result) == [
        ("CLOSED_PR_OPEN", "error", 4),
        ("FORGE_MERGE_COMMIT_MISMATCH", "error", 3),
    ]
    # --no-forge at check time: the lock's record (the honest forge at lock time) is what is judged.
    assert (
        _forge_findings(plan_check(loaded, PlanCheckOptions(lock=lock, allow_local=True, forge=False))) == []
    )


def test_no_forge_records_absence_and_every_check_says_not_run(honest: World, tmp_path: Path) -> None:
    loaded = load_manifest(honest.manifest(tmp_path / "m.yaml"))
    lock = plan_lock(loaded, allow_local=True, forge=False)
    assert honest.server.log == []
    app = lock.forge.components["app"] if lock.forge else None
    assert app is not None and (app.status, app.reason, app.pull_requests) == ("absent", "--no-forge", [])
    result = plan_check(loaded, PlanCheckOptions(lock=lock, allow_local=True, forge=False))
    not_run = [f for f in result.findings if f.code == "FORGE_CHECK_NOT_RUN"]
    assert len(not_run) == 7 and {f.severity.value for f in not_run} == {"info"}
    assert all("--no-forge" in f.message for f in not_run)
    # The planned PRs are open, not merged into git: the only errors are git's own.
    assert {f.code for f in result.findings.errors} == {"PR_NOT_MERGED"}
    strict = plan_check(
        loaded, PlanCheckOptions(lock=lock, allow_local=True, forge=False, require_forge=True)
    )
    assert {f.code for f in strict.findings.errors} == {"PR_NOT_MERGED", "FORGE_CHECK_NOT_RUN"}
    # An unreachable forge is recorded the same way, with why.
    data = json.loads(honest.manifest(tmp_path / "m2.yaml").read_text())
    data["components"]["app"]["forge"]["api_url"] = "http://127.0.0.1:9/api/v3"
    (tmp_path / "m2.yaml").write_text(json.dumps(data))
    lock2 = plan_lock(load_manifest(tmp_path / "m2.yaml"), allow_local=True)
    gone = lock2.forge.components["app"] if lock2.forge else None
    assert gone is not None and gone.status == "absent" and "unreachable" in (gone.reason or "")


def test_offline_the_forge_is_not_asked(honest: World, tmp_path: Path) -> None:
    """``--offline``/``RELEASEKIT_OFFLINE=1`` (issue 44): plan lock and plan check send the forge on
    127.0.0.1 no request; the lock records it absent, saying offline."""
    manifest, lock = honest.manifest(tmp_path / "m.yaml"), tmp_path / "lock.json"
    r = invoke("plan", "lock", str(manifest), "-o", str(lock), "--offline", "--allow-local-repos")
    assert r.returncode == 0, r.stdout + r.stderr
    app = json.loads(lock.read_text())["forge"]["components"]["app"]
    assert app["status"] == "absent" and "offline" in app["reason"], app
    r = invoke(
        "plan",
        "check",
        str(manifest),
        "--lock",
        str(lock),
        "--allow-local-repos",
        env={"RELEASEKIT_OFFLINE": "1"},
    )
    assert r.returncode == 1, r.stdout + r.stderr  # the planned PRs are open: git's own findings
    assert honest.server.log == []


def test_deleted_pr_is_a_finding_and_pages_are_followed(
    honest: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    del honest.server.pulls[5]
    for n in range(6, 12):
        honest.server.add(PR(n, f"{n:040x}"))
    honest.server.max_per_page = 2
    loaded = load_manifest(honest.manifest(tmp_path / "m.yaml"))
    lock = plan_lock(loaded, allow_local=True)
    pages = [e.path for e in honest.server.log if e.path.split("?")[0].endswith("/pulls")]
    assert len(pages) == 5 and "page=5" in pages[-1]  # 11..1 (no 5) by twos, following rel="next"
    assert honest.server.log[-1].status == 404 and honest.server.log[-1].path.endswith("/pulls/5")
    by = {p.number: p for p in lock.forge.components["app"].pull_requests} if lock.forge else {}
    assert by[5].found is False and by[5].state is None
    result = plan_check(loaded, PlanCheckOptions(lock=lock, allow_local=True))
    assert ("FORGE_PR_NOT_FOUND", "warning", 5) in _forge_findings(result)
    # A busy repository: past MAX_PAGES the rest are asked for one by one, with the same result.
    import releasekit.forge.github as github

    monkeypatch.setattr(github, "MAX_PAGES", 2)
    honest.server.log.clear()
    again = plan_lock(loaded, allow_local=True)
    assert [e.path.rsplit("/", 1)[-1] for e in honest.server.log[2:]] == ["1", "2", "3", "4", "5"]
    assert again.forge == lock.forge


def test_a_pr_git_has_no_head_for_is_cannot_tell_when_the_forge_knows_it_else_unknown(
    honest: World, tmp_path: Path
) -> None:
    """Issue 44: a closed PR the forge knows but git has no ref for (#6), and a superseded number
    neither knows (#50, a typo): each is an error naming it, never a state "unknown" with exit 0."""
    honest.server.add(PR(6, "6" * 40, "six", "closed"))
    path = honest.manifest(tmp_path / "m.yaml")
    data = json.loads(path.read_text())
    app = data["components"]["app"]
    app["merge_plan"][1]["supersedes"] = [5, 50]
    app["closed"].append({"pr": 6, "title": "six", "reason": "its ref is gone from the remote"})
    path.write_text(json.dumps(data))
    result = plan_check(load_manifest(path), PlanCheckOptions(allow_local=True))
    named = {
        (f.code, f.severity.value, f.location.pr): f.message
        for f in result.findings
        if f.code in ("PR_UNKNOWN", "PR_CANNOT_TELL")
    }
    assert sorted(named) == [("PR_CANNOT_TELL", "error", 6), ("PR_UNKNOWN", "error", 50)]
    assert "cannot tell whether closed PR #6 is on main" in named[("PR_CANNOT_TELL", "error", 6)]
    assert (
        "the forge knows it: closed, head 666666666666, not in the mirror"
        in named[("PR_CANNOT_TELL", "error", 6)]
    )
    assert "answers 404 for it" in named[("PR_UNKNOWN", "error", 50)]
    assert "(in the supersedes of #2)" in named[("PR_UNKNOWN", "error", 50)]
    assert not result.passed
    statuses = {(st.pr, st.role): (st.state, st.codes) for st in result.components[0].statuses}
    assert statuses[(6, "closed")] == ("unknown", ["PR_CANNOT_TELL"])
    assert statuses[(50, "superseded")] == ("unknown", ["PR_UNKNOWN"])


def test_5xx_is_retried_and_a_short_rate_limit_is_waited_out(
    honest: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded = load_manifest(honest.manifest(tmp_path / "m.yaml"))
    honest.server.fail_next(502)
    honest.server.rate_limit_for(0)
    honest.server.fail_next(429, {"retry-after": "1"})  # a secondary rate limit
    monkeypatch.setenv("RELEASEKIT_FORGE_MAX_WAIT", "5")
    lock = plan_lock(loaded, allow_local=True)
    assert honest.server.statuses() == [502, 403, 429, 200]
    assert lock.forge is not None and lock.forge.components["app"].status == "read"
    honest.server.rate_limit_for(3600)
    monkeypatch.setenv("RELEASEKIT_FORGE_MAX_WAIT", "1")
    with pytest.raises(EnvironmentProblem, match=r"rate limit exhausted, resets in \d+ s, more than the 1 s"):
        plan_lock(loaded, allow_local=True)


def test_the_token_reaches_the_forge_and_nothing_else(honest: World, tmp_path: Path) -> None:
    manifest = honest.manifest(tmp_path / "m.yaml")
    cache = tmp_path / "cli-cache"
    env = {**os.environ, "GITHUB_TOKEN": TOKEN, "RELEASEKIT_CACHE": str(cache), "PYTHONPATH": str(REPO)}
    lock_path, check_path = tmp_path / "lock.json", tmp_path / "check.json"
    locked = invoke(
        "plan", "lock", str(manifest), "-o", str(lock_path), "--allow-local-repos", "--json", env=env
    )
    assert locked.returncode == 0, locked.stderr
    assert json.loads(locked.stdout)["forge"] == {"app": "read"}
    honest.server.pulls[1].draft = True
    checked = invoke(
        "plan", "check", str(manifest), "--lock", str(lock_path), "--output", str(check_path),
        "--allow-local-repos", "--json", env=env,
    )  # fmt: skip
    assert checked.returncode == 1 and "PLANNED_PR_IS_DRAFT" in checked.stdout
    honest.server.rate_limit_for(3600)
    failed = invoke(
        "plan", "lock", str(manifest), "-o", str(tmp_path / "l2.json"), "--allow-local-repos",
        env={**env, "RELEASEKIT_FORGE_MAX_WAIT": "0"},
    )  # fmt: skip
    assert failed.returncode == 2 and len(failed.stderr.strip().splitlines()) == 1, failed.stderr
    # It was sent: every request carried it ...
    assert {e.authorization for e in honest.server.log} == {f"token {TOKEN}"}
    # ... and it is nowhere else: output, errors, the lock, the check record, any cached file.
    texts = [locked.stdout, locked.stderr, checked.stdout, checked.stderr, failed.stdout, failed.stderr]
    texts += [lock_path.read_text(), check_path.read_text()]
    cached = [p for p in cache.rglob("*") if p.is_file()]
    assert any(p.parent.name == "forge" for p in cached)
    texts += [p.read_bytes().decode("utf-8", "replace") for p in cached]
    assert not [t for t in texts if TOKEN in t or TOKEN[4:20] in t]


def test_the_seed_manifests_name_the_forge_facts() -> None:
    ff = load_manifest(REPO / "manifests" / "ff-next.yaml")
    vllm, b12x = ff.manifest.git_components()["vllm"], ff.manifest.git_components()["b12x"]
    assert vllm.forge is not None and vllm.forge.base_branch == "dev/fathomless-firmament"
    assert b12x.forge is not None and b12x.forge.base_branch == "master"
    roles = named_prs("vllm", vllm, ff)
    assert {n for n, r in roles.items() if r == ["planned"]} == {
        97,
        98,
        99,
        100,
        101,
        102,
        103,
        104,
        108,
        109,
    }
    assert roles[88] == ["closed"] and roles[95] == ["already_canonical"]
    assert all(roles[n] == ["superseded"] for n in (96, 105, 106, 107))
    assert named_prs("b12x", b12x, ff)[33] == ["superseded"]
    ds4 = load_manifest(REPO / "manifests" / "ds4-sm120.yaml")
    ts = ds4.manifest.git_components()["tokenspeed"]
    assert ts.forge is not None and ts.forge.base_branch == "main"
    assert named_prs("tokenspeed", ts, ds4) == {
        644: ["already_canonical"], 645: ["planned"], 646: ["already_canonical"], 648: ["planned"], 660: ["planned"]
    }  # fmt: skip


def test_a_lock_without_forge_data_still_reads(tmp_path: Path, honest: World) -> None:
    loaded = load_manifest(honest.manifest(tmp_path / "m.yaml"))
    lock = plan_lock(loaded, allow_local=True, forge=False)
    data = lock.model_dump(mode="json", by_alias=True)
    del data["forge"]
    (tmp_path / "old.json").write_text(json.dumps(data))
    assert isinstance(read_lock(tmp_path / "old.json"), Lock)


def test_release_notes_show_the_forge_state(honest: World, tmp_path: Path) -> None:
    from releasekit.builder.release_notes import notes_plan, render_release_notes

    honest.server.pulls[1].draft = True
    loaded = load_manifest(honest.manifest(tmp_path / "m.yaml"))
    lock = plan_lock(loaded, allow_local=True)
    record = notes_build_record(
        "forge-test",
        manifest_sha256=loaded.sha256,
        toolchain=lock.toolchain.model_dump(mode="json", exclude={"base_image"}),
    )
    notes = render_release_notes(record, notes_plan(lock, [], None, "a" * 64))
    assert "| planned | not checked (no plan-check.json) | open, draft, into main | - |" in notes
    assert (
        f"| already_canonical | not checked (no plan-check.json) | merged, into main, as `{honest.merged3[:12]}` |"
        in notes
    )
    assert "| closed | not checked (no plan-check.json) | closed, into main |" in notes
    offline = render_release_notes(
        record, notes_plan(plan_lock(loaded, allow_local=True, forge=False), [], None, "a" * 64)
    )
    assert "| planned | not checked (no plan-check.json) | not read (--no-forge) | - |" in offline


def test_where_the_forge_is_and_whose_token(monkeypatch: pytest.MonkeyPatch) -> None:
    api = "https://api.github.com"
    assert locate("https://github.com/local-inference-lab/vllm.git") == ForgeLocation(
        api, "local-inference-lab", "vllm"
    )
    assert locate("git@github.com:lightseekorg/tokenspeed.git") == ForgeLocation(
        api, "lightseekorg", "tokenspeed"
    )
    ghe = "https://ghe.example.com/api/v3"
    assert locate("https://ghe.example.com/lab/b12x.git", ghe, "lab/b12x") == ForgeLocation(
        ghe, "lab", "b12x"
    )
    assert locate("https://ghe.example.com/lab/b12x.git") is None  # not github.com, no forge: block
    assert locate("/srv/mirrors/vllm.git") is None
    assert token_from_env() is None
    with pytest.raises(ValueError, match="api_url must be https://"):
        ForgeSpec(api_url="http://ghe.example.com/api/v3")  # the token would travel in clear
    monkeypatch.setenv("GH_TOKEN", "from-gh")
    assert token_from_env() == "from-gh"
    monkeypatch.setenv("GITHUB_TOKEN", "from-github")
    assert token_from_env() == "from-github"


def test_each_seed_003_forge_fact_is_caught(tmp_path: Path) -> None:
    """The seed-003 forge_world (tests/plan_world.py) with the real ff-next.yaml's forge facts, and a
    forge that breaks each sentence of the seed in turn."""
    from plan_world import FF
    from plan_world import World as SeedWorld

    real = load_manifest(REPO / "manifests" / "ff-next.yaml")
    forge_world = SeedWorld(tmp_path / "w")
    data = forge_world.manifest()
    servers: dict[str, GitHubServer] = {}
    for name in ("vllm", "b12x"):
        spec = real.manifest.git_components()[name]
        owner, repo = spec.repo.removeprefix("https://github.com/").removesuffix(".git").split("/")
        server = servers[name] = GitHubServer(owner=owner, repo=repo).start()
        assert spec.forge is not None
        data["components"][name]["forge"] = {
            **spec.forge.model_dump(exclude_none=True),
            "api_url": server.api_url,
            "repo": f"{owner}/{repo}",
        }
    loaded = load_manifest(forge_world.write_manifest(data))
    for name in ("vllm", "b12x"):  # the test manifest names the PRs the real one does, in the same roles
        assert named_prs(name, loaded.manifest.git_components()[name], loaded) == named_prs(
            name, real.manifest.git_components()[name], real
        )
    vllm, b12x = servers["vllm"], servers["b12x"]

    def merge_of(git: Forge, branch: str, n: int) -> str:
        return git.git("rev-list", "--first-parent", "--merges", "-n1", "--grep", f"#{n}$", branch).strip()

    def honest() -> None:
        for server, git, base, plan in (
            (vllm, forge_world.vllm, FF, [*range(97, 110), 88]),
            (b12x, forge_world.b12x, "master", [28, 32, 33, 34, 35]),
        ):
            server.pulls.clear()
            for n in plan:
                state = "open" if n in (*range(97, 105), 108, 109, 28, 32, 34, 35) else "closed"
                server.add(PR(n, git.pr_head(n), f"PR {n}", state, base_ref=base))
        vllm.add(PR(96, forge_world.vllm.pr_head(96), "TP6 (old)", "closed", base_ref=FF))
        vllm.add(
            PR(
                95,
                forge_world.vllm.pr_head(95),
                "NVFP4 MLA",
                "closed",
                False,
                FF,
                "2026-11-01T00:00:00Z",
                merge_of(forge_world.vllm, FF, 95),
            )
        )
        b12x.add(
            PR(
                31,
                forge_world.b12x.pr_head(31),
                "NF3",
                "closed",
                False,
                "master",
                "2026-11-01T00:00:00Z",
                merge_of(forge_world.b12x, "master", 31),
            )
        )

    honest()
    lock = plan_lock(loaded)
    assert {c.status for c in (lock.forge.components.values() if lock.forge else [])} == {"read"}
    assert _forge_findings(plan_check(loaded, PlanCheckOptions(lock=lock))) == []
    vllm.pulls[104].draft = True  # "All PRs below are non-draft ..."
    vllm.pulls[103].base_ref = "release/v17"  # "... and target dev/fathomless-firmament directly"
    b12x.pulls[33].state = "open"  # "Draft B12X PR #33 is superseded by #35 and must not be merged"
    b12x.pulls[33].draft = True
    vllm.pulls[106].state = "open"  # "#109 supersedes and closes #105, #106, and #107"
    vllm.pulls[107].merged_at, vllm.pulls[107].merge_commit_sha = "2026-11-05T00:00:00Z", "7" * 40
    vllm.pulls[88].state = "open"  # "The previous mixed #88 integration branch also remains closed"
    vllm.pulls[96].merged_at, vllm.pulls[96].merge_commit_sha = (
        "2026-11-05T00:00:00Z",
        "9" * 40,
    )  # "closed #96 is superseded"
    vllm.pulls[95].merged_at = None  # "vLLM #95 ... is already merged"
    b12x.pulls[31].merge_commit_sha = "3" * 40  # "#31 is already merged" (but not the commit git shows)
    vllm.pulls[108].head_sha = "8" * 40  # seed 000: the heads qualified must still be the heads under review
    found = plan_check(loaded, PlanCheckOptions(lock=lock))
    by_component = sorted(
        (f.location.component or "", code, pr)
        for code, _, pr in _forge_findings(found)
        for f in found.findings
        if f.code == code and f.location.pr == pr
    )
    assert by_component == [
        ("b12x", "FORGE_MERGE_COMMIT_MISMATCH", 31),
        ("b12x", "SUPERSEDED_PR_OPEN", 33),
        ("vllm", "CANONICAL_PR_NOT_MERGED_ON_FORGE", 95),
        ("vllm", "CLOSED_PR_OPEN", 88),
        ("vllm", "FORGE_HEAD_MOVED", 108),
        ("vllm", "PLANNED_PR_IS_DRAFT", 104),
        ("vllm", "PLANNED_PR_WRONG_BASE", 103),
        ("vllm", "SUPERSEDED_PR_MERGED_ON_FORGE", 96),
        ("vllm", "SUPERSEDED_PR_MERGED_ON_FORGE", 107),
        ("vllm", "SUPERSEDED_PR_OPEN", 106),
    ]
    for server in servers.values():
        server.stop()


def test_every_forge_check_extends_forge_check_and_keeps_only_its_own_judgement() -> None:
    # The scope/not-run opening is ForgeCheck's alone: a forge check that writes its own run() would
    # let the forge checks drift apart on how "not run" is reported.
    import importlib
    import pkgutil

    import releasekit.plan.checks as plan_checks
    from releasekit.plan.checks.forge_scope import NOT_RUN, ForgeCheck

    modules = [m.name for m in pkgutil.iter_modules(plan_checks.__path__) if m.name.startswith("forge_")]
    found = []
    for name in modules:
        module = importlib.import_module(f"releasekit.plan.checks.{name}")
        for obj in vars(module).values():
            own = isinstance(obj, type) and obj.__module__ == module.__name__
            if own and obj is not ForgeCheck and hasattr(obj, "codes"):
                found.append(obj)
                assert issubclass(obj, ForgeCheck), obj
                assert "run" not in vars(obj), f"{obj.__name__} writes its own run()"
                assert obj.roles and NOT_RUN in obj.codes, obj
    assert len(found) == 7


def test_a_redirect_to_another_origin_is_refused_and_one_on_the_forge_is_followed(
    honest: World, tmp_path: Path
) -> None:
    """A forge that answers 301 to another origin would have its answer taken from there (httpx drops
    the token, but reads the foreign answer as the forge's): refused, one line. A renamed repository's
    301 on the forge itself is still followed."""
    loaded = load_manifest(honest.manifest(tmp_path / "m.yaml"))
    elsewhere = GitHubServer(owner="lab", repo="app").start()
    try:
        for pr in honest.server.pulls.values():  # the same PRs, every one "merged" there
            elsewhere.add(PR(pr.number, pr.head_sha, pr.title, "closed", merged_at="2026-11-03T00:00:00Z"))
        honest.server.fail_next(301, {"location": f"{elsewhere.api_url}/repos/lab/app/pulls?state=all"})
        with pytest.raises(
            EnvironmentProblem, match=r"sent to another origin \(http://127\.0\.0\.1:\d+\); refused"
        ):
            plan_lock(loaded, allow_local=True)
        assert elsewhere.log == []
        honest.server.log.clear()
        honest.server.fail_next(
            301, {"location": f"{honest.server.api_url}/repos/lab/app/pulls?state=all&per_page=100"}
        )
        lock = plan_lock(loaded, allow_local=True)
        assert honest.server.statuses()[:2] == [301, 200]
        assert lock.forge is not None and lock.forge.components["app"].status == "read"
    finally:
        elsewhere.stop()
