"""Every repository through the same door (issue 44): a fork's ``upstream:`` is read through
``--mirror``/``RELEASEKIT_MIRRORS`` as its component is; ``--offline``/``RELEASEKIT_OFFLINE=1``
reads nothing from the network; a mistyped mirror is refused, naming the nearest URL.

The repositories are real and made here (fork_support.Fork: a canonical branch, a release branch
that merged a newer upstream, the upstream). The URLs the manifest names point at 127.0.0.1 on
port 1, where nothing listens: a read that went to the network instead of the mirror fails. The
expected release-only commits are ``git cherry main release upstream/main`` in the fork.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml
from cli_run import invoke
from fork_support import UPSTREAM_COMMITS, Fork

FORK_URL = "https://127.0.0.1:1/lab/vllm.git"
UPSTREAM_URL = "https://127.0.0.1:1/vllm-project/vllm.git"


def _manifest(tmp_path: Path, *, exclusion: bool = False) -> Path:
    data: dict = {
        "schema": "releasekit/v1",
        "name": "fork",
        "components": {
            "vllm": {
                "kind": "git",
                "repo": FORK_URL,
                "canonical_branch": "main",
                "upstream": {"repo": UPSTREAM_URL, "ref": "main"},
            }
        },
        "toolchain": {"base_image": {"name": "x", "digest": "to-be-locked"}, "cuda_arch_list": ["12.0a"]},
    }
    if exclusion:  # an upstream PR the release must not carry, read from the upstream (refs/pull/7/head)
        data["exclusions"] = [
            {"id": "sp", "description": "upstream SP", "reason": "own PR", "component": "vllm"}
            | {"upstream": {"repo": UPSTREAM_URL, "pr": 7}}
        ]
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _cherry_plus(world: Fork) -> set[str]:
    """``git cherry main release upstream/main``: the fork's own commits without an equivalent on main."""
    out = subprocess.run(
        ["git", "-C", str(world.fork.work), "cherry", "main", "release", "upstream/main"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {line[2:] for line in out.splitlines() if line.startswith("+ ")}


def _env(tmp_path: Path, **more: str) -> dict[str, str | None]:
    return {"RELEASEKIT_CACHE": str(tmp_path / "cache"), "RELEASEKIT_OFFLINE": None, **more}


def _audit(manifest: Path, *more: str, env: dict[str, str | None]) -> subprocess.CompletedProcess[str]:
    args = ("--manifest", str(manifest), "--release", "release", "--canonical", "main", "--json")
    return invoke("audit", "release-only", *args, *more, env=env)


def _codes(findings: dict) -> list[str]:
    return [f["code"] for f in findings["findings"]]


def test_a_mirrored_upstream_is_read_through_its_mirror_offline(tmp_path: Path) -> None:
    """The issue's fork: ``--mirror`` for the fork and for its upstream, the manifest's URLs on a
    closed port. audit release-only and plan check read the upstream from its mirror (no
    RELEASE_UPSTREAM_UNREAD) and report the fork's own commits, as git cherry does, and nothing of
    the upstream's; the same with ``--offline`` and with ``RELEASEKIT_OFFLINE=1``."""
    world = Fork(tmp_path / "w")
    manifest = _manifest(tmp_path)
    mirrors = (
        "--mirror",
        f"{FORK_URL}={world.fork.remote}",
        "--mirror",
        f"{UPSTREAM_URL}={world.upstream.remote}",
    )
    expected = _cherry_plus(world)
    assert expected == {world.r1, world.r2, world.r3}
    for extra, env in (
        ((), _env(tmp_path)),
        (("--offline",), _env(tmp_path)),
        ((), _env(tmp_path, RELEASEKIT_OFFLINE="1")),
    ):
        r = _audit(manifest, *mirrors, *extra, env=env)
        assert r.returncode == 1 and r.stderr == "", r.stderr
        audit = json.loads(r.stdout)
        assert "RELEASE_UPSTREAM_UNREAD" not in _codes(audit["findings"]), audit["findings"]
        assert (audit["upstream"]["repo"], audit["upstream"]["commit"]) == (UPSTREAM_URL, world.upstream_tip)
        assert audit["upstream"]["commits"] == UPSTREAM_COMMITS
        own = {c["commit"] for c in audit["release_only"] if c["kind"] == "commit"}
        assert own == expected
        assert not {c["commit"] for c in audit["release_only"]} & set(world.upstream_commits)
        # plan check judges the release ref against the manifest's upstream as the audit does.
        r = invoke(
            "plan", "check", str(manifest), "--release", "vllm=release", "--json", *mirrors, *extra, env=env
        )
        assert r.returncode == 1, r.stdout + r.stderr
        check = json.loads(r.stdout)
        (report,) = check["release_only"]
        assert report["upstream"] == audit["upstream"]
        assert [(c["commit"], c["kind"]) for c in report["release_only"]] == [
            (c["commit"], c["kind"]) for c in audit["release_only"]
        ]
        codes = _codes(check["findings"])
        assert "RELEASE_UPSTREAM_UNREAD" not in codes
        assert codes.count("RELEASE_ONLY_COMMIT") == len(audit["release_only"]) == 4


def test_offline_an_upstream_without_a_mirror_is_one_finding_naming_it(tmp_path: Path) -> None:
    """Offline, the fork mirrored but not its upstream: the upstream is not fetched; one
    RELEASE_UPSTREAM_UNREAD finding names its URL and says offline (not a resolver or connection
    error); plan check the same, and one EXCLUSION_UPSTREAM_UNREAD for the exclusion's upstream PR. The component itself without a mirror: plan check names it in
    COMPONENT_UNREADABLE, and a command without a findings record (plan lock) exits 2 in one line."""
    world = Fork(tmp_path / "w")
    manifest = _manifest(tmp_path, exclusion=True)
    fork_only = ("--mirror", f"{FORK_URL}={world.fork.remote}")
    for r in (
        _audit(manifest, *fork_only, "--offline", env=_env(tmp_path)),
        invoke(
            *("plan", "check", str(manifest), "--release", "vllm=release", "--json", *fork_only, "--offline"),
            env=_env(tmp_path),
        ),
    ):
        assert r.returncode == 1, r.stdout + r.stderr
        data = json.loads(r.stdout)
        unread = [f for f in data["findings"]["findings"] if f["code"] == "RELEASE_UPSTREAM_UNREAD"]
        assert len(unread) == 1, data["findings"]
        assert f"offline: no mirror for {UPSTREAM_URL}" in unread[0]["message"], unread[0]
    # plan check reads the exclusion's upstream PR through the same door: named once, offline.
    (excluded,) = [f for f in data["findings"]["findings"] if f["code"] == "EXCLUSION_UPSTREAM_UNREAD"]
    assert f"offline: no mirror for {UPSTREAM_URL}" in excluded["message"], excluded
    r = invoke("plan", "check", str(manifest), "--json", "--offline", env=_env(tmp_path))
    assert r.returncode == 1, r.stdout + r.stderr
    errors = [f for f in json.loads(r.stdout)["findings"]["findings"] if f["severity"] == "error"]
    (finding,) = errors
    assert (
        finding["code"] == "COMPONENT_UNREADABLE"
        and f"offline: no mirror for {FORK_URL}" in finding["message"]
    )
    lock = ("plan", "lock", str(manifest), "-o", str(tmp_path / "lock.json"))
    for args, env in (
        (lock, _env(tmp_path, RELEASEKIT_OFFLINE="1")),
        (("--offline", *lock), _env(tmp_path)),  # the root command's --offline
        ((*lock, "--offline"), _env(tmp_path)),
    ):
        r = invoke(*args, env=env)
        assert r.returncode == 2 and r.stderr.strip().splitlines() == [
            f"releasekit: error: vllm: offline: no mirror for {FORK_URL} (give --mirror {FORK_URL}=PATH or list it in RELEASEKIT_MIRRORS)"
        ], r.stderr
        assert not (tmp_path / "lock.json").exists()


def test_a_mistyped_mirrors_file_entry_is_exit_2_naming_the_nearest(tmp_path: Path) -> None:
    """``RELEASEKIT_MIRRORS`` naming ``…/vllmm`` for the manifest's ``…/vllm`` (which no mirror
    covers) used to be ignored, and releasekit went to the network: now exit 2, one line naming the
    entry and the URL. An entry for another repository altogether is still no error (a shared list)."""
    world = Fork(tmp_path / "w")
    manifest = _manifest(tmp_path)
    listing = tmp_path / "mirrors.txt"
    listing.write_text(
        f"{FORK_URL.replace('vllm.git', 'vllmm.git')}={world.fork.remote}\n{UPSTREAM_URL}={world.upstream.remote}\n"
    )
    env = _env(tmp_path, RELEASEKIT_MIRRORS=str(listing))
    for r in (
        invoke("plan", "check", str(manifest), "--json", env=env),
        _audit(manifest, env=env),
    ):
        assert r.returncode == 2, r.stdout + r.stderr
        (line,) = r.stderr.strip().splitlines()
        assert "RELEASEKIT_MIRRORS entry https://127.0.0.1:1/lab/vllmm=…" in line, line
        assert f"the nearest is {FORK_URL}, which has no mirror" in line, line
    # Four edits away (…/vllm-old): another repository of a shared list, not a mistype of …/vllm.
    listing.write_text(f"{FORK_URL.replace('vllm.git', 'vllm-old.git')}={world.fork.remote}\n")
    r = _audit(manifest, "--offline", env=env)
    assert r.returncode == 2 and f"offline: no mirror for {FORK_URL}" in r.stderr, r.stderr
    listing.write_text(
        f"{FORK_URL}={world.fork.remote}\n{UPSTREAM_URL}={world.upstream.remote}\n"
        f"https://127.0.0.1:1/other/project={world.fork.remote}\n"
    )
    r = _audit(manifest, env=env)
    assert r.returncode == 1 and r.stderr == "", r.stderr
    assert json.loads(r.stdout)["upstream"]["commits"] == UPSTREAM_COMMITS


def test_a_repository_read_in_place_takes_the_upstream_from_its_mirror(tmp_path: Path) -> None:
    """``audit release-only --repo DIR`` (read in place, never written; here the fork's bare
    repository, which has no remote-tracking branch) with ``--mirror <upstream URL>=PATH``: the
    upstream's commit is read from that mirror (the mirror was accepted, then ignored: the audit said
    RELEASE_UPSTREAM_UNREAD and listed every upstream commit as release-only)."""
    world = Fork(tmp_path / "w")
    manifest = _manifest(tmp_path)
    args = ("--repo", str(world.fork.remote), "--mirror", f"{UPSTREAM_URL}={world.upstream.remote}")
    r = _audit(manifest, *args, "--offline", env=_env(tmp_path))
    assert r.returncode == 1 and r.stderr == "", r.stderr
    audit = json.loads(r.stdout)
    assert "RELEASE_UPSTREAM_UNREAD" not in _codes(audit["findings"]), audit["findings"]
    assert audit["upstream"]["commit"] == world.upstream_tip
    assert {c["commit"] for c in audit["release_only"] if c["kind"] == "commit"} == _cherry_plus(world)
