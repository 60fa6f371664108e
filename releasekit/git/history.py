"""Ancestry and patch-id over whole ranges, each in one or two git processes.

Nothing here runs git once per commit: a history of 20,000 commits is read with one
``git log``/``rev-list`` and patch-ids for a whole range come from one
``git log -p | git patch-id --stable`` pipe. Patch-ids are computed the way
``git cherry`` computes them: no rename detection, whitespace-insensitive, stable.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from releasekit.git.runner import Git, GitFailed, git_env

# Commits whose diff is empty produce no patch-id line; git cherry treats all of them as one
# patch, so they get this shared marker.
EMPTY_PATCH = "empty"
# The patch-id of a commit whose diff git could not read (a partial mirror lacks a blob it
# needs): ``unreadable:<commit>``, equal to no other commit's, so it matches nothing.
UNREADABLE_PATCH = "unreadable:"
# At most this many commits name on one ``git log --no-walk`` command line when the range is
# read commit by commit (a failed read is split until the commit that needs the object is alone).
_BATCH = 2000


def rev_list(git: Git, *revs: str, extra: Sequence[str] = ()) -> list[str]:
    """``git rev-list`` of positive/negative (``^x``) revisions, newest first."""
    if not revs:
        return []
    out = git.run("rev-list", *extra, *revs, "--")
    return out.split()


def first_parent_chain(git: Git, tip: str) -> list[str]:
    """The first-parent history of ``tip``, oldest first: how the branch itself moved."""
    return list(reversed(rev_list(git, tip, extra=["--first-parent"])))


def parents_of(git: Git, *revs: str) -> dict[str, list[str]]:
    """commit -> parents for every commit the revisions select."""
    out = git.run("rev-list", "--parents", *revs, "--")
    graph: dict[str, list[str]] = {}
    for line in out.splitlines():
        parts = line.split()
        if parts:
            graph[parts[0]] = parts[1:]
    return graph


def merge_base(git: Git, *commits: str) -> str | None:
    args = ["merge-base", "--octopus", *commits] if len(commits) > 2 else ["merge-base", *commits]
    try:
        out = git.run(*args).split()
    except GitFailed:
        return None
    return out[0] if out else None


def is_ancestor(git: Git, ancestor: str, descendant: str) -> bool:
    return git.ok("merge-base", "--is-ancestor", ancestor, descendant)


def commit_info(git: Git, commits: Iterable[str]) -> dict[str, tuple[int, str]]:
    """commit -> (committer time, subject), in one call."""
    wanted = list(dict.fromkeys(commits))
    if not wanted:
        return {}
    out = git.run("log", "--no-walk=unsorted", "--format=%H %ct %s", *wanted, "--")
    info: dict[str, tuple[int, str]] = {}
    for line in out.splitlines():
        sha, ct, *subject = line.split(" ", 2)
        info[sha] = (int(ct), subject[0] if subject else "")
    return info


def _patch_id_pipe(diff_argv: list[str], where: str = "") -> list[tuple[str, str]]:
    """Run ``git <diff_argv> | git patch-id --stable``: [(patch_id, commit)] in the log's order."""
    env = git_env()
    producer = subprocess.Popen(
        diff_argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, stdin=subprocess.DEVNULL
    )
    consumer = subprocess.run(
        [diff_argv[0], "patch-id", "--stable"], stdin=producer.stdout, capture_output=True, env=env
    )
    if producer.stdout:
        producer.stdout.close()
    err = producer.stderr.read().decode(errors="replace") if producer.stderr else ""
    if producer.stderr:
        producer.stderr.close()
    if producer.wait() != 0:
        raise GitFailed(
            diff_argv[diff_argv.index("log") if "log" in diff_argv else 1 :],
            producer.returncode,
            err,
            where=where,
        )
    if consumer.returncode != 0:
        raise GitFailed(
            ["patch-id"], consumer.returncode, consumer.stderr.decode(errors="replace"), where=where
        )
    pairs = []
    for line in consumer.stdout.decode().splitlines():
        parts = line.split()
        if len(parts) == 2:
            pairs.append((parts[0], parts[1]))
    return pairs


# --no-ext-diff/--no-textconv: a repository's own config must not run programs or change the
# text that patch-ids are computed from.
_LOG_PATCH = [
    "log",
    "-p",
    "--no-merges",
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--no-renames",
    "--full-index",
    "--binary",
    "--format=commit %H",
]


def patch_ids(git: Git, *revs: str, commits: list[str] | None = None) -> dict[str, str]:
    """commit -> patch-id for every non-merge commit the revisions select (``tip``, ``^base``).

    ``commits``: the non-merge commits of that selection when the caller already has them
    (saves a walk); commits with an empty diff map to EMPTY_PATCH, and a commit whose diff needs
    an object the mirror lacks maps to ``UNREADABLE_PATCH + commit`` (everything else is answered).
    """
    if not revs:
        return {}
    if commits is None:
        commits = rev_list(git, *revs, extra=["--no-merges"])
    if not commits:
        return {}
    try:
        pairs = _patch_id_pipe(git.argv([*_LOG_PATCH, *revs, "--"]), git.label)
    except GitFailed as exc:
        if not lacks_object(exc):
            raise
        pairs = _patch_ids_around_missing(git, commits)
    ids = {commit: pid for pid, commit in pairs}
    return {c: ids.get(c, EMPTY_PATCH) for c in commits}


def patch_id_set(git: Git, *revs: str) -> set[str]:
    """The distinct patch-ids of the non-merge commits of a range (empty diffs and diffs the
    mirror cannot read left out)."""
    try:
        return {pid for pid, _ in _patch_id_pipe(git.argv([*_LOG_PATCH, *revs, "--"]), git.label)}
    except GitFailed as exc:
        if not lacks_object(exc):
            raise
        commits = rev_list(git, *revs, extra=["--no-merges"])
        return {
            pid for pid, _ in _patch_ids_around_missing(git, commits) if not pid.startswith(UNREADABLE_PATCH)
        }


def lacks_object(exc: GitFailed) -> bool:
    """git failed because the repository lacks an object (a partial mirror), not for another reason."""
    return "unable to read" in exc.reason or "missing blob" in exc.reason or "bad object" in exc.reason


def _patch_ids_around_missing(git: Git, commits: list[str]) -> list[tuple[str, str]]:
    """[(patch_id, commit)] of ``commits`` read in batches; a batch that needs a missing object is
    halved until the commit that needs it is alone, and that commit gets ``UNREADABLE_PATCH``."""
    pairs: list[tuple[str, str]] = []
    pending = [commits[i : i + _BATCH] for i in range(0, len(commits), _BATCH)]
    while pending:
        batch = pending.pop()
        argv = git.argv([*_LOG_PATCH, "--no-walk=unsorted", *batch, "--"])
        try:
            pairs.extend(_patch_id_pipe(argv, git.label))
        except GitFailed as exc:
            if not lacks_object(exc):
                raise
            if len(batch) == 1:
                pairs.append((UNREADABLE_PATCH + batch[0], batch[0]))
            else:
                half = len(batch) // 2
                pending += [batch[:half], batch[half:]]
    return pairs


CHANGED_PATHS = ["diff", "--name-only", "--no-renames", "--no-ext-diff"]
COMMITS_CHANGED_PATHS = ["log", "--no-merges", "--name-only", "--no-renames", "--format=commit %H"]


def changed_paths(git: Git, old: str, new: str) -> frozenset[str]:
    """The paths ``old..new`` changes (a tree diff: no file contents are read)."""
    return frozenset(git.run(*CHANGED_PATHS, old, new, "--").splitlines())


def commits_changed_paths(git: Git, *revs: str) -> dict[str, frozenset[str]]:
    """commit -> the paths it changes, for every non-merge commit of the selection, in one walk.

    Equal path sets are necessary for equal patch-ids (a patch-id hashes each file's name):
    git cherry's own prefilter, used to read full diffs only where they could match.
    """
    return parse_commits_changed_paths(git.run(*COMMITS_CHANGED_PATHS, *revs, "--"))


def parse_commits_changed_paths(out: str) -> dict[str, frozenset[str]]:
    """The output of ``COMMITS_CHANGED_PATHS + revs``: commit -> the paths it changes."""
    paths: dict[str, set[str]] = {}
    current: set[str] | None = None
    for line in out.splitlines():
        if line.startswith("commit ") and len(line) in (47, 71):
            current = paths.setdefault(line[7:], set())
        elif line and current is not None:
            current.add(line)
    return {commit: frozenset(names) for commit, names in paths.items()}


class Pending:
    """A git command started now and read later: independent reads run side by side.

    Each is its own process; ``result()`` waits for it (stdout, or GitFailed). Reading
    them in any order cannot deadlock: a process blocked on a full pipe resumes when read.
    """

    def __init__(self, git: Git, *args: str, env: dict[str, str] | None = None) -> None:
        self.args = list(args)
        self.proc = subprocess.Popen(
            git.argv(self.args),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env=env if env is not None else git_env(),
        )

    def result(self) -> str:
        out, err = self.proc.communicate()
        if self.proc.returncode != 0:
            raise GitFailed(self.args, self.proc.returncode, err.decode(errors="replace"))
        return out.decode(errors="replace")


def cherry_args(upstream: str, head: str, limit: str | None = None) -> list[str]:
    """The arguments of ``git cherry UPSTREAM HEAD [LIMIT]`` (read with ``parse_cherry``)."""
    return ["cherry", "--end-of-options", upstream, head, *([limit] if limit is not None else [])]


def parse_cherry(out: str) -> tuple[list[str], list[str]]:
    plus: list[str] = []
    minus: list[str] = []
    for line in out.splitlines():
        sign, _, sha = line.partition(" ")
        (plus if sign == "+" else minus).append(sha.strip())
    return plus, minus


def cherry(git: Git, upstream: str, head: str, limit: str | None = None) -> tuple[list[str], list[str]]:
    """``git cherry UPSTREAM HEAD [LIMIT]`` in one process: (commits with no equivalent, commits with one), oldest first.

    Merge commits are skipped (their parents' commits are listed); commits reachable from
    ``limit`` are left out.
    """
    return parse_cherry(git.run(*cherry_args(upstream, head, limit)))


def graph_with_subjects(git: Git, *revs: str) -> dict[str, tuple[list[str], str]]:
    """commit -> (parents, subject) for the selection, newest first, in one walk."""
    return {c: (parents, subject) for c, (parents, _tree, subject) in graph_with_trees(git, *revs).items()}


GRAPH_WITH_TREES = ["log", "--format=%H %T %P%x09%s"]


def parse_graph_with_trees(out: str) -> dict[str, tuple[list[str], str, str]]:
    """The output of ``GRAPH_WITH_TREES + revs``: commit -> (parents, tree, subject), newest first."""
    graph: dict[str, tuple[list[str], str, str]] = {}
    for line in out.splitlines():
        ids, _, subject = line.partition("\t")
        parts = ids.split()
        if len(parts) >= 2:
            graph[parts[0]] = (parts[2:], parts[1], subject)
    return graph


def graph_with_trees(git: Git, *revs: str) -> dict[str, tuple[list[str], str, str]]:
    """commit -> (parents, tree, subject) for the selection, newest first, in one walk."""
    return parse_graph_with_trees(git.run(*GRAPH_WITH_TREES, *revs, "--"))


def resolve_commits(git: Git, *revs: str) -> list[str] | None:
    """Each revision's commit, in one process; None when any of them does not name a commit.

    The caller checks the names first (``check_ref``: none starts with ``-``); git echoes
    ``--end-of-options`` when not given ``--verify``, which takes one name only.
    """
    out = git.run("rev-parse", *[f"{rev}^{{commit}}" for rev in revs], check=False)
    shas = out.split()
    return shas if len(shas) == len(revs) and all(len(s) in (40, 64) for s in shas) else None


def diff_patch_id(git: Git, old: str, new: str, paths: Sequence[str] = ()) -> str:
    """The patch-id of the combined change old..new (a squash of the whole range); ``paths``: only those files."""
    argv = git.argv(
        [
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--no-renames",
            "--full-index",
            "--binary",
            old,
            new,
            "--",
            *paths,
        ]
    )
    # patch-id needs a commit line to attribute the diff to; a fixed placeholder does.
    env = git_env()
    diff = subprocess.run(argv, capture_output=True, env=env, stdin=subprocess.DEVNULL)
    if diff.returncode != 0:
        raise GitFailed(
            ["diff", old, new], diff.returncode, diff.stderr.decode(errors="replace"), where=git.label
        )
    if not diff.stdout.strip():
        return EMPTY_PATCH
    stdin = b"commit " + b"0" * 40 + b"\n" + diff.stdout
    proc = subprocess.run([argv[0], "patch-id", "--stable"], input=stdin, capture_output=True, env=env)
    out = proc.stdout.decode().split()
    return out[0] if out else EMPTY_PATCH


@dataclass
class Landing:
    """Where each commit reachable from a tip entered that tip's first-parent history."""

    chain: list[str]  # first-parent commits, oldest first
    index: dict[str, int] = field(
        default_factory=dict
    )  # commit -> position in chain of the commit that brought it

    def landed_by(self, commit: str) -> str | None:
        i = self.index.get(commit)
        return self.chain[i] if i is not None else None

    def contains(self, commit: str) -> bool:
        return commit in self.index


def landing_map(git: Git, tip: str) -> Landing:
    """For every ancestor of ``tip``: the first first-parent commit whose history contains it.

    One ``rev-list --parents`` read; then each first-parent commit, oldest first, claims
    the ancestors of its other parents that no earlier first-parent commit reached.
    """
    graph = parents_of(git, tip)
    chain: list[str] = []
    # rev-list prints the tip first: this also turns a ref name into its SHA.
    node: str | None = next(iter(graph), None)
    while node is not None:
        chain.append(node)
        parents = graph.get(node) or []
        node = parents[0] if parents else None
    chain.reverse()
    index: dict[str, int] = {}
    for i, fp in enumerate(chain):
        index[fp] = i
        stack = list((graph.get(fp) or [])[1:])
        while stack:
            c = stack.pop()
            if c in index:
                continue
            index[c] = i
            stack.extend(graph.get(c) or [])
    return Landing(chain=chain, index=index)
