"""A bare mirror per repository URL, kept in a cache and updated by fetch.

The mirror holds every branch, tag and ``refs/pull/N/head`` (how GitHub exposes pull
request heads to plain git), so PR heads resolve without a forge API. The remote's
credentials are never stored: the URL is passed on the fetch command line only, and
the mirror's config records nothing about where it came from except the public URL.

The cache entry is written by whoever can write the cache, so git never runs in it
(git/private.py): ``Mirror.git`` runs in a private repository of this process that borrows
the entry's objects and holds a copy of its refs, read as data. A fetch runs there too,
with the entry's object directory as the one it writes (``GIT_OBJECT_DIRECTORY``); the refs
it leaves are then stored into the entry as plain files (``private.write_refs``).

The one door to a remote: every git process that reads a URL (``fetch``, ``ls-remote``) runs in
this module, in ``fetch_into`` (which refuses a network URL offline) and ``Mirror._record_default_branch``;
``fetch_refs`` is how a stage reads some refs of another repository (an upstream): from its
``--mirror`` when there is one, else fetched (``tests/test_architecture.py`` holds every other
module to it).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from contextlib import AbstractContextManager
from pathlib import Path

from releasekit import atomic
from releasekit.bounded_read import read_bounded
from releasekit.errors import InputError
from releasekit.git.mirrors import OfflineNoMirror, is_offline, mirror_for
from releasekit.git.private import (
    ALTERNATES_MAX_BYTES,
    PRIVATE_CONFIG,
    PrivateRepo,
    check_git_dir,
    checked_object_dirs,
    git_dir_of,
    read_head,
    read_refs,
    write_refs,
)
from releasekit.git.remote import RemoteURL, check_ref, check_remote
from releasekit.git.runner import Git, GitFailed

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


# cache entry -> its private repository in this process (made on first use, its copy of the
# entry refreshed in place whenever this process writes the entry).
_VIEWS: dict[Path, PrivateRepo] = {}


def view_of(entry: Path, label: str) -> PrivateRepo:
    """The private repository that reads the cache entry ``entry`` (git/private.py)."""
    key = Path(os.path.abspath(entry))
    if key not in _VIEWS:
        _VIEWS[key] = PrivateRepo.of(key, label)
    return _VIEWS[key]


def refresh_view(entry: Path, label: str) -> None:
    """The entry changed: its private repository copies it again, in place, so a ``Git`` of it made
    earlier reads the new state."""
    key = Path(os.path.abspath(entry))
    view = _VIEWS.get(key)
    if view is not None:
        view.refresh(key, label)


def fetch_into(
    entry: Path,
    label: str,
    source: str,
    refspecs: list[str],
    *,
    allow_file: bool,
    options: tuple[str, ...] = (),
) -> None:
    """``git fetch source refspecs`` into the cache entry ``entry``, without running git in it.

    The fetch runs in the entry's private repository, writing objects into the entry's object
    directory; the refs it leaves are then stored into the entry. Call with the entry's lock held.
    Offline (``--offline``), a network ``source`` is refused before git runs (``OfflineNoMirror``).
    """
    if is_offline() and is_network_url(source):
        raise OfflineNoMirror(source)
    view = view_of(entry, label)
    objects = str(Path(os.path.abspath(entry)) / "objects")
    Git(view.path, allow_file=allow_file, bare=True, label=label).run(
        "fetch",
        "--quiet",
        "--force",
        "--no-write-fetch-head",
        *options,
        "--",
        source,
        *refspecs,
        extra_env={"GIT_OBJECT_DIRECTORY": objects},
    )
    store_view(entry, label)


def is_network_url(source: str) -> bool:
    """Whether git would reach the network for ``source``: a URL but ``file://``, or ``host:path``."""
    if source.startswith(("/", ".", "~")):
        return False
    if "://" in source:
        return not source.lower().startswith("file://")
    head = source.split("/", 1)[0]
    return ":" in head


def fetch_refs(entry: Path, label: str, remote: RemoteURL, wanted: dict[str, str]) -> Path | None:
    """Read refs of another repository (``wanted``: its ref, ``HEAD`` or a full SHA -> the name in the
    cache entry ``entry``) through the one door: from its ``--mirror``/``RELEASEKIT_MIRRORS`` copy
    when it has one (refs read as data, objects borrowed), else fetched from the URL (refused
    offline). Returns the mirror read, or None. Every wanted ref arrives, or InputError/GitFailed
    says why. Call with the entry's lock held."""
    local = mirror_for(remote.public)
    if local is None:
        fetch_into(
            entry,
            label,
            remote.url,
            [f"+{src}:{dest}" for src, dest in wanted.items()],
            allow_file=remote.is_local,
        )
        return None
    taken = borrow_refs(entry, label, local, wanted)
    for src, dest in wanted.items():
        if dest not in taken:
            raise InputError(f"{local} has no {src}")
    return local


def store_view(entry: Path, label: str) -> None:
    """Store the private repository's refs and HEAD into the cache entry (as plain files)."""
    view = view_of(entry, label)
    write_refs(entry, read_refs(view.path, label), read_head(view.path, label))
    refresh_view(entry, label)


def borrow_refs(entry: Path, label: str, source: Path, wanted: dict[str, str]) -> dict[str, str]:
    """Copy refs of the repository on disk ``source`` into the cache entry as data, and borrow its objects.

    ``wanted`` maps a ref of ``source`` (or ``HEAD``) to the name it gets in the entry. Nothing
    runs in ``source``: its refs are read from its files and its object directory is checked
    (git/private.py) and added to the entry's ``objects/info/alternates``. Returns the refs
    taken (entry name -> object id). Call with the entry's lock held.
    """
    where = f"{source} (mirror of {label})"
    gitdir = git_dir_of(source, where)
    checked_object_dirs(gitdir / "objects", where)
    theirs = read_refs(gitdir, where)
    head = read_head(gitdir, where)
    if head is not None:
        theirs["HEAD"] = theirs.get(head, "") if head.startswith("refs/") else head
    _add_alternate(entry, gitdir / "objects", label)
    view = view_of(entry, label)
    for src in wanted:
        if _SHA1.match(src) and src not in theirs and _has_commit(view.path, label, src):
            theirs[src] = src  # a commit named by its id (an upstream ref pinned to a commit)
    taken = {dest: theirs[src] for src, dest in wanted.items() if theirs.get(src)}
    refs = read_refs(view.path, label)
    refs.update(taken)
    write_refs(entry, refs, read_head(view.path, label))
    refresh_view(entry, label)
    return taken


def _has_commit(view: Path, label: str, sha: str) -> bool:
    return Git(view, bare=True, label=label).ok("cat-file", "-e", f"{sha}^{{commit}}")


def _add_alternate(entry: Path, objects: Path, label: str) -> None:
    """List ``objects`` in the entry's ``objects/info/alternates`` (first), keeping the other entries."""
    listing = Path(os.path.abspath(entry)) / "objects" / "info" / "alternates"
    current = checked_object_dirs(listing.parent.parent, label)[1:]
    wanted = [Path(os.path.abspath(objects))] + [d for d in current if d != Path(os.path.abspath(objects))]
    text = "".join(f"{d}\n" for d in wanted)
    if not listing.is_file() or listing.read_text(encoding="utf-8") != text:
        atomic.write_bytes(listing, text.encode())
    refresh_view(entry, label)


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
        self.path = Path(os.path.abspath(self.cache_dir / _mirror_dirname(self.remote.public)))
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

    @property
    def git(self) -> Git:
        """git in this process's private repository of the mirror (its objects, a copy of its refs)."""
        view = view_of(self.path, self.remote.public)
        return Git(view.path, allow_file=self.remote.is_local, bare=True, label=self.remote.public)

    def object_dirs(self) -> list[Path]:
        """The mirror's object directory and those it borrows, checked (git/private.py)."""
        return view_of(self.path, self.remote.public).object_dirs

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
                check_git_dir(self.path, self.url)  # the cache is writable by others: no FIFO to block on
            self._create()
            self._clear_stale_git_locks()
            if self.source is not None:
                self._borrow(self.source)
                return self
            self._drop_lost_alternates()
            refresh_view(self.path, self.url)  # another process may have written the entry while we waited
            try:
                fetch_into(
                    self.path,
                    self.url,
                    self.remote.url,
                    list(FETCH_REFSPECS),
                    allow_file=self.remote.is_local,
                    options=("--prune",),
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

        The cache entry lists ``source``'s object directory in ``objects/info/alternates`` and
        copies its refs, read from its files (no git process runs in ``source``, git/private.py),
        so no object is copied or checked. A ref whose commit is absent from the copy (a snapshot
        without some objects) is left out and listed in ``skipped_refs``; a missing object deeper
        down fails only when something reads it.
        """
        where = f"{source} (mirror of {self.url})"
        gitdir = git_dir_of(source, where)
        check_git_dir(gitdir, where)  # before anything there is opened: a FIFO would hang the reader
        wanted: dict[str, str] = {}
        for name, sha in read_refs(gitdir, where).items():
            if not name.startswith(_BORROWED_PREFIXES):
                continue
            if name.startswith("refs/pull/") and not _PR_HEAD.match(name):
                continue
            wanted[name] = sha
        listing = self.path / "objects" / "info" / "alternates"
        checked_object_dirs(gitdir / "objects", where)
        atomic.write_bytes(listing, f"{Path(os.path.abspath(gitdir / 'objects'))}\n".encode())
        refresh_view(self.path, self.url)
        present = self._present(set(wanted.values()))
        self.skipped_refs = {name: sha for name, sha in sorted(wanted.items()) if sha not in present}
        view = view_of(self.path, self.url)
        refs = {
            n: v for n, v in read_refs(view.path, self.url).items() if not n.startswith(_BORROWED_PREFIXES)
        }
        refs.update({name: sha for name, sha in wanted.items() if sha in present})
        head = read_head(gitdir, where)
        if not (head is not None and head.startswith("refs/heads/") and head in refs):
            head = read_head(view.path, self.url)
        write_refs(self.path, refs, head)
        refresh_view(self.path, self.url)

    def _drop_lost_alternates(self) -> None:
        """A cache that borrowed from a mirror which is gone now starts again from nothing.

        Its refs name objects only the mirror had; fetching into it would tell the remote it
        has them. While the mirror is still there its objects stay borrowed.
        """
        listing = self.path / "objects" / "info" / "alternates"
        if not os.path.lexists(listing):
            return
        try:
            checked_object_dirs(self.path / "objects", self.url)  # refuses a FIFO before it is read
            text = read_bounded(listing, ALTERNATES_MAX_BYTES).decode("utf-8")
            entries = [
                line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")
            ]
            if all(os.path.isdir(listing.parent.parent / entry) for entry in entries):
                return
        except (InputError, OSError, UnicodeDecodeError):
            pass  # a link to a FIFO, a loop: start again too
        shutil.rmtree(self.path)
        refresh_view(self.path, self.url)
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
        # The layout git init makes, written here: git never runs in the entry (git/private.py).
        for sub in ("objects/info", "objects/pack", "refs/heads", "refs/tags"):
            (tmp / sub).mkdir(parents=True)
        (tmp / "HEAD").write_text("ref: refs/heads/master\n", encoding="utf-8")  # git init's own
        (tmp / "config").write_text(
            f"{PRIVATE_CONFIG}[releasekit]\n\turl = {self.remote.public}\n", encoding="utf-8"
        )
        atomic.failpoint("git-mirror-init")
        atomic.move_dir_into_place(tmp, self.path)
        refresh_view(self.path, self.url)

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
        """The remote's HEAD branch, into the entry's HEAD. Call with the lock held."""
        if is_offline():
            return
        try:
            out = self.git.run("ls-remote", "--symref", "--", self.remote.url, "HEAD")
        except GitFailed:
            return
        for line in out.splitlines():
            if line.startswith("ref: ") and line.endswith("\tHEAD"):
                target = line[5:].split("\t", 1)[0]
                if target.startswith("refs/heads/"):
                    self.git.run("symbolic-ref", "HEAD", target)
                    store_view(self.path, self.url)
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
