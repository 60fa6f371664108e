"""Where the test suite's time goes, read from pytest's JUnit XML (scripts/test.sh writes it).

    python3 benchmarks/suite_durations.py build/test-junit.xml            # the summary CI prints
    python3 benchmarks/suite_durations.py build/test-junit.xml --row      # docs/benchmarks.md's suite row

The summary: the run's wall time, the tests' own time summed, the modules by their summed time
(a module's time includes its fixtures' set-up and tear-down, which pytest counts into the tests),
and the slowest tests. Under pytest-xdist the wall time is the pytest run's; the summed time is
over both workers, so it exceeds the wall time.
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

# pytest-xdist's --dist loadgroup appends "@<group>" to a test's id.
GROUP_SUFFIX = re.compile(r"@[^\[\]@/]+$")


@dataclass(frozen=True)
class Case:
    module: str
    name: str
    seconds: float
    outcome: str  # passed, failed, error, skipped


@dataclass(frozen=True)
class Run:
    wall_seconds: float
    cases: list[Case]

    def count(self, outcome: str) -> int:
        return sum(1 for c in self.cases if c.outcome == outcome)

    def by_module(self) -> list[tuple[str, float, int]]:
        totals: dict[str, tuple[float, int]] = {}
        for case in self.cases:
            seconds, count = totals.get(case.module, (0.0, 0))
            totals[case.module] = (seconds + case.seconds, count + 1)
        return sorted(((m, s, n) for m, (s, n) in totals.items()), key=lambda row: -row[1])


def _module(classname: str) -> str:
    """``tests.test_x`` or ``tests.test_x.TestClass`` -> ``tests/test_x.py``."""
    parts = classname.split(".")
    while parts and not parts[-1].startswith("test_"):
        parts.pop()
    return "/".join(parts) + ".py" if parts else classname


def read(paths: list[Path]) -> Run:
    cases: list[Case] = []
    wall = 0.0
    for path in paths:
        root = ET.parse(path).getroot()
        suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
        for suite in suites:
            wall += float(suite.get("time", "0"))
            for case in suite.iter("testcase"):
                outcome = "passed"
                for tag in ("failure", "error", "skipped"):
                    if case.find(tag) is not None:
                        outcome = {"failure": "failed"}.get(tag, tag)
                        break
                name = GROUP_SUFFIX.sub("", case.get("name", ""))
                cases.append(
                    Case(_module(case.get("classname", "")), name, float(case.get("time", "0")), outcome)
                )
    return Run(wall, cases)


def _minutes(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 60} min {whole % 60} s"


def summary(run: Run, top: int) -> str:
    lines = [
        f"suite: {len(run.cases)} tests, {run.count('failed')} failed, {run.count('error')} errors, "
        f"{run.count('skipped')} skipped; wall {_minutes(run.wall_seconds)}, "
        f"tests' own time summed {_minutes(sum(c.seconds for c in run.cases))}",
        f"modules by summed time (top {top}):",
    ]
    lines += [
        f"  {seconds:8.1f} s  {count:4d} tests  {module}" for module, seconds, count in run.by_module()[:top]
    ]
    lines.append(f"slowest tests (top {top}):")
    slowest = sorted(run.cases, key=lambda c: -c.seconds)[:top]
    lines += [f"  {c.seconds:8.1f} s  {c.module}::{c.name}" for c in slowest]
    return "\n".join(lines)


def row(run: Run, workers: int, date: str) -> str:
    """docs/benchmarks.md's suite row."""
    module, seconds, _ = run.by_module()[0]
    where = "in one process" if workers == 1 else f"on {workers} workers"
    figure = (
        f"{len(run.cases)} tests ({run.count('skipped')} skipped, {run.count('failed') + run.count('error')} "
        f"failed), pytest **{_minutes(run.wall_seconds)}** {where}; the slowest module "
        f"{module} {_minutes(seconds)}"
    )
    return (
        f"| the test command, `CI=true bash .ci/run` in a fresh clone | {figure} | target ≤ 15 min | "
        f"`CI=true bash .ci/run`, then `python3 benchmarks/suite_durations.py build/test-junit.xml --row` | {date} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", nargs="+", type=Path, help="pytest --junit-xml output(s)")
    parser.add_argument("--top", type=int, default=25, help="modules and tests listed (default 25)")
    parser.add_argument("--row", action="store_true", help="print docs/benchmarks.md's suite row instead")
    parser.add_argument("--workers", type=int, default=4, help="pytest-xdist workers of the run (for --row)")
    args = parser.parse_args(argv)
    run = read(args.junit)
    if not run.cases:
        print(f"no test cases in {', '.join(map(str, args.junit))}", file=sys.stderr)
        return 1
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    print(row(run, args.workers, today) if args.row else summary(run, args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
