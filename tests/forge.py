"""A forge-like git remote for tests: a bare repository with branches and ``refs/pull/N/head``.

It does what GitHub does to a repository, with plain git: open a PR (push its head to
``refs/pull/N/head``), merge it with a merge commit, squash it or rebase it onto the
base branch, cherry-pick, force-push a PR head, keep a release branch. Every commit
gets its own, increasing committer time, so "when did it land" has one answer.

Used by the plan tests and by the build tests (``Forge(tmp_path / "vllm").url``).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


class Clock:
    """Committer time shared by several forges, so "which landed first" is comparable across repositories."""

    def __init__(self, start: int = 1_700_000_000) -> None:
        self.now = start

    def tick(self) -> int:
        self.now += 60
        return self.now


class Forge:
    def __init__(
        self, root: Path, name: str = "repo", default_branch: str = "main", clock: Clock | None = None
    ) -> None:
        self.root = Path(root)
        self.name = name
        self.remote = self.root / f"{name}.git"
        self.work = self.root / f"{name}-work"
        self.default_branch = default_branch
        self.clock = clock or Clock()
        self._prs: dict[int, tuple[str, str]] = {}  # number -> (base branch, head branch)
        self.root.mkdir(parents=True, exist_ok=True)
        self._git(None, "init", "--quiet", "--bare", f"--initial-branch={default_branch}", str(self.remote))
        self._git(None, "init", "--quiet", f"--initial-branch={default_branch}", str(self.work))
        self.git("remote", "add", "origin", str(self.remote))

    # --- plumbing ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """What a manifest names: the bare remote's path (tests allow local repos)."""
        return str(self.remote)

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        stamp = f"{self.clock.now} +0000"
        env.update(
            GIT_CONFIG_NOSYSTEM="1",
            GIT_CONFIG_GLOBAL="/dev/null",
            GIT_AUTHOR_NAME="Forge Test",
            GIT_AUTHOR_EMAIL="forge@example.invalid",
            GIT_COMMITTER_NAME="Forge Test",
            GIT_COMMITTER_EMAIL="forge@example.invalid",
            GIT_AUTHOR_DATE=stamp,
            GIT_COMMITTER_DATE=stamp,
        )
        return env

    def _git(self, cwd: Path | None, *args: str) -> str:
        argv = ["git", "-c", "protocol.file.allow=always", "-c", "commit.gpgsign=false"]
        if cwd is not None:
            argv += ["-C", str(cwd)]
        proc = subprocess.run([*argv, *args], capture_output=True, text=True, env=self._env())
        if proc.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout

    def git(self, *args: str) -> str:
        return self._git(self.work, *args)

    def remote_git(self, *args: str) -> str:
        return self._git(None, "--git-dir", str(self.remote), *args)

    def _tick(self) -> None:
        self.clock.tick()

    def rev(self, rev: str) -> str:
        return self.git("rev-parse", "--verify", f"{rev}^{{commit}}").strip()

    def remote_rev(self, ref: str) -> str:
        return self.remote_git("rev-parse", "--verify", f"{ref}^{{commit}}").strip()

    def tree(self, rev: str) -> str:
        return self.git("rev-parse", f"{rev}^{{tree}}").strip()

    # --- history -------------------------------------------------------------------------

    def switch(self, branch: str, start: str | None = None) -> None:
        if start is not None:
            self.git("checkout", "--quiet", "-B", branch, start)
        else:
            self.git("checkout", "--quiet", branch)

    def commit(self, files: dict[str, str | None], message: str, *, branch: str | None = None) -> str:
        """Write (or, with None, delete) files and commit them on ``branch`` (default: current)."""
        if branch is not None:
            self.switch(branch)
        for rel, content in files.items():
            path = self.work / rel
            if content is None:
                self.git("rm", "--quiet", "--", rel)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
            self.git("add", "--", rel)
        self._tick()
        self.git("commit", "--quiet", "--allow-empty", "-m", message)
        return self.rev("HEAD")

    def push(self, *branches: str) -> None:
        self.git(
            "push", "--quiet", "--force", "origin", *[f"refs/heads/{b}:refs/heads/{b}" for b in branches]
        )

    def init(self, files: dict[str, str] | None = None, message: str = "initial commit") -> str:
        sha = self.commit(files or {"README": f"{self.name}\n"}, message)
        self.push(self.default_branch)
        return sha

    # --- pull requests -------------------------------------------------------------------

    def open_pr(
        self,
        number: int,
        commits: list[dict[str, str | None]],
        *,
        base: str | None = None,
        start: str | None = None,
        title: str | None = None,
    ) -> str:
        """Branch from ``start`` (default: the base branch head), add one commit per dict, publish refs/pull/N/head."""
        base = base or self.default_branch
        head_branch = f"pr-{number}"
        self.switch(head_branch, start or base)
        for i, files in enumerate(commits):
            self.commit(files, f"{title or f'PR {number}'} part {i + 1}")
        head = self.rev("HEAD")
        self.git("push", "--quiet", "--force", "origin", f"{head}:refs/pull/{number}/head")
        self._prs[number] = (base, head_branch)
        self.switch(base)
        return head

    def pr_head(self, number: int) -> str:
        return self.remote_rev(f"refs/pull/{number}/head")

    def force_push_pr(
        self, number: int, commits: list[dict[str, str | None]], *, start: str | None = None
    ) -> str:
        """Rewrite the PR: a new head built from ``start`` (default: the PR's base), force-pushed."""
        base, head_branch = self._prs[number]
        self.switch(head_branch, start or base)
        for i, files in enumerate(commits):
            self.commit(files, f"PR {number} rewritten part {i + 1}")
        head = self.rev("HEAD")
        self.git("push", "--quiet", "--force", "origin", f"{head}:refs/pull/{number}/head")
        self.switch(base)
        return head

    def merge_pr(self, number: int, method: str = "merge", *, into: str | None = None) -> str:
        """Land a PR on its base the way a forge does: merge commit, squash or rebase. Returns the new base head."""
        base, head_branch = self._prs[number]
        into = into or base
        self.switch(into)
        head = self.pr_head(number)
        self._tick()
        if method == "merge":
            self.git("merge", "--quiet", "--no-ff", "-m", f"Merge pull request #{number}", head)
        elif method == "squash":
            self.git("merge", "--quiet", "--squash", head)
            self.git("commit", "--quiet", "-m", f"PR {number} (#{number})")
        elif method == "rebase":
            fork = self.git("merge-base", into, head).strip()
            commits = self.git("rev-list", "--reverse", "--no-merges", f"{fork}..{head}").split()
            for sha in commits:
                self._tick()
                self.git("cherry-pick", "--allow-empty", sha)
        else:
            raise ValueError(method)
        self.push(into)
        return self.rev("HEAD")

    def cherry_pick(self, sha: str, onto: str) -> str:
        self.switch(onto)
        self._tick()
        self.git("cherry-pick", "--allow-empty", sha)
        self.push(onto)
        return self.rev("HEAD")

    def delete_remote_ref(self, ref: str) -> None:
        self.remote_git("update-ref", "-d", ref)
