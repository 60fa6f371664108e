"""A bare mirror per repository URL, kept in a cache and updated by fetch.

The mirror holds every branch, tag and ``refs/pull/N/head`` (how GitHub exposes pull
request heads to plain git), so PR heads resolve without a forge API. The remote's
credentials are never stored: the URL is passed on the fetch command line only, and
the mirror's config records nothing about where it came from except the public URL.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from contextlib import AbstractContextManager
from pathlib import Path

from releasekit import atomic
from releasekit.errors import InputError
from releasekit.git.mirrors import mirror_for
from releasekit.git.remote import RemoteURL, check_ref, check_remote
from releasekit.git.runner import Git, GitFailed, run_git
from releasekit.git.untrusted_paths import check_git_dir

CACHE_ENV = "RELEASEKIT_CACHE"
FETCH_REFSPECS = (
    "+refs/heads/*:refs/heads/*",
    "+refs/tags/*:refs/tags/*",
    "+refs/pull/*/head:refs/pull/*/head",
)
_SHA1 = re.compile(r"^[0-9a-f]{40}$")
_BORROWED_PREFIXES = ("refs/heads/", "refs/tags/", "refs/pull/")
_PR_HEAD = re.compile(r"^refs/pull/[0-9]+/head$")


def default_cache_dir() -> Path:
    root = os.environ.get(CACHE_ENV)
    base = Path(root) if root else Path.home() / ".cache" / "releasekit"
    return base / "git"


def _mirror_dirname(public_url: str) -> str:
    stem = re.sub(r"\.git$", "", public_url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]) or "repo"
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", stem)[:40]
    return f"{stem}-{hashlib.sha256(public_url.encode()).hexdigest()[:16]}.git"


def _git_dir_of(source: Path, url: str) -> Path:
    """The git directory of a local copy: the path itself (bare) or its ``.git``."""
    if (source / "HEAD").is_file() and (source / "objects").is_dir():
        return source
    if (source / ".git" / "HEAD").is_file() and (source / ".git" / "objects").is_dir():
        return source / ".git"
    raise InputError(f"mirror of {url}: {source} is not a git repository (bare or with .git)")


class Mirror:
    """A bare mirror of one remote.

    >>> m = Mirror("https://github.com/org/repo.git").update()
    >>> m.resolve("refs/pull/108/head")

    ``path`` is the bare repository; ``git`` runs commands in it. Reading never touches
    the network; only ``update()`` fetches.
    """

    def __init__(
        self,
        url: str | RemoteURL,
        cache_dir: Path | None = None,
        *,
        allow_local: bool = False,
        base_dir: Path | None = None,
    ) -> None:
        self.remote = (
            url
            if isinstance(url, RemoteURL)
            else check_remote(url, allow_local=allow_local, base_dir=base_dir)
        )
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        self.path = self.cache_dir / _mirror_dirname(self.remote.public)
        self.git = Git(self.path, allow_file=self.remote.is_local, bare=True, label=self.remote.public)
        # A local copy to read instead of the URL (--mirror URL=PATH, RELEASEKIT_MIRRORS).
        self.source: Path | None = mirror_for(self.remote.public)
        # Refs of the local copy left out because the object they point at is not there: ref -> object.
        self.skipped_refs: dict[str, str] = {}

    @property
    def url(self) -> str:
        """The public (credential-free) URL: the one to write anywhere."""
        return self.remote.public

    def __repr__(self) -> str:
        return f"Mirror({self.url!r})"

    def locked(self) -> AbstractContextManager[None]:
        """Hold the mirror's lock (``<cache>/<mirror>.lock``, the cache's entry lock) for a ``with``
        block: two releasekit processes (CI jobs, a build and a check) may update one cache."""
        return atomic.entry_lock(self.path)

    def exists(self) -> bool:
        return (self.path / "HEAD").is_file()

    def update(self) -> Mirror:
        """Create the mirror if needed and fetch every branch, tag and PR head (pruning deleted ones).

        With a local copy configured for this URL (``--mirror``), its refs are taken and its
        objects borrowed instead (``_borrow``): nothing is fetched and the copy is not written.
        """
        with self.locked():
            if os.path.lexists(self.path):
                check_git_dir(self.path)  # the cache is writable by others: no FIFO for git to block on
            self._create()
            self._clear_stale_git_locks()
            if self.source is not None:
                self._borrow(self.source)
                return self
            self._drop_lost_alternates()
            try:
                self.git.run(
                    "fetch",
                    "--quiet",
                    "--prune",
                    "--force",
                    "--no-write-fetch-head",
                    "--",
                    self.remote.url,
                    *FETCH_REFSPECS,
                )
            except GitFailed as exc:
                # git anonymises URLs in its messages; make sure, since this line is printed.
                reason = exc.reason.replace(self.remote.url, self.remote.public)
                raise InputError(
                    f"cannot fetch refs/heads/*, refs/tags/*, refs/pull/*/head of {self.url}: {reason}"
                ) from None
            self._record_default_branch()
        return self

    def _borrow(self, source: Path) -> None:
        """Take the branches, tags and PR heads of the local copy ``source``; borrow its objects.

        The cache repository lists ``source``'s object directory in ``objects/info/alternates``
        and copies its refs, so no object is copied or checked. A ref whose commit is absent
        from the copy (a snapshot without some objects) is left out and listed in
        ``skipped_refs``; a missing object deeper down fails only when something reads it.
        Only read-only git commands run in ``source``.
        """
        gitdir = _git_dir_of(source, self.url)
        check_git_dir(gitdir)  # before git opens anything there: a FIFO would hang it
        src = Git(gitdir, bare=True, label=f"{source} (mirror of {self.url})")
        safe = ("-c", f"safe.directory={gitdir}")
        listing = src.run(*safe, "for-each-ref", "--format=%(objectname) %(refname)", *_BORROWED_PREFIXES)
        wanted: dict[str, str] = {}
        for line in listing.splitlines():
            sha, _, name = line.partition(" ")
            if name.startswith("refs/pull/") and not _PR_HEAD.match(name):
                continue
            wanted[name] = sha
        alternates = self.path / "objects" / "info" / "alternates"
        atomic.write_bytes(alternates, f"{gitdir / 'objects'}\n".encode())
        present = self._present(set(wanted.values()))
        self.skipped_refs = {name: sha for name, sha in sorted(wanted.items()) if sha not in present}
        keep = {name: sha for name, sha in wanted.items() if sha in present}
        current: dict[str, str] = {}
        out = self.git.run("for-each-ref", "--format=%(objectname) %(refname)", *_BORROWED_PREFIXES)
        for line in out.splitlines():
            sha, _, name = line.partition(" ")
            current[name] = sha
        commands = [f"update {name} {sha}" for name, sha in sorted(keep.items()) if current.get(name) != sha]
        commands += [f"delete {name}" for name in sorted(current) if name not in keep]
        if commands:
            self.git.run("update-ref", "--stdin", input=("\n".join(commands) + "\n").encode())
        try:
            head = src.run(*safe, "symbolic-ref", "--quiet", "HEAD").strip()
        except GitFailed:
            head = ""
        if head.startswith("refs/heads/") and head in keep:
            self.git.run("symbolic-ref", "HEAD", head)

    def _drop_lost_alternates(self) -> None:
        """A cache that borrowed from a mirror which is gone now starts again from nothing.

        Its refs name objects only the mirror had; fetching into it would tell the remote it
        has them. While the mirror is still there its objects stay borrowed.
        """
        alternates = self.path / "objects" / "info" / "alternates"
        if not alternates.is_file():
            return
        listed = [
            line.strip() for line in alternates.read_text(encoding="utf-8").splitlines() if line.strip()
        ]
        if all(Path(entry).is_dir() for entry in listed):
            return
        shutil.rmtree(self.path)
        self._create()

    def _present(self, shas: set[str]) -> set[str]:
        """Which of these objects this repository (with its alternates) has."""
        if not shas:
            return set()
        out = self.git.run(
            "cat-file", "--batch-check=%(objectname)", input=("\n".join(sorted(shas)) + "\n").encode()
        )
        return {line for line in out.splitlines() if _SHA1.match(line)} & shas

    def _create(self) -> None:
        """An empty bare mirror (nothing fetched yet), if there is none. Call with the lock held.

        Made and configured under a temporary name, then renamed into place: a process killed
        half-way leaves no mirror that exists without its configuration.
        """
        if self.exists():
            return
        if self.path.exists():  # no HEAD: the remains of a mirror made by a killed older version
            shutil.rmtree(self.path)
        atomic.sweep_temporaries(self.path)
        tmp = atomic.temp_name(self.path)
        run_git(["init", "--quiet", "--bare", str(tmp)])
        made = Git(tmp, bare=True, label=self.remote.public)
        made.run("config", "releasekit.url", self.remote.public)
        # fresh_checkout fetches single commits from the mirror, whether or not a ref names them.
        made.run("config", "uploadpack.allowAnySHA1InWant", "true")
        made.run("config", "gc.auto", "0")
        atomic.failpoint("git-mirror-init")
        atomic.move_dir_into_place(tmp, self.path)

    def _clear_stale_git_locks(self) -> None:
        """Remove the ``*.lock`` files a killed git left in the mirror. Call with the mirror's lock held.

        Every releasekit process that writes the mirror holds its entry lock first, so a git lock
        file found then belongs to a git that was killed (with its releasekit): left there, it
        would fail every later fetch ("Unable to create ... .lock: File exists").
        """
        candidates = [
            self.path / name for name in ("HEAD.lock", "config.lock", "packed-refs.lock", "shallow.lock")
        ]
        candidates += list((self.path / "refs").rglob("*.lock"))
        for lock in candidates:
            if lock.is_file() and not lock.is_symlink():
                lock.unlink(missing_ok=True)

    def ensure(self) -> Mirror:
        """Fetch only if the mirror has never been fetched (for commands that work offline on a cache)."""
        if not self.exists() or not self.refs():
            return self.update()
        return self

    def _record_default_branch(self) -> None:
        try:
            out = self.git.run("ls-remote", "--symref", "--", self.remote.url, "HEAD")
        except GitFailed:
            return
        for line in out.splitlines():
            if line.startswith("ref: ") and line.endswith("\tHEAD"):
                target = line[5:].split("\t", 1)[0]
                if target.startswith("refs/heads/"):
                    self.git.run("symbolic-ref", "HEAD", target)
                return

    # --- reading -------------------------------------------------------------------------

    def refs(self, prefix: str = "refs/") -> dict[str, str]:
        """ref name -> commit SHA (tags peeled to their commit)."""
        out = self.git.run("for-each-ref", "--format=%(objectname) %(*objectname) %(refname)", prefix)
        refs: dict[str, str] = {}
        for line in out.splitlines():
            parts = line.split(" ")
            if len(parts) == 3:
                obj, peeled, name = parts
                refs[name] = peeled or obj
        return refs

    def default_branch(self) -> str:
        """The remote's HEAD branch name (e.g. main), as recorded at the last update."""
        try:
            ref = self.git.run("symbolic-ref", "HEAD").strip()
        except GitFailed:
            raise InputError(
                f"{self.url}: the remote's default branch is unknown; name canonical_branch"
            ) from None
        if not ref.startswith("refs/heads/") or not self.git.ok("rev-parse", "--verify", "--quiet", ref):
            raise InputError(f"{self.url}: the remote's default branch is unknown; name canonical_branch")
        return ref[len("refs/heads/") :]

    def branch_head(self, branch: str) -> str:
        check_ref(branch)
        sha = self._verify(f"refs/heads/{branch}")
        if sha is None:
            raise InputError(f"{self.url}: no branch {branch!r}{self.why_absent(f'refs/heads/{branch}')}")
        return sha

    def why_absent(self, ref: str) -> str:
        """Why a ref is not here when the local copy has it: '' or ' (… points at X, which … lacks)'."""
        sha = self.skipped_refs.get(ref)
        if sha is None:
            return ""
        return f" (in the mirror {self.source} {ref} points at {sha}, an object the mirror does not have)"

    def pr_head(self, number: int) -> str | None:
        """The commit refs/pull/N/head points at, or None when the remote has no such PR."""
        return self._verify(f"refs/pull/{int(number)}/head")

    def resolve(self, rev: str) -> str:
        """A branch, tag, full ref or (abbreviated) SHA -> the full commit SHA. InputError when unknown."""
        check_ref(rev)
        candidates = (rev,) if rev.startswith("refs/") else (rev, f"refs/heads/{rev}", f"refs/tags/{rev}")
        for candidate in candidates:
            sha = self._verify(candidate)
            if sha:
                return sha
        why = next((self.why_absent(c) for c in candidates if self.why_absent(c)), "")
        raise InputError(f"{self.url}: cannot resolve {rev!r} to a commit{why}")

    def _verify(self, rev: str) -> str | None:
        try:
            out = self.git.run(
                "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"
            ).strip()
        except GitFailed:
            return None
        return out if _SHA1.match(out) else None

    def has_commit(self, sha: str) -> bool:
        return self._verify(sha) is not None

    def tree_of(self, commit: str) -> str:
        return self.git.run("rev-parse", "--verify", "--end-of-options", f"{commit}^{{tree}}").strip()

    def commit_time(self, commit: str) -> int:
        return int(self.git.run("show", "-s", "--format=%ct", "--end-of-options", commit).strip())

    def refs_containing(self, commit: str, *prefixes: str) -> list[str]:
        """Every ref (branch, tag, PR head; or under ``prefixes``) from which ``commit`` is reachable."""
        out = self.git.run("for-each-ref", f"--contains={commit}", "--format=%(refname)", *prefixes)
        return [line for line in out.splitlines() if line]

    def published_by(self, commit: str) -> str | None:
        """One ref that makes ``commit`` public, or None (an unpublished commit).

        Branches and tags first: a big forge repository has tens of thousands of PR refs,
        and the commit is nearly always on a branch.
        """
        for prefix in ("refs/heads/", "refs/tags/", "refs/pull/"):
            found = self.refs_containing(commit, prefix)
            if found:
                return found[0]
        return None
