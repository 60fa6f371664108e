"""releasekit.git: mirror cache, fresh checkouts, ancestry and patch-id.

Public API (what other stages use):

- ``Mirror(url, cache_dir=None, allow_local=False)``: a bare mirror per URL in
  ``$RELEASEKIT_CACHE/git`` (default ``~/.cache/releasekit/git``); ``.update()`` fetches
  branches, tags and ``refs/pull/*/head``; ``.resolve(rev)``, ``.pr_head(n)``,
  ``.branch_head(b)``, ``.default_branch()``, ``.tree_of(c)``, ``.commit_time(c)``,
  ``.refs_containing(c)``, ``.published_by(c)``; ``.url`` is credential-free.
- ``fresh_checkout(mirror_or_url, commit, dest, expect_tree=None)`` -> ``Checkout``
  (path, repo, commit, tree): a new directory holding exactly that commit, verified.
- ``check_remote(url, allow_local=False)`` / ``check_ref(ref)`` / ``strip_credentials``:
  input safety, applied before git sees anything.
- ``create_bundle`` / ``mirror_from_bundle`` / ``check_bundle``: a locked commit as one bundle
  file, and a mirror filled from such a file without contacting the remote.
- ``mirrors.add_mirrors(["URL=PATH"])`` / ``RELEASEKIT_MIRRORS``: read URL from a local copy
  (refs copied, objects borrowed); every ``Mirror`` opened afterwards uses it.
  ``mirrors.set_offline(True)`` / ``RELEASEKIT_OFFLINE=1``: no URL is fetched (``OfflineNoMirror``).
- ``mirror.fetch_refs(entry, label, remote, {ref: dest})``: the one door through which a stage reads
  refs of another repository (an upstream): its mirror first, else fetched; ``mirror.fetch_into``
  is the only ``git fetch`` (tests/test_architecture.py).
- ``private``: git never runs in a repository releasekit did not make in this process (a cache
  entry, a ``--mirror``, a ``--repo DIR``): it runs in a private repository that borrows the
  other's checked object directories and copies its refs as data (``Mirror.git``,
  ``private.read_in_place``).
- ``GitFailed`` is a ReleasekitError (exit 2): one line with the repository, what git was
  asked and git's first ``fatal:``/``error:`` line; ``missing.missing_object_note`` adds
  the file and commit of an object git could not read.
- ``scratch.merge_tree`` / ``scratch.object_times_kept``: object writes that never land in,
  or re-touch, a repository that is only read.
"""

from releasekit.git.bundle import bundle_heads, bundle_ref, check_bundle, create_bundle, mirror_from_bundle
from releasekit.git.checkout import Checkout, fresh_checkout
from releasekit.git.mirror import Mirror, default_cache_dir
from releasekit.git.objects import ObjectMismatch, verify_commit_objects
from releasekit.git.remote import RemoteURL, check_ref, check_remote, local_repos_allowed, strip_credentials
from releasekit.git.runner import Git, GitFailed

__all__ = [
    "ObjectMismatch",
    "verify_commit_objects",
    "Checkout",
    "Git",
    "GitFailed",
    "Mirror",
    "RemoteURL",
    "bundle_heads",
    "bundle_ref",
    "check_bundle",
    "check_ref",
    "check_remote",
    "create_bundle",
    "default_cache_dir",
    "fresh_checkout",
    "local_repos_allowed",
    "mirror_from_bundle",
    "strip_credentials",
]
