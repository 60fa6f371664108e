"""git bundles: a locked commit (and exactly what it needs) as one file, and mirrors made from such files.

A release archive holds one bundle per git component: the locked commit with every object
reachable from it (its history, trees and blobs) under one ref, and nothing else: no other
branch, no pull-request head. A bundle is read back into an ordinary releasekit mirror, so a
build from it is the same code path as a build from the network, only without the network:
``mirror_from_bundle`` never contacts the remote the mirror is named after.

A partial mirror (a snapshot whose packs are ``promisor``: some blobs of old commits absent) cannot
give the whole history. Then the bundle holds the locked commit, its tree and its blobs alone, and
names the commit's parents as its prerequisites (the bundle format's own way to say "history not
included"). Such a bundle is read into a shallow mirror: the commit is its root.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from releasekit.errors import InputError
from releasekit.git.checkout import Checkout, fresh_checkout
from releasekit.git.mirror import Mirror, fetch_into, refresh_view
from releasekit.git.private import (
    read_head,
    read_refs,
    read_shallow,
    valid_ref_name,
    write_refs,
    write_shallow,
)
from releasekit.git.runner import Git, GitFailed, run_git

BUNDLE_REF_PREFIX = "refs/releasekit/locked/"


def bundle_ref(component: str) -> str:
    return BUNDLE_REF_PREFIX + component


# How the bundle's pack is made: a function of the objects alone. ``git bundle create`` reuses the
# deltas and compressed bytes of whatever packs the mirror holds and searches for deltas on
# several threads, so the same commit bundled from a mirror fetched afresh (``--no-cache``) and
# from one fetched over time gave different bytes. Here every object is compressed and
# delta-searched anew, on one thread, with a fixed window, depth and zlib level, and no bitmap
# or verbatim pack reuse.
DETERMINISTIC_PACK_CONFIG: tuple[str, ...] = (
    "-c",
    "pack.threads=1",
    "-c",
    "pack.useBitmaps=false",
    "-c",
    "pack.allowPackReuse=false",
    "-c",
    "pack.compression=6",
    "-c",
    "pack.windowMemory=0",
)
DETERMINISTIC_PACK_OPTIONS: tuple[str, ...] = (
    "--quiet",
    "--revs",
    "--no-reuse-object",
    "--delta-base-offset",
    "--threads=1",
    "--window=10",
    "--depth=50",
)


# The longest header read back: the signature, a few prerequisites and one ref per component.
MAX_HEADER_BYTES = 64 * 1024


def _bundle_header(commit: str, ref: str, prerequisites: Sequence[str] = ()) -> bytes:
    """The bundle format's header (gitformat-bundle): prerequisites (if any), one ref, a blank line."""
    # A SHA-256 repository needs the v3 header, which names the object format.
    head = "# v2 git bundle\n" if len(commit) == 40 else "# v3 git bundle\n@object-format=sha256\n"
    needs = "".join(f"-{parent} \n" for parent in prerequisites)
    return f"{head}{needs}{commit} {ref}\n\n".encode()


def _parents(git: Git, commit: str) -> list[str]:
    """The parents a commit object names, read from the object itself (git's walkers would read them too)."""
    header = git.run("cat-file", "commit", commit).split("\n\n", 1)[0]
    return [line.split()[1] for line in header.splitlines() if line.startswith("parent ")]


def _commit_objects(git: Git, commit: str) -> tuple[list[str], bytes]:
    """The commit's parents, and pack-objects input naming the commit, its trees and its blobs (with paths, for deltas)."""
    parents = _parents(git, commit)
    lines = [commit, git.run("rev-parse", f"{commit}^{{tree}}").strip()]
    for entry in git.run("ls-tree", "-r", "-t", "-z", "--full-tree", commit).split("\0"):
        meta, _, path = entry.partition("\t")
        fields = meta.split()
        # A gitlink (submodule) names a commit of another repository: not an object of this one.
        if len(fields) == 3 and fields[1] != "commit":
            lines.append(fields[2] if "\n" in path else f"{fields[2]} {path}")
    return parents, ("\n".join(lines) + "\n").encode()


def create_bundle(mirror: Mirror, commit: str, ref: str, out: Path) -> str | None:
    """Write ``out``: ``commit`` and every object reachable from it, under ``ref``.

    The bytes depend on the commit alone, not on how the mirror happens to be packed: the pack
    is made with ``DETERMINISTIC_PACK_OPTIONS`` and the header written here, so a cached and a
    ``--no-cache`` build write the same bundle. The mirror is only read: a throw-away
    repository borrows its objects (alternates).

    Returns None, or, when the mirror lacks objects of the commit's history, git's reason: the
    bundle then holds the commit and its tree alone, with the commit's parents as prerequisites.
    """
    if not mirror.has_commit(commit):
        raise InputError(f"{mirror.url}: commit {commit} is not in the mirror; cannot bundle it")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="releasekit-bundle-") as tmp:
        repo = Path(tmp) / "bundle.git"
        run_git(["init", "--quiet", "--bare", str(repo)])
        listing = "".join(f"{d}\n" for d in mirror.object_dirs())
        (repo / "objects" / "info" / "alternates").write_text(listing, encoding="utf-8")
        git = Git(repo, bare=True)
        base = Path(tmp) / "pack"
        prerequisites: list[str] = []
        history_absent: str | None = None
        try:
            git.run("update-ref", ref, commit)  # refuses a malformed ref name before it reaches the header
            # --revs reads the commit from stdin: it and everything reachable from it, nothing else.
            name = git.run(
                *DETERMINISTIC_PACK_CONFIG,
                "pack-objects",
                *DETERMINISTIC_PACK_OPTIONS,
                str(base),
                input=f"{commit}\n".encode(),
            ).strip()
        except GitFailed as whole:
            # The build needs the commit's tree, not its history: bundle what a checkout reads, so a
            # partial snapshot still gives an archive that rebuilds the image with no remote.
            history_absent = whole.reason
            try:
                prerequisites, objects = _commit_objects(git, commit)
                options = [o for o in DETERMINISTIC_PACK_OPTIONS if o != "--revs"]
                name = git.run(
                    *DETERMINISTIC_PACK_CONFIG, "pack-objects", *options, str(base), input=objects
                ).strip()
            except GitFailed as exc:
                raise InputError(f"cannot bundle {mirror.url}@{commit[:12]}: {exc.reason}") from None
        pack = Path(f"{base}-{name}.pack")
        with out.open("xb") as dst, pack.open("rb") as src:
            dst.write(_bundle_header(commit, ref, prerequisites))
            shutil.copyfileobj(src, dst, 1 << 20)
    return history_absent


def bundle_prerequisites(bundle: Path) -> list[str]:
    """The commits a bundle needs but does not hold (none: it holds the whole history)."""
    with bundle.open("rb") as fh:
        head = fh.read(MAX_HEADER_BYTES)
    end = head.find(b"\n\n")
    if not head.startswith(b"# v") or end < 0:
        raise InputError(f"{bundle.name} is not a readable git bundle: no header")
    lines = head[:end].decode(errors="replace").splitlines()
    return [line[1:].split(" ", 1)[0] for line in lines if line.startswith("-")]


def _import_history_less(git: Git, bundle: Path, store: Path) -> dict[str, str]:
    """Index a prerequisite bundle's pack into the repository ``store``, make each head a shallow root, set its refs.

    git's own readers (``bundle verify``, ``fetch``) refuse a bundle whose prerequisites are not
    present; a shallow root is how a repository holds a commit whose parents it does not have.
    ``git`` runs in ``store`` itself (a repository this process made) or in its private
    repository (a cache entry, git/private.py): objects go into ``store``'s object directory, and
    its ``shallow`` file and refs are written as data.
    """
    where = f"{bundle.name} (bundle)"
    heads = {ref: sha for ref, sha in bundle_heads(bundle).items() if valid_ref_name(ref)}
    with bundle.open("rb") as fh:
        head = fh.read(MAX_HEADER_BYTES)
        fh.seek(head.index(b"\n\n") + 2)
        pack = fh.read()
    try:
        # index-pack hashes every object as it stores it: a pack that lies about its ids is refused.
        git.run(
            "index-pack", "--stdin", input=pack, extra_env={"GIT_OBJECT_DIRECTORY": str(store / "objects")}
        )
        roots = set(read_shallow(store, where))
        for commit in heads.values():
            parents = _parents(git, commit)
            if not all(git.ok("cat-file", "-e", f"{p}^{{commit}}") for p in parents):
                roots.add(commit)
        write_shallow(store, sorted(roots))
        refs = read_refs(store, where)
        refs.update(heads)
        write_refs(store, refs, read_head(store, where))
        refresh_view(store, git.label)
        for commit in heads.values():
            # Every object a checkout reads is there: the walk stops at the shallow root.
            git.run("rev-list", "--objects", "--quiet", commit)
    except GitFailed as exc:
        raise InputError(f"{bundle.name}: cannot read the commit from the bundle: {exc.reason}") from None
    return heads


def bundle_heads(bundle: Path) -> dict[str, str]:
    """ref -> commit recorded in the bundle."""
    try:
        out = run_git(["bundle", "list-heads", str(bundle.resolve())])
    except GitFailed as exc:
        raise InputError(f"{bundle.name} is not a readable git bundle: {exc}") from None
    heads: dict[str, str] = {}
    for line in out.splitlines():
        sha, _, ref = line.partition(" ")
        if ref:
            heads[ref] = sha
    return heads


def verify_bundle_alone(bundle: Path) -> None:
    """``git bundle verify`` in an empty repository: passes only if the bundle needs no other objects.

    A bundle without history (prerequisites) passes when its commits and every object of their
    trees are in it.
    """
    with tempfile.TemporaryDirectory(prefix="releasekit-bundle-verify-") as tmp:
        repo = Path(tmp) / "empty.git"
        run_git(["init", "--quiet", "--bare", str(repo)])
        if bundle_prerequisites(bundle):
            _import_history_less(Git(repo, bare=True), bundle, repo)
            return
        try:
            Git(repo, bare=True, allow_file=True).run("bundle", "verify", "--quiet", str(bundle.resolve()))
        except GitFailed as exc:
            raise InputError(f"{bundle.name}: git bundle verify failed: {exc.reason}") from None


def fetch_bundle(mirror: Mirror, bundle: Path) -> dict[str, str]:
    """Create ``mirror`` if needed and fetch every ref of ``bundle`` into it; returns the bundle's heads.

    Only the bundle file is read: the remote the mirror is named after is never contacted.
    """
    heads = bundle_heads(bundle)
    with mirror.locked():
        mirror._create()
        if bundle_prerequisites(bundle):
            return _import_history_less(mirror.git, bundle, mirror.path)
        try:
            fetch_into(
                mirror.path,
                mirror.url,
                str(bundle.resolve()),
                ["+refs/*:refs/*"],
                allow_file=True,
                options=("--no-tags",),
            )
        except GitFailed as exc:
            raise InputError(f"{bundle.name}: cannot fetch from the bundle: {exc.reason}") from None
    return heads


def mirror_from_bundle(url: str, bundle: Path, cache_dir: Path, commits: Iterable[str]) -> Mirror:
    """The mirror of ``url`` in ``cache_dir``, filled from ``bundle`` alone; every commit in ``commits`` must be there.

    A file or path ``url`` is accepted: it names the mirror and is never fetched from.
    """
    mirror = Mirror(url, cache_dir, allow_local=True)
    fetch_bundle(mirror, bundle)
    for commit in commits:
        if not mirror.has_commit(commit):
            raise InputError(f"{bundle.name}: commit {commit} is not in the bundle")
    return mirror


def check_bundle(bundle: Path, url: str, commit: str, tree: str, workdir: Path) -> Checkout:
    """Prove that ``bundle`` alone rebuilds the checkout of ``commit``: verify it in an empty repository,
    fetch it into an empty mirror, check the commit out and compare its tree with ``tree``."""
    verify_bundle_alone(bundle)
    mirror = mirror_from_bundle(url, bundle, workdir / "git", [commit])
    return fresh_checkout(mirror, commit, workdir / "checkout", expect_tree=tree)
