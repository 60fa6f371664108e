"""Makespan of the seed-003 validation matrix on N eight-GPU hosts: packed vs one cell at a time.

Run: python benchmarks/bench_scheduler.py [--gpus 8] [--hosts 1 2 3] [--placements]
The reference is sequential execution of the same cells with the same durations, computed in
the same run. The durations are planning assumptions, not measurements (releasekit/validate/
durations.py says where each comes from); a cell never spans hosts (a TP group stays on one
machine), and each host pulls the candidate by digest before its first cell (not counted).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from releasekit.manifest import load_manifest
from releasekit.validate.durations import SEED_003_ASSUMED_S
from releasekit.validate.scheduler import Job, Schedule, pack

REPO = Path(__file__).resolve().parent.parent


def _placements(s: Schedule, per_host: int) -> None:
    print(f"{'cell':36} {'host':>4} {'GPUs':10} {'start':>6} {'end':>6}  (minutes)")
    for p in s.placements:
        local = ",".join(str(g - p.host * per_host) for g in p.gpus)
        print(f"{p.cell_id:36} {p.host:4} {local:10} {p.start_s / 60:6.0f} {p.end_s / 60:6.0f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per host")
    parser.add_argument("--hosts", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--placements", action="store_true", help="print every cell's host, GPUs and times")
    args = parser.parse_args()
    cells = load_manifest(REPO / "manifests" / "ff-next.yaml").manifest.validation.cells
    jobs = [Job(cell_id=c.id, gpus=c.gpu_count, duration_s=SEED_003_ASSUMED_S[c.id]) for c in cells]
    longest = max(j.duration_s for j in jobs)
    print(f"cells: {len(jobs)}  GPUs per host: {args.gpus}  longest cell: {longest / 3600:.2f} h")
    print(
        f"{'hosts':>5} {'sequential':>11} {'makespan':>9} {'ratio':>6} {'speedup':>8} {'GPU use':>8}  order"
    )
    for n in args.hosts:
        s = pack(jobs, args.gpus, hosts=n)
        print(
            f"{n:5} {s.sequential_s / 3600:10.2f}h {s.makespan_s / 3600:8.2f}h {s.makespan_s / s.sequential_s:6.3f} "
            f"{s.speedup:7.2f}x {s.gpu_utilisation:8.0%}  {s.order}"
        )
        if args.placements:
            _placements(s, args.gpus)


if __name__ == "__main__":
    main()
