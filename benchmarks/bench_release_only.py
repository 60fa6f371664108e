"""Benchmark: ``audit release-only`` end to end on a real fork snapshot against ``git cherry``.

Usage (from the repository root):

    python benchmarks/bench_release_only.py SNAPSHOT [--release dev/unholy-fusion]
        [--canonical main] [--upstream SHA] [--repeat 11] [--json FILE]

SNAPSHOT is a bare clone of the local-inference-lab vLLM fork (read only: nothing is
written into it). It holds no upstream ref; ``--upstream`` defaults to upstream vLLM's
main as the fork merged it: 52a31ccec, the second parent of da05721d5 "Merge
remote-tracking branch 'upstream/main' into dsv4-sm120-flashinfer" on dev/unholy-fusion.

Each round runs, interleaved (a burst of load on a shared machine hits all alike), each
as a fresh process:

- ``git cherry CANONICAL RELEASE`` (the reference the goal is stated against) and
  ``git cherry CANONICAL RELEASE UPSTREAM`` (the same refs with the upstream as limit);
- ``releasekit audit release-only --repo SNAPSHOT --release R --canonical C --upstream U --json``
  and the same without ``--upstream``, CLI start included, on this interpreter
  (``sys.executable``: a pyenv shim would add its own bash start to every run);
- ``releasekit --version`` (the CLI start alone).

The answers must agree, or it exits 1: the fork commits releasekit reports are exactly
``git cherry C R U``'s ``+`` lines (releasekit adds merge resolutions, which git cherry
skips), and without an upstream its commits are exactly ``git cherry C R``'s ``+`` lines.
Prints wall-clock medians and minima, and the median CPU time (user + sys, the process
and its children: less sensitive to other jobs on a shared machine than wall time); the
goal is <= 1.5 x ``git cherry C R`` + 0.2 s of wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
UPSTREAM_AS_MERGED = "52a31ccecca203effd490a5b496dc5f8d9496654"


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the process and its children, stdout)."""
    cpu = _cpu()
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv[:6])} …: exit {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return elapsed, _cpu() - cpu, proc.stdout


def _plus(out: str) -> list[str]:
    return [line[2:] for line in out.splitlines() if line.startswith("+ ")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("snapshot", type=Path, help="bare clone of the vLLM fork")
    ap.add_argument("--release", default="dev/unholy-fusion")
    ap.add_argument("--canonical", default="main")
    ap.add_argument("--upstream", default=UPSTREAM_AS_MERGED)
    ap.add_argument("--repeat", type=int, default=11)
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args()
    snap = str(args.snapshot)
    with tempfile.TemporaryDirectory(prefix="bench-relonly-") as cache:
        env = {**os.environ, "PYTHONPATH": str(REPO), "RELEASEKIT_CACHE": cache}
        audit = [
            sys.executable,
            "-m",
            "releasekit",
            "audit",
            "release-only",
            "--repo",
            snap,
            "--release",
            args.release,
            "--canonical",
            args.canonical,
            "--json",
        ]
        commands = {
            "git cherry C R": ["git", "--git-dir", snap, "cherry", args.canonical, args.release],
            "git cherry C R U": [
                "git",
                "--git-dir",
                snap,
                "cherry",
                args.canonical,
                args.release,
                args.upstream,
            ],
            "releasekit --upstream": [*audit, "--upstream", args.upstream],
            "releasekit (no upstream)": audit,
            "releasekit --version": [sys.executable, "-m", "releasekit", "--version"],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        outputs: dict[str, str] = {}
        names = list(commands)
        for round_ in range(args.repeat):
            for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                elapsed, used, out = _run(commands[name], env)
                times[name].append(elapsed)
                cpu[name].append(used)
                outputs[name] = out
    with_up = json.loads(outputs["releasekit --upstream"])
    without = json.loads(outputs["releasekit (no upstream)"])
    fork_commits = [c["commit"] for c in with_up["release_only"] if c["kind"] == "commit"]
    all_commits = [c["commit"] for c in without["release_only"] if c["kind"] == "commit"]
    agree = fork_commits == _plus(outputs["git cherry C R U"]) and all_commits == _plus(
        outputs["git cherry C R"]
    )
    medians = {name: statistics.median(t) for name, t in times.items()}
    minima = {name: min(t) for name, t in times.items()}
    cpu_medians = {name: statistics.median(t) for name, t in cpu.items()}
    cherry = medians["git cherry C R"]
    goal = 1.5 * cherry + 0.2
    result = {
        "snapshot_release": args.release,
        "canonical": args.canonical,
        "upstream": args.upstream,
        "repeat": args.repeat,
        "median_s": medians,
        "min_s": minima,
        "cpu_median_s": cpu_medians,
        "goal_s": goal,
        "goal_from_minima_s": 1.5 * minima["git cherry C R"] + 0.2,
        "same_answer": agree,
        "examined": with_up["examined"],
        "upstream_commits": (with_up["upstream"] or {}).get("commits"),
        "fork_commits": len(fork_commits),
        "merge_resolutions": sum(c["kind"] == "merge-resolution" for c in with_up["release_only"]),
        "release_only_without_upstream": len(without["release_only"]),
        "load_average": os.getloadavg(),
    }
    for name in commands:
        print(
            f"{name:28} median {medians[name]:.3f} s   min {minima[name]:.3f} s   "
            f"CPU (user+sys) median {cpu_medians[name]:.3f} s"
        )
    print(
        f"goal 1.5 x git cherry + 0.2 s: {goal:.3f} s (from minima {result['goal_from_minima_s']:.3f} s); "
        f"releasekit --upstream median {medians['releasekit --upstream']:.3f} s, "
        f"min {minima['releasekit --upstream']:.3f} s"
    )
    print(
        f"answer: {result['examined']} examined, {result['upstream_commits']} from upstream (once), "
        f"{result['fork_commits']} fork commits + {result['merge_resolutions']} merge resolution(s); "
        f"without an upstream {result['release_only_without_upstream']}; same as git cherry: {agree}; "
        f"load average {result['load_average'][0]:.2f}"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
