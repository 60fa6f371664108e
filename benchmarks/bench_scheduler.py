"""Makespan of the seed-003 validation matrix on one 8-GPU host: packed vs one cell at a time.

Run: python benchmarks/bench_scheduler.py [--gpus 8]
The reference is sequential execution of the same cells with the same (assumed) durations,
computed in the same run; see releasekit/validate/durations.py for the assumptions.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from releasekit.manifest import load_manifest
from releasekit.validate.durations import SEED_003_ASSUMED_S
from releasekit.validate.scheduler import Job, pack

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", type=int, default=8)
    args = parser.parse_args()
    cells = load_manifest(REPO / "manifests" / "ff-next.yaml").manifest.validation.cells
    jobs = [Job(cell_id=c.id, gpus=c.gpu_count, duration_s=SEED_003_ASSUMED_S[c.id]) for c in cells]
    s = pack(jobs, args.gpus)
    print(f"{'cell':36} {'GPUs':10} {'start':>6} {'end':>6}  (minutes)")
    for p in s.placements:
        print(f"{p.cell_id:36} {','.join(map(str, p.gpus)):10} {p.start_s / 60:6.0f} {p.end_s / 60:6.0f}")
    print(f"cells: {len(jobs)}  GPUs: {args.gpus}")
    print(
        f"sequential: {s.sequential_s / 3600:.2f} h  packed makespan: {s.makespan_s / 3600:.2f} h  "
        f"ratio: {s.makespan_s / s.sequential_s:.3f}  speedup: {s.speedup:.2f}x  GPU utilisation: {s.gpu_utilisation:.0%}"
    )


if __name__ == "__main__":
    main()
