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

from releasekit.git.runner import Git  # noqa: E402
from releasekit.manifest import load_manifest  # noqa: E402
from releasekit.plan.check import check_plan  # noqa: E402
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

    def commit(self, ref: str, message: str, files: dict[str, str], parent: int | None = None, merge: int | None = None) -> int:
        self.mark += 1
        self.time += 10
        msg = message.encode()
        out = [f"commit {ref}\nmark :{self.mark}\n", f"committer Bench <bench@example.invalid> {self.time} +0000\n"]
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
            canon = s.commit("refs/heads/main", f"after fork {step}.{j}", {f"src/g{j}.txt": f"{step}.{j}\n"}, parent=canon)
            k = next(picks, None)
            if k is not None:
                canon = s.commit("refs/heads/main", f"cherry-pick release {k}", release_changes[k], parent=canon)
            k = next(picks, None)
            if k is not None:
                canon = s.commit("refs/heads/main", f"cherry-pick release {k}", release_changes[k], parent=canon)
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
    proc = subprocess.run(["git", "--git-dir", str(repo), "fast-import", "--quiet"], input=s.bytes(), capture_output=True)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr.decode())
    total = int(subprocess.run(["git", "--git-dir", str(repo), "rev-list", "--count", "main"], capture_output=True, text=True, check=True).stdout)
    return {"repo": repo, "commits_on_main": total, "pr_methods": pr_methods}


def timed(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def git_cherry(repo: Path, upstream: str, head: str) -> list[str]:
    out = subprocess.run(["git", "--git-dir", str(repo), "cherry", upstream, head], capture_output=True, text=True, check=True).stdout
    return [line[2:] for line in out.splitlines() if line.startswith("+ ")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=20_000, help="base commits on canonical before the release fork")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
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
        manifest.write_text(json.dumps({
            "schema": "releasekit/v1",
            "name": "bench",
            "components": {"vllm": {"kind": "git", "repo": str(repo), "canonical_branch": "main", "distribution": "vllm", "merge_plan": plan}},
            "toolchain": {"base_image": {"name": "none", "digest": "to-be-locked"}, "cuda_arch_list": ["12.0a"]},
        }))
        os.environ["RELEASEKIT_ALLOW_LOCAL_REPOS"] = "1"
        os.environ["RELEASEKIT_CACHE"] = str(root / "cache")
        loaded = load_manifest(manifest)
        check_plan(loaded)  # creates the mirror (a one-time clone, not part of the check)
        check_s, result = timed(lambda: check_plan(loaded, fetch=False), args.repeat)
        merged = {s.pr for c in result.components for s in c.statuses if s.state == "merged"}  # type: ignore[union-attr]
        heads = {n: rev(f"refs/pull/{n}/head") for n in built["pr_methods"]}
        pr_cherry_s, cherry_answer = timed(lambda: {n: not git_cherry(repo, "main", h) for n, h in heads.items()}, args.repeat)
        cherry_merged = {n for n, ok in cherry_answer.items() if ok}  # type: ignore[union-attr]
        squashed = {n for n, m in built["pr_methods"].items() if m == "squash"}
        same_plan = result.passed and merged == set(heads) and cherry_merged == set(heads) - squashed  # type: ignore[union-attr]

    figures = {
        "commits_on_canonical": built["commits_on_main"],
        "build_repo_s": round(build_s, 2),
        "release_only": {"commits": RELEASE_COMMITS, "releasekit_s": round(ours_s, 3), "git_cherry_s": round(cherry_s, 3),
                         "ratio": round(ours_s / cherry_s, 2), "same_answer": same_release, "release_only_found": len(ours_plus)},
        "plan_check": {"prs": N_PRS, "releasekit_s": round(check_s, 3), "git_cherry_per_pr_s": round(pr_cherry_s, 3),
                       "ratio": round(check_s / pr_cherry_s, 2), "same_answer": same_plan,
                       "note": "git cherry cannot see the squash-merged PRs; releasekit finds all 20 merged"},
    }
    print(f"canonical: {figures['commits_on_canonical']} commits (repository built in {figures['build_repo_s']} s)")
    ro, pc = figures["release_only"], figures["plan_check"]
    print(f"audit release-only ({RELEASE_COMMITS} commits): releasekit {ro['releasekit_s']} s, git cherry {ro['git_cherry_s']} s, "
          f"ratio {ro['ratio']}x, same answer: {ro['same_answer']} ({ro['release_only_found']} release-only)")
    print(f"plan check ({N_PRS} PRs): releasekit {pc['releasekit_s']} s, git cherry x{N_PRS} {pc['git_cherry_per_pr_s']} s, "
          f"ratio {pc['ratio']}x, same answer: {pc['same_answer']}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    if not (same_release and same_plan):
        raise SystemExit("answers differ from git cherry")


if __name__ == "__main__":
    main()
