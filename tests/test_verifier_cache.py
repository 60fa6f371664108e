"""The verifier's own cache takes only what this process wrote, checked by content; git ignores replace refs.

No Docker: the cache on real files in tmp_path, git on a real repository made here.
"""

from __future__ import annotations

import subprocess
import zlib
from pathlib import Path

import pytest

from releasekit.builder.cache import BuildCache
from releasekit.builder.wheel import BuiltWheel
from releasekit.digests import file_sha256
from releasekit.git.runner import Git
from releasekit.provenance.vcache import VerifierCache, verifier_cache


def _wheel(path: Path, data: bytes) -> BuiltWheel:
    path.write_bytes(data)
    return BuiltWheel(
        path=str(path),
        filename=path.name,
        sha256=file_sha256(path),
        distribution="demo",
        version="1.0",
    )


def test_an_entry_is_taken_only_as_this_process_wrote_it(tmp_path):
    cache = VerifierCache(tmp_path / "cache")
    layer = tmp_path / "layer.tar"
    layer.write_bytes(b"layer bytes")
    stored = cache.put_files("layers", "k" * 64, {"layer.tar": layer})
    assert cache.get_files("layers", "k" * 64, ["layer.tar"]) == stored
    stored["layer.tar"].write_bytes(b"other bytes")  # rewritten under the same key: a miss, rebuilt
    assert cache.get_files("layers", "k" * 64, ["layer.tar"]) is None
    # An entry another writer put at a key (the builder's cache layout, same files): never taken.
    BuildCache(tmp_path / "cache").put_files("layers", "b" * 64, {"layer.tar": layer})
    assert cache.get_files("layers", "b" * 64, ["layer.tar"]) is None


def test_a_wheel_with_a_rewritten_entry_json_is_a_miss(tmp_path):
    cache = VerifierCache(tmp_path / "cache")
    log = tmp_path / "build.log"
    log.write_text("built\n")
    wheel = _wheel(tmp_path / "demo-1.0-py3-none-any.whl", b"PK genuine")
    cache.put_wheel("w" * 64, wheel, log)
    got = cache.get_wheel("w" * 64, tmp_path / "out", tmp_path / "out.log")
    assert got is not None and got.sha256 == wheel.sha256
    # The attacker's move against the build cache: a forged wheel and an entry.json that names its sha256.
    (tmp_path / "forged").mkdir()
    forged = _wheel(tmp_path / "forged" / wheel.filename, b"PK forged")
    BuildCache(cache.root).put_wheel("w" * 64, forged, log)
    assert cache.get_wheel("w" * 64, tmp_path / "out2", tmp_path / "out2.log") is None


def test_fresh_caches_are_private_and_empty():
    with verifier_cache(fresh=True) as one, verifier_cache(fresh=True) as two:
        assert one.root != two.root
        assert one.root.stat().st_mode & 0o077 == 0
        assert not one.bases and not one.base_tables


def _git(cwd: Path, *args: str, data: bytes | None = None) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, input=data, capture_output=True, check=True
    ).stdout.decode()


def _one_commit(repo: Path) -> Path:
    """A repository whose one commit holds ``a.py`` = ``genuine = 1``."""
    repo.mkdir()
    _git(repo, "init", "--quiet")
    (repo / "a.py").write_text("genuine = 1\n")
    _git(repo, "add", "a.py")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "one")
    return repo


def test_git_adapter_ignores_replace_refs(tmp_path):
    repo = _one_commit(tmp_path / "repo")
    genuine = _git(repo, "rev-parse", "HEAD:a.py").strip()
    forged = _git(repo, "hash-object", "-w", "--stdin", data=b"forged = 1\n").strip()
    _git(repo, "replace", genuine, forged)
    assert _git(repo, "cat-file", "-p", genuine) == "forged = 1\n"  # plain git honours the replace ref
    assert Git(repo).run("cat-file", "-p", genuine) == "genuine = 1\n"
    assert Git(repo).run("show", "HEAD:a.py") == "genuine = 1\n"


def _forge_loose(objects: Path, oid: str, kind: str, data: bytes) -> None:
    """Other bytes under an existing loose object's name."""
    path = objects / oid[:2] / oid[2:]
    path.chmod(0o644)
    path.write_bytes(zlib.compress(f"{kind} {len(data)}\0".encode() + data))


def test_a_rewritten_blob_in_the_mirror_is_refused_by_content(tmp_path):
    """git checks a tree's hash when it parses it, not a blob's when it reads it: a mirror whose objects
    were rewritten (unpacked, then a locked blob's file replaced) checks out other bytes under the
    locked tree's name. fresh_checkout hashes every object first."""
    from releasekit.git import ObjectMismatch, verify_commit_objects
    from releasekit.git.checkout import fresh_checkout
    from releasekit.git.mirror import Mirror

    repo = _one_commit(tmp_path / "repo")
    commit = _git(repo, "rev-parse", "HEAD").strip()
    tree = _git(repo, "rev-parse", "HEAD^{tree}").strip()
    blob = _git(repo, "rev-parse", "HEAD:a.py").strip()
    mirror = Mirror(str(repo), tmp_path / "mirrors", allow_local=True)
    fresh_checkout(mirror, commit, tmp_path / "ok", expect_tree=tree)
    verify_commit_objects(Git(mirror.path, bare=True), commit)  # the genuine objects pass
    objects = mirror.path / "objects"
    for pack in sorted((objects / "pack").glob("*.pack")):  # the attacker unpacks the mirror...
        moved = tmp_path / pack.name
        pack.rename(moved)
        pack.with_suffix(".idx").unlink()
        subprocess.run(
            ["git", "--git-dir", str(mirror.path), "unpack-objects", "-q"], stdin=moved.open("rb"), check=True
        )
    _forge_loose(objects, blob, "blob", b"forged = 2\n")  # ...and rewrites the locked blob
    assert Git(mirror.path, bare=True).run("cat-file", "-p", blob) == "forged = 2\n"  # git does not notice
    with pytest.raises(ObjectMismatch, match=f"blob {blob} does not hash to its name"):
        fresh_checkout(mirror, commit, tmp_path / "forged", expect_tree=tree)
    assert not (tmp_path / "forged").exists()
