"""The release archive's git bundle from a partial mirror (issue 37's B12X rehearsal).

The corpus's B12X snapshot lacks a blob that only old commits of ``master`` hold (a ``.ncu-rep``
profile added and later deleted), so ``master`` with its whole history cannot be packed: the build
stopped with ``cannot bundle … unable to read``. The image is built from the commit's tree, so the
bundle then holds the commit, its tree and blobs alone, and names the commit's parents as its
prerequisites; it is read back into a shallow mirror. A commit whose own tree lacks a blob is
still refused. Expected values come from git on the snapshot.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from corpus import Corpus

from releasekit.errors import InputError
from releasekit.git import Mirror, check_bundle, create_bundle, fresh_checkout, mirror_from_bundle
from releasekit.git.bundle import bundle_prerequisites

NAME = "b12x"
REF = "refs/releasekit/locked/b12x"


@pytest.fixture
def snapshot_mirror(corpus: Corpus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Mirror:
    """The snapshot read through ``--mirror`` as the build reads it (its objects borrowed, never written)."""
    mirrors = tmp_path / "mirrors.txt"
    mirrors.write_text(f"{corpus.url(NAME)}={corpus.path(NAME)}\n")
    monkeypatch.setenv("RELEASEKIT_MIRRORS", str(mirrors))
    return Mirror(corpus.url(NAME), tmp_path / "cache").update()


def _absent_blob_commit(corpus: Corpus) -> tuple[str, str]:
    """(the commit "Clean up junk files" deletes from, a blob of its tree the snapshot lacks)."""
    (junk,) = corpus.git(NAME, "log", "master", "--format=%H", "--grep=Clean up junk files").split()
    for line in corpus.git(NAME, "diff-tree", "-r", "--no-abbrev", "--raw", junk).splitlines():
        if not line.startswith(":"):
            continue
        old = line.split()[2]
        if old != "0" * 40:
            try:
                corpus.git(NAME, "cat-file", "-e", old)
            except subprocess.CalledProcessError:
                return f"{junk}^", old
    raise AssertionError("the snapshot was expected to lack a blob that 'Clean up junk files' deletes")


def test_master_is_bundled_without_its_history_and_rebuilds_the_checkout(
    corpus: Corpus, snapshot_mirror: Mirror, tmp_path: Path
) -> None:
    master = corpus.git(NAME, "rev-parse", "refs/heads/master").strip()
    tree = corpus.git(NAME, "rev-parse", "refs/heads/master^{tree}").strip()
    _, absent = _absent_blob_commit(corpus)
    bundle = tmp_path / "b12x.bundle"
    reason = create_bundle(snapshot_mirror, master, REF, bundle)
    assert reason is not None and absent in reason
    assert bundle_prerequisites(bundle) == corpus.git(NAME, "rev-parse", "refs/heads/master^@").split()

    # A function of the commit: bundled again, the same bytes.
    again = tmp_path / "again.bundle"
    create_bundle(snapshot_mirror, master, REF, again)
    assert again.read_bytes() == bundle.read_bytes()

    # The archive's own check (verify alone, fetch into an empty mirror, check out, compare the tree).
    assert check_bundle(bundle, corpus.url(NAME), master, tree, tmp_path / "check").tree == tree
    # As reproduce reads it: a mirror made from the bundle alone, the commit its shallow root.
    mirror = mirror_from_bundle(corpus.url(NAME), bundle, tmp_path / "repro-cache", [master])
    assert (mirror.path / "shallow").read_text().split() == [master]
    checkout = fresh_checkout(mirror, master, tmp_path / "work", expect_tree=tree)
    files = sorted(p.relative_to(checkout.path).as_posix() for p in checkout.path.rglob("*") if p.is_file())
    files = [f for f in files if not f.startswith(".git/")]
    assert files == sorted(corpus.git(NAME, "ls-tree", "-r", "--name-only", master).splitlines())


def test_a_commit_whose_own_tree_lacks_a_blob_is_refused(
    corpus: Corpus, snapshot_mirror: Mirror, tmp_path: Path
) -> None:
    commit, absent = _absent_blob_commit(corpus)
    commit = corpus.git(NAME, "rev-parse", commit).strip()
    with pytest.raises(InputError, match=f"cannot bundle .*{absent}"):
        create_bundle(snapshot_mirror, commit, REF, tmp_path / "broken.bundle")
