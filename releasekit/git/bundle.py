"""git bundles: a locked commit (and exactly what it needs) as one file, and mirrors made from such files.

A release archive holds one bundle per git component: the locked commit with every object
reachable from it (its history, trees and blobs) under one ref, and nothing else: no other
branch, no pull-request head. A bundle is read back into an ordinary releasekit mirror, so a
build from it is the same code path as a build from the network, only without the network:
``mirror_from_bundle`` never contacts the remote the mirror is named after.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from releasekit.errors import InputError
from releasekit.git.checkout import Checkout, fresh_checkout
from releasekit.git.mirror import Mirror, fetch_into
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


def _bundle_header(commit: str, ref: str) -> bytes:
    """The bundle format's header (gitformat-bundle): no prerequisites, one ref, a blank line."""
    # A SHA-256 repository needs the v3 header, which names the object format.
    head = "# v2 git bundle\n" if len(commit) == 40 else "# v3 git bundle\n@object-format=sha256\n"
    return f"{head}{commit} {ref}\n\n".encode()


def create_bundle(mirror: Mirror, commit: str, ref: str, out: Path) -> None:
    """Write ``out``: ``commit`` and every object reachable from it, under ``ref``.

    The bytes depend on the commit alone, not on how the mirror happens to be packed: the pack
    is made with ``DETERMINISTIC_PACK_OPTIONS`` and the header written here, so a cached and a
    ``--no-cache`` build write the same bundle. The mirror is only read: a throw-away
    repository borrows its objects (alternates).
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
        except GitFailed as exc:
            raise InputError(f"cannot bundle {mirror.url}@{commit[:12]}: {exc.reason}") from None
        pack = Path(f"{base}-{name}.pack")
        with out.open("xb") as dst, pack.open("rb") as src:
            dst.write(_bundle_header(commit, ref))
            shutil.copyfileobj(src, dst, 1 << 20)


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
    """``git bundle verify`` in an empty repository: passes only if the bundle needs no other objects."""
    with tempfile.TemporaryDirectory(prefix="releasekit-bundle-verify-") as tmp:
        repo = Path(tmp) / "empty.git"
        run_git(["init", "--quiet", "--bare", str(repo)])
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
