"""Benchmark: ``plan check`` (20 PRs) and ``audit release-only`` (500 commits) against ``git cherry``.

Builds a synthetic repository with ``git fast-import`` (one process): a canonical branch
of at least 20,000 commits, 20 PRs landed in plan order (merge commits, rebase merges,
squash merges) and a 500-commit release branch of which 400 commits were later
cherry-picked onto canonical. Then, in the same run and on the same repository:

- release-only: ``find_release_only`` vs ``git cherry CANONICAL RELEASE`` (answers must be identical);
- plan check: ``check_plan`` on a 20-PR manifest vs ``git cherry CANONICAL refs/pull/N/head``
  for each PR (the nearest git-only equivalent; it cannot see squash merges).

Usage (from the repository root):  python benchmarks/bench_plan.py [--commits 20000] [--repeat 3]
Prints a table and the ratios; ``--json FILE`` also writes them.

``--fork-shape`` instead builds a history shaped like a real vLLM fork's release branch
(large diffs, many files): ``--commits`` canonical commits (default 4,000 there), a
229-commit release branch touching 860 files with ~117k inserted lines, 1,000 canonical
commits after the fork with real-sized diffs, and 5 release commits cherry-picked onto
canonical. It times the whole CLI, interpreter start included
(``python -m releasekit audit release-only --repo R --release release --canonical main --json``)
against ``git cherry main release``; goal: <= 1.5x git cherry + 0.2 s, same answer.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from releasekit.forge import GitHubForges  # noqa: E402
from releasekit.git.runner import Git  # noqa: E402
from releasekit.manifest import load_manifest  # noqa: E402
from releasekit.plan.check import PlanCheckOptions, check_plan  # noqa: E402
from releasekit.plan.release_only import find_release_only  # noqa: E402

N_PRS = 20
RELEASE_COMMITS = 500
RELEASE_ONLY = 100


class Stream:
    """Writes a git fast-import stream; every commit gets a mark and an increasing time."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.mark = 0
        self.time = 1_600_000_000

    def commit(
        self,
        ref: str,
        message: str,
        files: dict[str, str],
        parent: int | None = None,
        merge: int | None = None,
    ) -> int:
        self.mark += 1
        self.time += 10
        msg = message.encode()
        out = [
            f"commit {ref}\nmark :{self.mark}\n",
            f"committer Bench <bench@example.invalid> {self.time} +0000\n",
        ]
        out.append(f"data {len(msg)}\n")
        self.parts.append("".join(out).encode() + msg + b"\n")
        if parent is not None:
            self.parts.append(f"from :{parent}\n".encode())
        if merge is not None:
            self.parts.append(f"merge :{merge}\n".encode())
        for path, content in files.items():
            data = content.encode()
            self.parts.append(f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n")
        self.parts.append(b"\n")
        return self.mark

    def bytes(self) -> bytes:
        return b"".join(self.parts)


def build_repo(root: Path, base_commits: int) -> dict:
    repo = root / "vllm.git"
    subprocess.run(["git", "init", "--quiet", "--bare", "--initial-branch=main", str(repo)], check=True)
    s = Stream()
    canon = None
    for i in range(base_commits):
        canon = s.commit("refs/heads/main", f"base {i}", {f"src/f{i % 300}.txt": f"line {i}\n"}, parent=canon)
    # The release branch forks here: 500 commits, the first 400 later cherry-picked onto canonical.
    fork = canon
    rel = fork
    release_changes = []
    for k in range(RELEASE_COMMITS):
        change = {f"rel/{k}.txt": f"release change {k}\n"}
        rel = s.commit("refs/heads/release", f"release {k}", change, parent=rel)
        release_changes.append(change)
    # Canonical moves on: more base work, the cherry-picks, and the 20 PRs in plan order.
    pr_methods = {}
    picks = iter(range(RELEASE_COMMITS - RELEASE_ONLY))
    for step in range(N_PRS):
        for j in range(20):
            canon = s.commit(
                "refs/heads/main", f"after fork {step}.{j}", {f"src/g{j}.txt": f"{step}.{j}\n"}, parent=canon
            )
            k = next(picks, None)
            if k is not None:
                canon = s.commit(
                    "refs/heads/main", f"cherry-pick release {k}", release_changes[k], parent=canon
                )
            k = next(picks, None)
            if k is not None:
                canon = s.commit(
                    "refs/heads/main", f"cherry-pick release {k}", release_changes[k], parent=canon
                )
        number = 100 + step
        pr_files = [{f"pr/{number}/{c}.txt": f"PR {number} commit {c}\n"} for c in range(3)]
        head = canon
        for c, files in enumerate(pr_files):
            head = s.commit(f"refs/pull/{number}/head", f"PR {number} part {c}", files, parent=head)
        method = ("merge", "rebase", "squash")[step % 3]
        pr_methods[number] = method
        if method == "merge":
            canon = s.commit("refs/heads/main", f"Merge pull request #{number}", {}, parent=canon, merge=head)
        elif method == "rebase":
            for c, files in enumerate(pr_files):
                canon = s.commit("refs/heads/main", f"PR {number} part {c}", files, parent=canon)
        else:
            combined = {k: v for files in pr_files for k, v in files.items()}
            canon = s.commit("refs/heads/main", f"PR {number} (#{number})", combined, parent=canon)
    proc = subprocess.run(
        ["git", "--git-dir", str(repo), "fast-import", "--quiet"], input=s.bytes(), capture_output=True
    )
    if proc.returncode != 0:
        raise SystemExit(proc.stderr.decode())
    total = int(
        subprocess.run(
            ["git", "--git-dir", str(repo), "rev-list", "--count", "main"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    return {"repo": repo, "commits_on_main": total, "pr_methods": pr_methods}


FORK_RELEASE_COMMITS = 229
FORK_FILES = 860
FORK_LINES = 117_000
FORK_PICKS = 5


def build_fork_repo(root: Path, base_commits: int) -> dict:
    """Canonical + a release branch with large diffs over many files (see --fork-shape)."""
    repo = root / "fork.git"
    subprocess.run(["git", "init", "--quiet", "--bare", "--initial-branch=main", str(repo)], check=True)
    s = Stream()
    canon = None
    for i in range(base_commits):
        body = "".join(f"base {i} line {n}\n" for n in range(20))
        canon = s.commit(
            "refs/heads/main", f"base {i}", {f"vllm/m{i % 1500}/f{i % 7}.py": body}, parent=canon
        )
    rel = canon
    per_commit = FORK_LINES // FORK_RELEASE_COMMITS
    release_changes = []
    for k in range(FORK_RELEASE_COMMITS):
        files = {}
        for f in range(4):
            index = (k * 4 + f) % FORK_FILES
            files[f"vllm/release/d{index % 40}/r{index}.py"] = "".join(
                f"# release {k} file {index} line {n}\n" for n in range(per_commit // 4)
            )
        rel = s.commit("refs/heads/release", f"release {k}", files, parent=rel)
        release_changes.append(files)
    picks = {int(FORK_RELEASE_COMMITS * (p + 1) / (FORK_PICKS + 1)): p for p in range(FORK_PICKS)}
    for j in range(1000):
        body = "".join(f"upstream {j} line {n}\n" for n in range(60))
        canon = s.commit(
            "refs/heads/main", f"upstream {j}", {f"vllm/u{j % 800}/g{j % 5}.py": body}, parent=canon
        )
        if j % 150 == 0 and picks:
            k = next(iter(picks))
            del picks[k]
            canon = s.commit("refs/heads/main", f"cherry-pick release {k}", release_changes[k], parent=canon)
    proc = subprocess.run(
        ["git", "--git-dir", str(repo), "fast-import", "--quiet"], input=s.bytes(), capture_output=True
    )
    if proc.returncode != 0:
        raise SystemExit(proc.stderr.decode())
    stat = subprocess.run(
        ["git", "--git-dir", str(repo), "diff", "--shortstat", "main...release"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return {"repo": repo, "stat": stat}


def fork_shape(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="releasekit-bench-fork-") as tmp:
        start = time.perf_counter()
        built = build_fork_repo(Path(tmp), args.commits if args.commits != 20_000 else 4_000)
        build_s = time.perf_counter() - start
        repo = str(built["repo"])
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        argv = [
            sys.executable,
            "-m",
            "releasekit",
            "audit",
            "release-only",
            "--repo",
            repo,
            "--release",
            "release",
            "--canonical",
            "main",
            "--json",
        ]

        def cli() -> list[str]:
            out = subprocess.run(argv, capture_output=True, text=True, env=env)
            if out.returncode not in (0, 1):
                raise SystemExit(out.stderr)
            return [c["commit"] for c in json.loads(out.stdout)["release_only"]]

        cli()  # warm the page cache and bytecode, as for git below
        ours_s, ours = timed(cli, args.repeat)
        git_cherry(Path(repo), "main", "release")
        cherry_s, plus = timed(lambda: git_cherry(Path(repo), "main", "release"), args.repeat)
        git = Git(Path(repo), bare=True)
        canonical, release = git.run("rev-parse", "main").strip(), git.run("rev-parse", "release").strip()
        core_s, _ = timed(lambda: find_release_only(git, release, canonical, repo="bench"), args.repeat)
        help_s, _ = timed(
            lambda: subprocess.run(
                [sys.executable, "-m", "releasekit", "--help"], capture_output=True, env=env
            ),
            args.repeat,
        )
    goal = 1.5 * cherry_s + 0.2
    figures = {
        "release_commits": FORK_RELEASE_COMMITS,
        "diff": built["stat"],
        "build_repo_s": round(build_s, 2),
        "releasekit_cli_s": round(ours_s, 3),
        "in_process_s": round(core_s, 3),
        "cli_start_s": round(help_s, 3),
        "git_cherry_s": round(cherry_s, 3),
        "goal_s": round(goal, 3),
        "same_answer": ours == plus,
        "release_only_found": len(ours or []),
    }
    print(
        f"fork shape: {FORK_RELEASE_COMMITS} release commits ({built['stat']}), built in {figures['build_repo_s']} s"
    )
    print(
        f"audit release-only CLI end to end: {figures['releasekit_cli_s']} s, git cherry {figures['git_cherry_s']} s, "
        f"goal <= {figures['goal_s']} s (1.5x + 0.2 s), same answer: {figures['same_answer']} ({figures['release_only_found']} release-only)"
    )
    print(
        f"  of which: find_release_only in process {figures['in_process_s']} s; 'releasekit --help' (interpreter + imports) {figures['cli_start_s']} s"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    if not figures["same_answer"]:
        raise SystemExit("answers differ from git cherry")


def timed(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def git_cherry(repo: Path, upstream: str, head: str) -> list[str]:
    out = subprocess.run(
        ["git", "--git-dir", str(repo), "cherry", upstream, head], capture_output=True, text=True, check=True
    ).stdout
    return [line[2:] for line in out.splitlines() if line.startswith("+ ")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--commits", type=int, default=20_000, help="base commits on canonical before the release fork"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--fork-shape", action="store_true", help="large-diff release branch, whole-CLI timing (see above)"
    )
    args = parser.parse_args()
    if args.fork_shape:
        fork_shape(args)
        return
    with tempfile.TemporaryDirectory(prefix="releasekit-bench-") as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        built = build_repo(root, args.commits)
        build_s = time.perf_counter() - start
        repo: Path = built["repo"]
        git = Git(repo, bare=True)
        rev = lambda r: git.run("rev-parse", r).strip()  # noqa: E731
        canonical, release = rev("main"), rev("release")

        cherry_s, cherry_plus = timed(lambda: git_cherry(repo, "main", "release"), args.repeat)
        ours_s, report = timed(lambda: find_release_only(git, release, canonical, repo="bench"), args.repeat)
        ours_plus = [c.commit for c in report.release_only]  # type: ignore[union-attr]
        same_release = ours_plus == cherry_plus and len(ours_plus) == RELEASE_ONLY

        manifest = root / "bench.yaml"
        plan = [{"pr": n, "title": f"PR {n}"} for n in sorted(built["pr_methods"])]
        manifest.write_text(
            json.dumps(
                {
                    "schema": "releasekit/v1",
                    "name": "bench",
                    "components": {
                        "vllm": {
                            "kind": "git",
                            "repo": str(repo),
                            "canonical_branch": "main",
                            "distribution": "vllm",
                            "merge_plan": plan,
                        }
                    },
                    "toolchain": {
                        "base_image": {"name": "none", "digest": "to-be-locked"},
                        "cuda_arch_list": ["12.0a"],
                    },
                }
            )
        )
        os.environ["RELEASEKIT_ALLOW_LOCAL_REPOS"] = "1"
        os.environ["RELEASEKIT_CACHE"] = str(root / "cache")
        loaded = load_manifest(manifest)
        forges = GitHubForges()
        check_plan(loaded, forges=forges)  # creates the mirror (a one-time clone, not part of the check)
        check_s, result = timed(
            lambda: check_plan(loaded, PlanCheckOptions(fetch=False), forges=forges), args.repeat
        )
        merged = {s.pr for c in result.components for s in c.statuses if s.state == "merged"}  # type: ignore[union-attr]
        heads = {n: rev(f"refs/pull/{n}/head") for n in built["pr_methods"]}
        pr_cherry_s, cherry_answer = timed(
            lambda: {n: not git_cherry(repo, "main", h) for n, h in heads.items()}, args.repeat
        )
        cherry_merged = {n for n, ok in cherry_answer.items() if ok}  # type: ignore[union-attr]
        squashed = {n for n, m in built["pr_methods"].items() if m == "squash"}
        same_plan = result.passed and merged == set(heads) and cherry_merged == set(heads) - squashed  # type: ignore[union-attr]

    figures = {
        "commits_on_canonical": built["commits_on_main"],
        "build_repo_s": round(build_s, 2),
        "release_only": {
            "commits": RELEASE_COMMITS,
            "releasekit_s": round(ours_s, 3),
            "git_cherry_s": round(cherry_s, 3),
            "ratio": round(ours_s / cherry_s, 2),
            "same_answer": same_release,
            "release_only_found": len(ours_plus),
        },
        "plan_check": {
            "prs": N_PRS,
            "releasekit_s": round(check_s, 3),
            "git_cherry_per_pr_s": round(pr_cherry_s, 3),
            "ratio": round(check_s / pr_cherry_s, 2),
            "same_answer": same_plan,
            "note": "git cherry cannot see the squash-merged PRs; releasekit finds all 20 merged",
        },
    }
    print(
        f"canonical: {figures['commits_on_canonical']} commits (repository built in {figures['build_repo_s']} s)"
    )
    ro, pc = figures["release_only"], figures["plan_check"]
    print(
        f"audit release-only ({RELEASE_COMMITS} commits): releasekit {ro['releasekit_s']} s, git cherry {ro['git_cherry_s']} s, "
        f"ratio {ro['ratio']}x, same answer: {ro['same_answer']} ({ro['release_only_found']} release-only)"
    )
    print(
        f"plan check ({N_PRS} PRs): releasekit {pc['releasekit_s']} s, git cherry x{N_PRS} {pc['git_cherry_per_pr_s']} s, "
        f"ratio {pc['ratio']}x, same answer: {pc['same_answer']}"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    if not (same_release and same_plan):
        raise SystemExit("answers differ from git cherry")


if __name__ == "__main__":
    main()
