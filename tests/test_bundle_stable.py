"""The release archive's git bundles are a function of the locked commit, not of how a mirror is packed.

Issue 35: a ``--no-cache`` rebuild wrote a ``tokenspeed.bundle`` of other bytes than the cached
build, since ``git bundle create`` reuses whatever deltas the mirror's packs hold and searches
for new ones on several threads. Here one commit is bundled from two mirrors that hold the same
objects packed in different ways (as a mirror fetched afresh and one fetched over months do);
the two bundles must be the same bytes, and each must still rebuild the commit on its own.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from releasekit.git import Mirror, check_bundle, create_bundle

ENV = {
    "PATH": "/usr/bin:/bin",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "LC_ALL": "C",
}


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True, env=ENV).stdout.strip()


def _repack(repo: Path, *options: str) -> None:
    """Pack every object of ``repo`` again with ``options`` (delta window and depth)."""
    _git("--git-dir", str(repo), "repack", "-q", "-a", "-d", "-f", *options)


def _history(work: Path, commits: int) -> str:
    """A repository whose files change a little in every commit, so that packs hold deltas."""
    _git("init", "-q", "-b", "main", str(work))
    lines = [f"line {i} " + "x" * 40 + "\n" for i in range(400)]
    for n in range(commits):
        lines[(n * 37) % len(lines)] = f"changed in commit {n}\n"
        for name in ("a.txt", "b.txt", "c.txt"):
            (work / name).write_text(name + "".join(lines[n % 7 :]))
        _git("-C", str(work), "add", "-A")
        _git("-C", str(work), "commit", "-qm", f"commit {n}")
    return _git("-C", str(work), "rev-parse", "HEAD")


def _mirror_of(source: Path, cache: Path, *repack: str) -> Mirror:
    mirror = Mirror(str(source), cache, allow_local=True).update()
    _repack(mirror.path, *repack)
    return mirror


def test_one_commit_bundled_from_two_differently_packed_mirrors_is_the_same_bytes(tmp_path: Path) -> None:
    work = tmp_path / "src"
    commit = _history(work, 40)
    tree = _git("-C", str(work), "rev-parse", "HEAD^{tree}")
    # The same objects: packed with no deltas at all, and with long delta chains.
    plain = _mirror_of(work, tmp_path / "cache1", "--window=0")
    deep = _mirror_of(work, tmp_path / "cache2", "--window=250", "--depth=250")
    packs = {pack.read_bytes() for m in (plain, deep) for pack in (m.path / "objects/pack").glob("*.pack")}
    assert len(packs) == 2

    ref = "refs/releasekit/locked/c"
    first, second = tmp_path / "one.bundle", tmp_path / "two.bundle"
    create_bundle(plain, commit, ref, first)
    create_bundle(deep, commit, ref, second)
    assert first.read_bytes() == second.read_bytes()
    again = tmp_path / "again.bundle"
    create_bundle(plain, commit, ref, again)
    assert again.read_bytes() == first.read_bytes()
    # Still an ordinary bundle that rebuilds the commit with nothing else.
    assert _git("bundle", "list-heads", str(first)) == f"{commit} {ref}"
    checkout = check_bundle(first, "https://example.invalid/c.git", commit, tree, tmp_path / "check")
    assert checkout.tree == tree


def test_tokenspeed_bundle_is_the_same_from_the_snapshot_and_from_a_repacked_copy(
    corpus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real repository of issue 35: main of the tokenspeed snapshot (partial, promisor packs)
    read through ``--mirror`` as the build reads it, and the same commit's objects copied into a
    repository of their own and packed without deltas."""
    snapshot = corpus.path("tokenspeed")
    commit = corpus.git("tokenspeed", "rev-parse", "refs/heads/main").strip()
    tree = corpus.git("tokenspeed", "rev-parse", "refs/heads/main^{tree}").strip()
    mirrors = tmp_path / "mirrors.txt"
    mirrors.write_text(f"{corpus.url('tokenspeed')}={snapshot}\n")
    monkeypatch.setenv("RELEASEKIT_MIRRORS", str(mirrors))
    borrowed = Mirror(corpus.url("tokenspeed"), tmp_path / "cache1").update()

    copy = tmp_path / "copy.git"
    _git("init", "-q", "--bare", str(copy))
    _git(
        "--git-dir", str(copy), "fetch", "-q", "--no-tags", str(snapshot), "+refs/heads/main:refs/heads/main"
    )
    _repack(copy, "--window=0")
    repacked = Mirror(str(copy), tmp_path / "cache2", allow_local=True).update()

    ref = "refs/releasekit/locked/tokenspeed"
    first, second = tmp_path / "one.bundle", tmp_path / "two.bundle"
    create_bundle(borrowed, commit, ref, first)
    create_bundle(repacked, commit, ref, second)
    assert first.stat().st_size > 1_000_000
    assert first.read_bytes() == second.read_bytes()
    checkout = check_bundle(first, corpus.url("tokenspeed"), commit, tree, tmp_path / "check")
    assert checkout.tree == tree
