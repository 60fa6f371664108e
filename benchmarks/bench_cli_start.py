"""Start-up time of the CLI: ``releasekit --version`` / ``--help`` vs ``python -m pip --version``.

Run: python benchmarks/bench_cli_start.py [--repeat 20] [--max-ratio 1.0]

Each round runs every command once, in an order rotated per round (interleaved, so a
burst of load on a shared machine hits all of them alike), each as a fresh process with
output discarded. The reference is ``python -m pip --version``: a CLI that also has to
import its package before it can print a version. Printed: median and min per command,
and each releasekit command's ratio to pip (median / median, min / min). With
``--max-ratio R`` the exit status is 1 when a releasekit command's median ratio exceeds R.
The releasekit commands import this checkout (PYTHONPATH is set to its root).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PIP = "python -m pip --version"


def console_script() -> str | None:
    """The ``releasekit`` script next to this interpreter (a pyenv/asdf shim would time the shim)."""
    beside = Path(sys.executable).parent / "releasekit"
    if beside.is_file():
        return str(beside)
    return shutil.which("releasekit")


def commands() -> dict[str, list[str]]:
    out = {
        "python -m releasekit --version": [sys.executable, "-m", "releasekit", "--version"],
        "python -m releasekit --help": [sys.executable, "-m", "releasekit", "--help"],
    }
    script = console_script()
    if script:
        out["releasekit --version (console script)"] = [script, "--version"]
    out[PIP] = [sys.executable, "-m", "pip", "--version"]
    return out


def time_once(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=REPO)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(
            f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode(errors='replace')[-400:]}"
        )
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=20, help="rounds (each runs every command once)")
    parser.add_argument(
        "--max-ratio", type=float, default=None, help="fail if a releasekit median / pip median exceeds this"
    )
    args = parser.parse_args()

    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    )
    which = subprocess.run(
        [sys.executable, "-c", "import releasekit; print(releasekit.__file__)"],
        capture_output=True,
        text=True,
        env=env,
    ).stdout.strip()
    cmds = commands()
    names = list(cmds)
    for argv in cmds.values():  # warm the page cache and bytecode once, untimed
        time_once(argv, env)
    samples: dict[str, list[float]] = {n: [] for n in names}
    for i in range(args.repeat):
        for k in range(len(names)):
            name = names[(i + k) % len(names)]
            samples[name].append(time_once(cmds[name], env))

    print(
        f"releasekit imported from {which}; {args.repeat} rounds, interleaved; python {sys.version.split()[0]}"
    )
    print(f"{'command':42} {'median s':>9} {'min s':>7} {'median ratio':>13} {'min ratio':>10}")
    pip_med, pip_min = statistics.median(samples[PIP]), min(samples[PIP])
    worst = 0.0
    for name in names:
        med, low = statistics.median(samples[name]), min(samples[name])
        ratio_med, ratio_min = med / pip_med, low / pip_min
        if name != PIP:
            worst = max(worst, ratio_med)
        print(f"{name:42} {med:9.3f} {low:7.3f} {ratio_med:12.2f}x {ratio_min:9.2f}x")
    print(f"worst releasekit median / pip median: {worst:.2f}x")
    if args.max_ratio is not None and worst > args.max_ratio:
        print(f"slower than allowed: {worst:.2f}x > {args.max_ratio:.2f}x", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
