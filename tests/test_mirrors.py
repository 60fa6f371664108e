"""Mirrors (``--mirror URL=PATH``, ``RELEASEKIT_MIRRORS``), git's own errors, read-only repositories,
every component reported (issue 22).

Real git repositories made here: a forge (the origin) and a bare snapshot of it in which a ref
the plan does not need points at a commit whose blob is gone, as in real mirrors without
their largest blobs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_run import invoke

from tests.forge import Forge

BASE = "example.invalid/mirror-test-base"
PLAIN_ENV = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
PLAIN_ENV.update(
    GIT_CONFIG_NOSYSTEM="1",
    GIT_CONFIG_GLOBAL="/dev/null",
    GIT_AUTHOR_NAME="t",
    GIT_AUTHOR_EMAIL="t@example.invalid",
)
PLAIN_ENV.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid")


def _git(*args: str, cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, env=PLAIN_ENV, capture_output=True, text=True, check=check)


def _manifest(path: Path, repos: dict[str, str], branch: str = "main", prs: tuple[int, ...] = (1,)) -> Path:
    parts = ["schema: releasekit/v1", "name: mirror-test", "components:"]
    for name, repo in repos.items():
        parts += [
            f"  {name}:",
            "    kind: git",
            f"    repo: {repo}",
            f"    canonical_branch: {branch}",
            "    merge_plan:",
            *[f"      - {{pr: {n}, title: PR {n}}}" for n in prs],
        ]
    parts += ["toolchain:", "  base_image:", f"    name: {BASE}", "    digest: to-be-locked"]
    parts += ['  cuda_arch_list: ["12.0a"]', ""]
    path.write_text("\n".join(parts))
    return path


def _listing(root: Path) -> list[tuple[str, int, int, int]]:
    """Every path under root with size, mtime (ns) and mode: what "not written" is compared by."""
    out = []
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        out.append((str(path.relative_to(root)), st.st_size, st.st_mtime_ns, st.st_mode))
    st = root.lstat()
    out.append((".", st.st_size, st.st_mtime_ns, st.st_mode))
    return out


def _make_world(root: Path) -> tuple[Forge, Path, str]:
    """A forge with PR 1 merged, a release branch with a merge commit, an unrelated PR 9; and a bare
    snapshot whose refs/pull/9/head points at a commit with a missing blob. Returns (forge, snapshot, blob)."""
    forge = Forge(root / "origin", "lib")
    forge.init({"README": "lib\n", "src/a.py": "A = 1\n"})
    forge.open_pr(1, [{"src/b.py": "B = 2\n"}])
    forge.merge_pr(1, "merge")
    forge.switch("release", "main")
    forge.commit({"src/release_only.py": "R = 1\n"}, "release-only fix")
    forge.switch("side", "main")
    forge.commit({"src/side.py": "S = 1\n"}, "side work")
    forge.switch("release")
    forge.git("merge", "--quiet", "--no-ff", "-m", "merge side into release", "side")
    forge.push("release")
    forge.switch("main")
    forge.open_pr(9, [{"data/old.bin": "old unrelated data\n"}])
    snapshot = root / "snapshot.git"
    _git("clone", "--quiet", "--mirror", "--no-local", forge.url, str(snapshot))
    # A later push to the unrelated PR, written loose into the snapshot, whose blob is then lost.
    blob = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"],
        cwd=snapshot,
        env=PLAIN_ENV,
        input="a large blob this snapshot does not have\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    tree = subprocess.run(
        ["git", "mktree"],
        cwd=snapshot,
        env=PLAIN_ENV,
        input=f"100644 blob {blob}\tbig.bin\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    head9 = _git("rev-parse", "refs/pull/9/head", cwd=snapshot).stdout.strip()
    commit = _git("commit-tree", tree, "-p", head9, "-m", "big file", cwd=snapshot).stdout.strip()
    # Merged with main on top, so the audit's patch-id walk (not git cherry alone) reads it.
    main = _git("rev-parse", "refs/heads/main", cwd=snapshot).stdout.strip()
    merge = _git(
        "commit-tree", tree, "-p", commit, "-p", main, "-m", "merge main", cwd=snapshot
    ).stdout.strip()
    _git("update-ref", "refs/pull/9/head", merge, cwd=snapshot)
    (snapshot / "objects" / blob[:2] / blob[2:]).unlink()
    return forge, snapshot, blob


@pytest.fixture(scope="module")
def mirror_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mirror-world")
    _make_world(root)
    return root


@pytest.fixture
def mirror_world(mirror_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "mirror_world"
    shutil.copytree(mirror_template, root, symlinks=True)
    monkeypatch.setenv("RELEASEKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("RELEASEKIT_MIRRORS", raising=False)
    return root


def test_lock_through_a_broken_mirror_equals_the_lock_from_origin(mirror_world: Path, tmp_path: Path) -> None:
    origin = mirror_world / "origin" / "lib.git"
    snapshot = mirror_world / "snapshot.git"
    manifest = _manifest(mirror_world / "release.yaml", {"lib": str(origin)})
    local = {"RELEASEKIT_ALLOW_LOCAL_REPOS": "1"}
    r = invoke(
        "plan", "lock", str(manifest), "-o", str(tmp_path / "origin.json"), cwd=mirror_world, env=local
    )
    assert r.returncode == 0, r.stderr
    # What the documented route did: fetching every ref of the snapshot fails on the lost blob.
    probe = tmp_path / "probe.git"
    _git("init", "--quiet", "--bare", str(probe))
    fetched = _git("fetch", "--quiet", str(snapshot), "+refs/*:refs/*", cwd=probe, check=False)
    assert fetched.returncode != 0
    # The origin is gone; the lock comes from the snapshot alone, into a fresh cache.
    origin.rename(mirror_world / "origin" / "gone.git")
    before = _listing(snapshot)
    env = {**local, "RELEASEKIT_CACHE": str(tmp_path / "cache2")}
    out = tmp_path / "mirror.json"
    r = invoke(
        "plan",
        "lock",
        str(manifest),
        "-o",
        str(out),
        "--mirror",
        f"{origin}={snapshot}",
        cwd=mirror_world,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == (tmp_path / "origin.json").read_bytes()
    assert json.loads(out.read_text())["components"]["lib"]["repo"] == origin.as_uri()
    assert _listing(snapshot) == before
    # The root option applies to any command.
    root = tmp_path / "root.json"
    r = invoke(
        "--mirror",
        f"{origin}={snapshot}",
        "plan",
        "lock",
        str(manifest),
        "-o",
        str(root),
        cwd=mirror_world,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    assert root.read_bytes() == out.read_bytes()
    # plan check through the same mirror, given as a RELEASEKIT_MIRRORS file (relative path).
    (mirror_world / "mirrors.txt").write_text(f"# team mirrors\n{origin} = snapshot.git\n")
    env["RELEASEKIT_MIRRORS"] = str(mirror_world / "mirrors.txt")
    r = invoke("plan", "check", str(manifest), "--lock", str(out), "--json", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["passed"] is True
    assert _listing(snapshot) == before
    # The mirror goes away and the origin comes back: the same cache fetches from the origin.
    (mirror_world / "origin" / "gone.git").rename(origin)
    snapshot.rename(mirror_world / "snapshot-moved.git")
    del env["RELEASEKIT_MIRRORS"]
    again = tmp_path / "again.json"
    r = invoke("plan", "lock", str(manifest), "-o", str(again), cwd=mirror_world, env=env)
    assert r.returncode == 0, r.stderr
    assert again.read_bytes() == out.read_bytes()


def test_mirror_option_is_one_line_on_bad_input(mirror_world: Path) -> None:
    manifest = _manifest(mirror_world / "release.yaml", {"lib": "https://git.example.invalid/org/lib.git"})
    r = invoke("plan", "lock", str(manifest), "-o", "x.json", "--mirror", "no-equals-sign", cwd=mirror_world)
    assert (
        r.returncode == 2
        and r.stderr.strip() == "releasekit: error: --mirror expects URL=PATH, got 'no-equals-sign'"
    )
    r = invoke(
        "plan",
        "lock",
        str(manifest),
        "-o",
        "x.json",
        "--mirror",
        f"https://git.example.invalid/org/lib={mirror_world}",
        cwd=mirror_world,
    )
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "is not a git repository" in r.stderr and not (mirror_world / "x.json").exists()
    (mirror_world / "mirrors.txt").write_text("# ok\nhttps://git.example.invalid/org/lib\n")
    env = {"RELEASEKIT_MIRRORS": str(mirror_world / "mirrors.txt")}
    r = invoke("plan", "check", str(manifest), cwd=mirror_world, env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.strip() == (
        f"releasekit: error: {mirror_world / 'mirrors.txt'}:2: expects URL=PATH, got 'https://git.example.invalid/org/lib'"
    )


def test_read_only_repository_comes_out_unchanged(mirror_world: Path, tmp_path: Path) -> None:
    origin = mirror_world / "origin" / "lib.git"
    work = tmp_path / "ro"
    _git("clone", "--quiet", "--no-local", str(origin), str(work))
    _git("checkout", "--quiet", "-b", "release", "origin/release", cwd=work)
    _git("fetch", "--quiet", "origin", "+refs/pull/*/head:refs/pull/*/head", cwd=work)
    # audit pins reads a commit's tree (never the work tree's files): one with a pin input, on a
    # branch of its own so the release-only answer below is unchanged.
    _git("checkout", "--quiet", "-b", "pin-inputs", cwd=work)
    (work / "requirements.txt").write_text("packaging==24.0\n")
    _git("add", "requirements.txt", cwd=work)
    _git(
        "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "--quiet", "-m", "pins", cwd=work
    )
    _git("checkout", "--quiet", "release", cwd=work)
    manifest = _manifest(tmp_path / "release.yaml", {"lib": "https://git.example.invalid/org/lib.git"})
    subprocess.run(["chmod", "-R", "a-w", str(work)], check=True)
    try:
        before = _listing(work)
        r = invoke(
            "audit",
            "release-only",
            "--repo",
            str(work),
            "--release",
            "release",
            "--canonical",
            "main",
            "--json",
            cwd=tmp_path,
        )
        assert r.returncode == 1, r.stdout + r.stderr
        subjects = sorted(c["subject"] for c in json.loads(r.stdout)["release_only"])
        assert subjects == ["release-only fix", "side work"]  # the merge (git merge-tree) adds nothing
        r = invoke(
            "audit", "pins", str(manifest), "--repo", str(work), "--commit", "pin-inputs", cwd=tmp_path
        )
        assert r.returncode == 0, r.stdout + r.stderr
        r = invoke(
            "plan",
            "check",
            str(manifest),
            "--mirror",
            f"https://git.example.invalid/org/lib={work}",
            cwd=tmp_path,
        )
        assert r.returncode == 0, r.stdout + r.stderr
        # The same audit by URL through the mirror: merge-tree runs in the cache, which borrows from it.
        r = invoke(
            "audit",
            "release-only",
            "--repo",
            "https://git.example.invalid/org/lib.git",
            "--mirror",
            f"https://git.example.invalid/org/lib={work}",
            "--release",
            "release",
            "--canonical",
            "main",
            "--json",
            cwd=tmp_path,
        )
        assert r.returncode == 1, r.stdout + r.stderr
        assert sorted(c["subject"] for c in json.loads(r.stdout)["release_only"]) == subjects
        # plan compose merges (PR 9 is open) in a checkout that borrows the repository's objects.
        composing = _manifest(
            tmp_path / "compose.yaml", {"lib": "https://git.example.invalid/org/lib.git"}, prs=(1, 9)
        )
        r = invoke(
            "plan",
            "compose",
            str(composing),
            "--mirror",
            f"https://git.example.invalid/org/lib={work}",
            cwd=tmp_path,
        )
        assert r.returncode == 0 and "merges cleanly" in r.stdout, r.stdout + r.stderr
        assert _listing(work) == before
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(work)], check=True)


def test_git_errors_name_repository_object_and_gits_line(mirror_world: Path, tmp_path: Path) -> None:
    snapshot = mirror_world / "snapshot.git"
    blob = next(
        line.split()[2]
        for line in _git("ls-tree", "refs/pull/9/head^1", cwd=snapshot).stdout.splitlines()
        if line.endswith("big.bin")
    )
    # The release side is the commit whose blob is gone. The release-only audit answers without
    # it: git cherry's changed-path prefilter never reads a blob that no canonical commit's
    # paths could match (the audit reads only what its answer needs).
    r = invoke(
        "audit",
        "release-only",
        "--repo",
        str(snapshot),
        "--release",
        "refs/pull/9/head",
        "--canonical",
        "main",
        "--json",
        cwd=tmp_path,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert "big file" in {c["subject"] for c in json.loads(r.stdout)["release_only"]}
    lost_in = _git("rev-parse", "refs/pull/9/head^1", cwd=snapshot).stdout.strip()
    # The same object needed by a planned PR: plan check says so for that component, exit 1.
    url = "https://git.example.invalid/org/lib.git"
    manifest = _manifest(tmp_path / "p.yaml", {"lib": url}, prs=(9,))
    r = invoke("plan", "check", str(manifest), "--json", "--mirror", f"{url}={snapshot}", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    [finding] = [f for f in json.loads(r.stdout)["findings"]["findings"] if f["severity"] != "info"]
    assert finding["code"] == "COMPONENT_UNREADABLE" and f"fatal: unable to read {blob}" in finding["message"]
    assert "big.bin in commit" in finding["message"] and url in finding["message"]
    assert (
        f"(object {blob[:12]} is big.bin in commit {lost_in[:12]} 'big file'; the mirror lacks it)"
        in (finding["message"])
    )
    # A missing ref: the canonical branch the manifest names.
    manifest = _manifest(
        tmp_path / "m.yaml", {"lib": "https://git.example.invalid/org/lib.git"}, branch="nope"
    )
    r = invoke(
        "plan",
        "lock",
        str(manifest),
        "-o",
        "l.json",
        "--mirror",
        f"https://git.example.invalid/org/lib={snapshot}",
        cwd=tmp_path,
    )
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "releasekit: error: lib: https://git.example.invalid/org/lib.git: no branch 'nope'"
    ]
    # An unreachable URL: git's own fatal: line, credentials stripped.
    manifest = _manifest(tmp_path / "u.yaml", {"lib": "https://u:secret@127.0.0.1:9/x.git"})
    r = invoke("plan", "lock", str(manifest), "-o", "l.json", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    line = r.stderr.strip()
    assert len(line.splitlines()) == 1 and "secret" not in line
    assert "https://127.0.0.1:9/x.git" in line and "fatal: unable to access" in line


def test_every_component_is_reported(mirror_world: Path, tmp_path: Path) -> None:
    origin = mirror_world / "origin" / "lib.git"
    repos = {
        "broken": "https://127.0.0.1:9/broken.git",
        "lib": str(origin),
        "zeta": "https://127.0.0.1:9/zeta.git",
    }
    manifest = _manifest(tmp_path / "m.yaml", repos)
    local = {"RELEASEKIT_ALLOW_LOCAL_REPOS": "1"}
    r = invoke("plan", "check", str(manifest), "--json", cwd=tmp_path, env=local)
    assert r.returncode == 1, r.stdout + r.stderr
    result = json.loads(r.stdout)
    assert [c["component"] for c in result["components"]] == ["lib"]
    assert [
        (f["code"], f["location"]["component"])
        for f in result["findings"]["findings"]
        if f["severity"] != "info"
    ] == [
        ("COMPONENT_UNREADABLE", "broken"),
        ("COMPONENT_UNREADABLE", "zeta"),
    ]
    r = invoke("plan", "lock", str(manifest), "-o", str(tmp_path / "l.json"), cwd=tmp_path, env=local)
    assert r.returncode == 2 and not (tmp_path / "l.json").exists()
    lines = r.stderr.strip().splitlines()
    assert [line.split(":")[2].strip() for line in lines] == ["broken", "zeta"], lines


def test_checkout_and_bundle_through_a_mirror(
    mirror_world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What build and the release archive do with a mirrored repository: a fresh checkout and a bundle."""
    from releasekit.git import create_bundle, fresh_checkout
    from releasekit.git.mirror import Mirror
    from releasekit.git.mirrors import MIRRORS_ENV

    snapshot = mirror_world / "snapshot.git"
    (tmp_path / "mirrors.txt").write_text(f"https://git.example.invalid/org/lib.git={snapshot}\n")
    monkeypatch.setenv(MIRRORS_ENV, str(tmp_path / "mirrors.txt"))
    mirror = Mirror("https://git.example.invalid/org/lib", tmp_path / "cache").update()
    assert mirror.skipped_refs == {}
    head = mirror.branch_head("main")
    checkout = fresh_checkout(mirror, head, tmp_path / "co", expect_tree=mirror.tree_of(head))
    assert (checkout.path / "src" / "b.py").read_text() == "B = 2\n"
    assert checkout.repo == "https://git.example.invalid/org/lib"
    create_bundle(mirror, head, "refs/heads/main", tmp_path / "lib.bundle")
    assert (tmp_path / "lib.bundle").stat().st_size > 0


def test_a_ref_whose_commit_the_mirror_lacks_is_named(mirror_world: Path, tmp_path: Path) -> None:
    snapshot = mirror_world / "snapshot.git"
    tree = _git("rev-parse", "refs/heads/main^{tree}", cwd=snapshot).stdout.strip()
    lost = _git("commit-tree", tree, "-m", "a force-push the snapshot lost", cwd=snapshot).stdout.strip()
    _git("update-ref", "refs/pull/1/head", lost, cwd=snapshot)
    (snapshot / "objects" / lost[:2] / lost[2:]).unlink()
    url = "https://git.example.invalid/org/lib.git"
    manifest = _manifest(tmp_path / "m.yaml", {"lib": url})
    r = invoke("plan", "lock", str(manifest), "-o", "l.json", "--mirror", f"{url}={snapshot}", cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.strip().splitlines() == [
        f"releasekit: error: lib#1: {url} has no refs/pull/1/head (in the mirror {snapshot} refs/pull/1/head"
        f" points at {lost}, an object the mirror does not have); cannot lock the merge plan"
    ]


def test_a_mirror_no_url_of_the_command_matches_is_exit_2_naming_the_nearest(
    mirror_world: Path, tmp_path: Path
) -> None:
    """A mistyped ``--mirror`` (``…/libb``) was ignored and releasekit went to the network: now every
    command that reads the manifest's repositories refuses it before reading any, naming it and the
    manifest's nearest URL. RELEASEKIT_MIRRORS (a shared list of many repositories) is not held to it."""
    url = "https://git.example.invalid/org/lib.git"
    snapshot = mirror_world / "snapshot.git"
    manifest = _manifest(mirror_world / "release.yaml", {"lib": url})
    lock = tmp_path / "lock.json"
    good = f"{url}={snapshot}"
    r = invoke("plan", "lock", str(manifest), "-o", str(lock), "--mirror", good, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    bad = ("--mirror", f"https://git.example.invalid/org/libb={snapshot}")
    commands = {
        "plan lock": ("plan", "lock", str(manifest), "-o", str(tmp_path / "x.json"), *bad),
        "plan check": ("plan", "check", str(manifest), "--lock", str(lock), *bad),
        "plan compose": ("plan", "compose", str(manifest), "--lock", str(lock), *bad),
        "root --mirror": (*bad, "plan", "check", str(manifest)),
        "audit": (
            "audit",
            "release-only",
            "--manifest",
            str(manifest),
            "--release",
            "release",
            "--canonical",
            "main",
            *bad,
        ),
        "audit --json": (
            *("audit", "release-only", "--manifest", str(manifest), "--json"),
            *("--release", "release", "--canonical", "main", *bad),
        ),
        "audit --repo": (
            "audit",
            "release-only",
            "--repo",
            url,
            "--release",
            "release",
            "--canonical",
            "main",
            *bad,
        ),
        "build --plan": ("build", str(manifest), "--lock", str(lock), "--plan", *bad),
        "verify-provenance": (
            "verify-provenance",
            "sha256:" + "1" * 64,
            "--lock",
            str(lock),
            "--manifest",
            str(manifest),
            *bad,
        ),
        "build": ("build", str(manifest), "--lock", str(lock), "-o", str(tmp_path / "rel"), *bad),
    }
    for name, args in commands.items():
        r = invoke(*args, cwd=tmp_path, env={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"})
        assert r.returncode == 2, (name, r.stdout + r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, (name, r.stderr)
        assert "--mirror https://git.example.invalid/org/libb=" in lines[0], (name, r.stderr)
        assert f"the nearest is {url}" in lines[0], (name, r.stderr)
    # The same mirror in a RELEASEKIT_MIRRORS file beside the right one: a shared list, not refused.
    (tmp_path / "mirrors.txt").write_text(f"{good}\nhttps://git.example.invalid/org/other={snapshot}\n")
    r = invoke(
        "plan",
        "check",
        str(manifest),
        "--lock",
        str(lock),
        cwd=tmp_path,
        env={"RELEASEKIT_MIRRORS": str(tmp_path / "mirrors.txt")},
    )
    assert r.returncode == 0, r.stdout + r.stderr
