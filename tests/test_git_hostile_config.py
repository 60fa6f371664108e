"""Git never reads configuration anyone else could write (issue 34, item 1).

A mirror that ``build`` left in ``$RELEASEKIT_CACHE/git`` and a ``--mirror`` copy are written
by whoever can write there. Here every configuration key git documents as running a program
is planted in both (and, through ``include.path``, in a file the config includes), each
program writing a marker file; hooks are installed (``core.hooksPath`` and the repository's own
``hooks/``); ``info/attributes`` names diff, filter and merge drivers; the cache borrows from an
attacker's object directory (one entry in ``objects/info/alternates``) and has lost the objects
the lock names, so reading it fetches (the ``core.alternateRefsCommand`` chain of the issue).
Then every command that runs git reads them: ``plan lock``, ``plan check``, ``audit pins``,
``audit release-only``, and the git work of ``build``, ``verify-provenance`` and ``reproduce``
(a fresh checkout of the locked commit, its objects hashed, a bundle made and read back). No
marker may exist afterwards, and every answer must be the one a clean repository gives.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cli_run import invoke, run_cli

from tests.forge import Forge

URL = "https://git.example.invalid/org/lib.git"
PLAIN_ENV = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
PLAIN_ENV.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null")

# Hooks git runs somewhere in fetch, checkout, merge, commit, gc and ref updates.
HOOKS = (
    "pre-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "post-checkout",
    "post-merge",
    "pre-merge-commit",
    "reference-transaction",
    "pre-auto-gc",
    "post-rewrite",
    "pre-push",
    "push-to-checkout",
    "fsmonitor-watchman",
)


def _git(*args: str, cwd: Path | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, env=PLAIN_ENV, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _program(bin_dir: Path, marks: Path, name: str) -> str:
    """An executable that records that git ran it (and fails, so git cannot go on quietly)."""
    path = bin_dir / name
    path.write_text(f'#!/bin/sh\necho "$0 $*" >> "{marks}/{name}"\nexit 1\n')
    path.chmod(0o755)
    return str(path)


def _plant(gitdir: Path, root: Path, label: str, *, alternate: Path | None = None, bare: bool = True) -> None:
    """Every program-running key into ``gitdir``'s config (some through include.path), hooks, attributes."""
    marks = root / "marks"
    bin_dir = root / f"bin-{label}"
    bin_dir.mkdir()
    marks.mkdir(exist_ok=True)

    def prog(key: str) -> str:
        return _program(bin_dir, marks, f"{label}.{key}")

    hooks = root / f"hooks-{label}"
    hooks.mkdir()
    for hook in HOOKS:
        for place in (hooks, gitdir / "hooks"):
            place.mkdir(exist_ok=True)
            shutil.copy(prog(f"hook-{hook}"), place / hook)
    included = root / f"included-{label}.cfg"
    included.write_text(
        "[core]\n"
        f"\teditor = {prog('core.editor')}\n"
        f"\tgitProxy = {prog('core.gitProxy')}\n"
        "[sequence]\n"
        f"\teditor = {prog('sequence.editor')}\n"
        '[remote "origin"]\n'
        f"\turl = {root / 'elsewhere.git'}\n"
        f"\tuploadpack = {prog('remote.origin.uploadpack')}\n"
        f"\treceivepack = {prog('remote.origin.receivepack')}\n"
        "[merge]\n"
        "\tdefaultToUpstream = true\n"
    )
    config = (
        "[core]\n"
        "\trepositoryformatversion = 0\n"
        f"\tbare = {'true' if bare else 'false'}\n"
        f"\talternateRefsCommand = {prog('core.alternateRefsCommand')}\n"
        f"\tfsmonitor = {prog('core.fsmonitor')}\n"
        f"\thooksPath = {hooks}\n"
        f"\tsshCommand = {prog('core.sshCommand')}\n"
        f"\taskPass = {prog('core.askPass')}\n"
        f"\tpager = {prog('core.pager')}\n"
        "[credential]\n"
        f"\thelper = !{prog('credential.helper')}\n"
        "[uploadpack]\n"
        f"\tpackObjectsHook = {prog('uploadpack.packObjectsHook')}\n"
        "\tallowAnySHA1InWant = true\n"
        "[diff]\n"
        f"\texternal = {prog('diff.external')}\n"
        '[diff "hostile"]\n'
        f"\tcommand = {prog('diff.driver.command')}\n"
        f"\ttextconv = {prog('diff.driver.textconv')}\n"
        '[filter "hostile"]\n'
        f"\tclean = {prog('filter.clean')}\n"
        f"\tsmudge = {prog('filter.smudge')}\n"
        f"\tprocess = {prog('filter.process')}\n"
        "\trequired = true\n"
        '[merge "hostile"]\n'
        f"\tdriver = {prog('merge.driver')}\n"
        "[gpg]\n"
        f"\tprogram = {prog('gpg.program')}\n"
        '[gpg "ssh"]\n'
        f"\tprogram = {prog('gpg.ssh.program')}\n"
        "[log]\n"
        "\tshowSignature = true\n"
        "[pager]\n"
        f"\tlog = {prog('pager.log')}\n"
        # A forge address becomes ssh, so a fetch from it would run core.sshCommand.
        '[url "ssh://attacker.invalid/"]\n'
        "\tinsteadOf = https://\n"
        "[include]\n"
        f"\tpath = {included}\n"
    )
    (gitdir / "config").write_text(config)
    (gitdir / "info").mkdir(exist_ok=True)
    (gitdir / "info" / "attributes").write_text("* diff=hostile filter=hostile merge=hostile\n")
    if alternate is not None:
        (gitdir / "objects" / "info" / "alternates").write_text(f"{alternate}\n")


def _markers(root: Path) -> list[str]:
    marks = root / "marks"
    return sorted(p.name for p in marks.iterdir()) if marks.is_dir() else []


def _manifest(path: Path, repo: str) -> Path:
    path.write_text(
        "\n".join(
            [
                "schema: releasekit/v1",
                "name: hostile-config",
                "components:",
                "  lib:",
                "    kind: git",
                f"    repo: {repo}",
                "    canonical_branch: main",
                "    merge_plan:",
                "      - {pr: 1, title: PR 1}",
                "toolchain:",
                "  base_image:",
                "    name: example.invalid/hostile-config-base",
                "    digest: to-be-locked",
                '  cuda_arch_list: ["12.0a"]',
                "",
            ]
        )
    )
    return path


@pytest.fixture
def hostile_world(tmp_path: Path) -> dict[str, Path]:
    forge = Forge(tmp_path / "origin", "lib")
    forge.init({"README": "lib\n", "src/a.py": "A = 1\n", "requirements.txt": "packaging==24.0\n"})
    forge.open_pr(1, [{"src/b.py": "B = 2\n"}])
    forge.merge_pr(1, "merge")
    forge.switch("release", "main")
    forge.commit({"src/release_only.py": "R = 1\n"}, "release-only fix")
    forge.push("release")
    snapshot = tmp_path / "snapshot.git"
    _git("clone", "--quiet", "--mirror", "--no-local", forge.url, str(snapshot))
    # An attacker's object directory, for the alternates trick.
    attacker = tmp_path / "attacker.git"
    _git("init", "--quiet", "--bare", str(attacker))
    return {"root": tmp_path, "origin": forge.remote, "snapshot": snapshot, "attacker": attacker}


def _answers(manifest: Path, lock: Path, cwd: Path, env: dict[str, str], repo: Path) -> dict[str, object]:
    """What plan lock, plan check, audit pins and audit release-only say (the lock's bytes included)."""
    answers: dict[str, object] = {}
    r = invoke("plan", "lock", str(manifest), "-o", str(lock), cwd=cwd, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    answers["lock"] = lock.read_bytes()
    r = invoke("plan", "check", str(manifest), "--lock", str(lock), "--json", cwd=cwd, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    answers["check"] = json.loads(r.stdout)["passed"]
    r = invoke(
        "audit", "pins", str(manifest), "--repo", str(repo), "--commit", "main", "--json", cwd=cwd, env=env
    )
    assert r.returncode == 0, r.stdout + r.stderr
    answers["pins"] = {k: v for k, v in json.loads(r.stdout).items() if k != "repo"}
    audit = ["audit", "release-only", "--release", "release", "--canonical", "main", "--json"]
    for name, where in (("by-url", URL), ("by-path", str(repo))):
        r = invoke(*audit, "--repo", where, cwd=cwd, env=env)
        assert r.returncode == 1, r.stdout + r.stderr
        answers[f"release-only {name}"] = sorted(c["subject"] for c in json.loads(r.stdout)["release_only"])
    return answers


def test_a_hostile_mirror_and_cache_run_nothing(hostile_world: dict[str, Path]) -> None:
    root = hostile_world["root"]
    snapshot = hostile_world["snapshot"]
    manifest = _manifest(root / "release.yaml", URL)
    mirror = {"RELEASEKIT_ALLOW_LOCAL_REPOS": "1"}
    mirrors_file = root / "mirrors.txt"
    mirrors_file.write_text(f"{URL}={snapshot}\n")
    mirror["RELEASEKIT_MIRRORS"] = str(mirrors_file)

    # The answers of a clean mirror, on a cache of their own.
    clean = _answers(
        manifest, root / "clean.json", root, {**mirror, "RELEASEKIT_CACHE": str(root / "c0")}, snapshot
    )
    assert clean["check"] is True and clean["release-only by-url"] == ["release-only fix"]

    # A cache that build left: filled through the mirror, then made hostile, its packs gone.
    cache = root / "cache"
    env = {**mirror, "RELEASEKIT_CACHE": str(cache)}
    r = invoke("plan", "lock", str(manifest), "-o", str(root / "first.json"), cwd=root, env=env)
    assert r.returncode == 0, r.stderr
    (entry,) = [p for p in (cache / "git").iterdir() if p.name.endswith(".git")]
    _plant(entry, root, "cache", alternate=hostile_world["attacker"] / "objects")
    _plant(snapshot, root, "mirror")
    assert _markers(root) == []

    hostile = _answers(manifest, root / "hostile.json", root, env, snapshot)
    assert _markers(root) == []
    assert hostile == clean

    # A work tree given as --repo and --pins-repo, hostile too, a tracked file's times changed
    # (so git status hashes it again, through the clean filter its attributes name).
    tree = root / "tree"
    _git("clone", "--quiet", "--no-local", str(hostile_world["origin"]), str(tree))
    os.utime(tree / "requirements.txt", (1_900_000_000, 1_900_000_000))
    _plant(tree / ".git", root, "tree", bare=False)
    clean_tree = _answers(manifest, root / "tree.json", root, env, tree)
    assert _markers(root) == []
    assert clean_tree == clean
    check = ["plan", "check", str(manifest), "--lock", str(root / "tree.json"), "--json"]
    r = invoke(*check, "--pins", "lib", "--pins-repo", str(tree), cwd=root, env=env)
    assert _markers(root) == [], r.stdout + r.stderr
    assert r.returncode == 0 and json.loads(r.stdout)["pins"][0]["files"] == ["requirements.txt"], r.stdout

    # The git work of build, verify-provenance and reproduce, on the hostile cache: a checkout of the
    # locked commit from a mirror that must fetch (its objects are borrowed through the planted alternates
    # only), every object hashed, a bundle made from it and checked out again.
    lock = json.loads((root / "hostile.json").read_text())["components"]["lib"]
    _plant_origin_cache(root, hostile_world, lock, env)
    assert _markers(root) == []


def _plant_origin_cache(
    root: Path, hostile_world: dict[str, Path], lock: dict[str, str], env: dict[str, str]
) -> None:
    """build's fetch, verify-provenance's object check and reproduce's bundle on a hostile cache of a
    local origin (fetched, not borrowed), in a child process with the test's environment."""
    script = root / "gitwork.py"
    script.write_text(
        "import sys\n"
        "from pathlib import Path\n"
        "from releasekit.git import Mirror, check_bundle, create_bundle, fresh_checkout, verify_commit_objects\n"
        "origin, cache, commit, tree, work = sys.argv[1:6]\n"
        "m = Mirror(origin, Path(cache), allow_local=True)\n"
        "co = fresh_checkout(m, commit, Path(work) / 'src', expect_tree=tree)\n"
        "verify_commit_objects(m.git, commit)\n"
        "create_bundle(m, commit, 'refs/releasekit/locked/lib', Path(work) / 'lib.bundle')\n"
        "again = check_bundle(Path(work) / 'lib.bundle', origin, commit, tree, Path(work) / 'rebuilt')\n"
        "print(co.tree, again.tree)\n"
    )
    cache = root / "origin-cache" / "git"
    work = root / "work"
    work.mkdir()
    args = [str(hostile_world["origin"]), str(cache), lock["commit"], lock["tree"], str(work)]
    run_env = {**os.environ, **env, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    first = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, env=run_env)
    assert first.returncode == 0, first.stderr
    (entry,) = [p for p in cache.iterdir() if p.name.endswith(".git")]
    _drop_objects(entry)
    _plant(entry, root, "origin-cache", alternate=hostile_world["attacker"] / "objects")
    shutil.rmtree(work)
    work.mkdir()
    again = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, env=run_env)
    assert _markers(root) == [], again.stderr
    assert again.returncode == 0, again.stderr
    assert again.stdout.split() == [lock["tree"], lock["tree"]]
    # plan lock and plan check of the local origin itself, through the same hostile cache.
    _drop_objects(entry)
    manifest = _manifest(root / "origin.yaml", str(hostile_world["origin"]))
    local = {**env, "RELEASEKIT_CACHE": str(cache.parent), "RELEASEKIT_MIRRORS": ""}
    r = invoke("plan", "lock", str(manifest), "-o", str(root / "origin.json"), cwd=root, env=local)
    assert _markers(root) == [], r.stderr
    assert r.returncode == 0, r.stderr
    assert json.loads((root / "origin.json").read_text())["components"]["lib"]["commit"] == lock["commit"]
    r = invoke(
        "plan", "check", str(manifest), "--lock", str(root / "origin.json"), "--json", cwd=root, env=local
    )
    assert _markers(root) == [], r.stderr
    assert r.returncode == 0 and json.loads(r.stdout)["passed"] is True, r.stdout + r.stderr


def _drop_objects(entry: Path) -> None:
    """The locked objects gone from a cache entry (packs and loose), so reading it again fetches."""
    for pack in (entry / "objects" / "pack").iterdir():
        pack.unlink()
    for sub in (entry / "objects").iterdir():
        if len(sub.name) == 2:
            shutil.rmtree(sub)


def test_a_fifo_in_alternates_is_refused_in_a_second(hostile_world: dict[str, Path]) -> None:
    """A --mirror whose objects/info/alternates is a FIFO hung plan lock; now one line, exit 2.
    An entry that links to a FIFO is refused the same way; a link to a directory is followed."""
    root = hostile_world["root"]
    snapshot = hostile_world["snapshot"]
    manifest = _manifest(root / "release.yaml", URL)
    env = {"RELEASEKIT_CACHE": str(root / "cache"), "RELEASEKIT_MIRRORS": ""}
    alternates = snapshot / "objects" / "info" / "alternates"
    os.mkfifo(alternates)
    assert stat.S_ISFIFO(os.lstat(alternates).st_mode)
    # A child process: a FIFO that a regression would block on is ended by the timeout.
    r = run_cli(
        "plan",
        "lock",
        str(manifest),
        "-o",
        "x.json",
        "--mirror",
        f"{URL}={snapshot}",
        cwd=root,
        env=env,
        timeout=60,
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert "FIFO" in r.stderr and "not a regular file" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    alternates.unlink()
    # An alternates entry that is a link to a FIFO: refused too, not opened.
    fifo = root / "fifo"
    os.mkfifo(fifo)
    (root / "fifo-link").symlink_to(fifo)
    alternates.write_text(f"{root / 'fifo-link'}\n")
    r = invoke(
        "plan", "lock", str(manifest), "-o", "x.json", "--mirror", f"{URL}={snapshot}", cwd=root, env=env
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert "is not a directory" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    # A link to a real object directory (a snapshot whose objects live in a shared store) is read.
    alternates.unlink()
    shutil.move(str(snapshot / "objects"), str(root / "store"))
    (snapshot / "objects").symlink_to(root / "store")
    r = invoke(
        "plan", "lock", str(manifest), "-o", "x.json", "--mirror", f"{URL}={snapshot}", cwd=root, env=env
    )
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.docker
def test_verify_provenance_on_a_hostile_build_cache(nocache_world) -> None:  # noqa: ANN001
    """The issue's chain: every mirror ``build`` left in the cache made hostile, its objects gone (so the
    verifier fetches, with the planted alternates entry); verify-provenance must still pass, and run nothing."""
    root = nocache_world.root
    marks_root = root / "hostile"
    marks_root.mkdir(exist_ok=True)
    attacker = marks_root / "attacker.git"
    _git("init", "--quiet", "--bare", str(attacker))
    entries = sorted((root / "cache" / "git").glob("*.git"))
    assert entries
    for number, entry in enumerate(entries):
        _drop_objects(entry)
        _plant(entry, marks_root, f"build-cache-{number}", alternate=attacker / "objects")
    result = nocache_world.verify(nocache_world.release)
    assert _markers(marks_root) == []
    assert result.passed, "\n".join(f.render() for f in result.findings)
