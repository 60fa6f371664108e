"""Benchmark: verify-provenance's RECORD verifier on a real installed environment, against sha256sum.

    python3 benchmarks/bench_verify.py [--env DIR] [--repeat 3] [--json]

Without ``--env`` it makes (once, cached under ``$RELEASEKIT_CACHE/bench`` or
``~/.cache/releasekit/bench``) a virtual environment with ``torch==2.13.0`` installed:
about 21,000 files and 900 MB. Then, in one run and on a warm page cache, it times:

- the verifier: walk the environment, hash every file under site-packages once
  (sha256 for RECORD, git blob ids for ``.py``), parse every RECORD, compare;
- ``sha256sum`` over exactly the files the RECORDs list;
- the floor: those files' bytes divided by single-core ``hashlib.sha256`` throughput
  measured now on an in-memory buffer.

It prints the two ratios (goal: verifier ≤ 0.4 × sha256sum, and ≤ 2 × the floor) and
fails (exit 1) when the verifier reports any finding: the environment is untouched, so a
finding would be a verifier bug.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from releasekit.findings import Findings  # noqa: E402
from releasekit.provenance.checks.records import verify_installed_files  # noqa: E402
from releasekit.provenance.installed import installed_distributions  # noqa: E402
from releasekit.provenance.inventory import ReadPlan, inventory_from_directory  # noqa: E402

TORCH = "torch==2.13.0"


def cache_dir() -> Path:
    base = os.environ.get("RELEASEKIT_CACHE")
    return (Path(base) if base else Path.home() / ".cache" / "releasekit") / "bench"


def ensure_env() -> Path:
    env = cache_dir() / "torch-2.13.0"
    marker = env / ".releasekit-bench-ready"
    if marker.is_file():
        return env
    env.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    subprocess.run([str(env / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", TORCH], check=True)
    marker.write_text(TORCH + "\n")
    return env


def site_packages(env: Path) -> str:
    found = sorted(env.glob("lib/python3*/site-packages"))
    if not found:
        raise SystemExit(f"no site-packages under {env}")
    return "/" + str(found[0].relative_to(env))


def run_verifier(env: Path, site: str, workers: int | None = None) -> tuple[float, Findings, int, int]:
    started = time.perf_counter()
    # The prefix's bin/ holds the console scripts RECORD lists.
    inventory = inventory_from_directory(str(env), ReadPlan(python_roots=[site, "/bin"]), workers=workers)
    dists = installed_distributions(inventory, [site])
    findings = Findings()
    for dist in dists:
        verify_installed_files(inventory, dist, findings)
    seconds = time.perf_counter() - started
    listed = sum(1 for d in dists for row in d.files.values() if row.digest is not None)
    return seconds, findings, listed, inventory.hashed_bytes


def record_files(env: Path, site: str) -> list[Path]:
    files: list[Path] = []
    root = env / site.lstrip("/")
    for record in sorted(root.glob("*.dist-info/RECORD")):
        for line in record.read_text().splitlines():
            path, _, rest = line.partition(",")
            if rest.startswith("sha256="):
                files.append((root / path).resolve())
    return files


def run_sha256sum(files: list[Path]) -> float:
    payload = b"\0".join(str(p).encode() for p in files) + b"\0"
    started = time.perf_counter()
    subprocess.run(["xargs", "-0", "sha256sum", "--"], input=payload, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def hashlib_throughput(size: int = 256 * 1024 * 1024) -> float:
    buffer = os.urandom(1024 * 1024) * (size // (1024 * 1024))
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        hashlib.sha256(buffer).digest()
        best = min(best, time.perf_counter() - started)
    return size / best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", type=Path, help="an installed environment (default: a cached torch==2.13.0 venv)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each timing; the best counts")
    parser.add_argument("--workers", type=int, default=None, help="hashing threads (default: cores, at most 8)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    env = (args.env or ensure_env()).resolve()
    site = site_packages(env)
    files = record_files(env, site)
    total_bytes = sum(p.stat().st_size for p in files)
    run_sha256sum(files)  # warm the page cache
    verifier = min((run_verifier(env, site, args.workers) for _ in range(args.repeat)), key=lambda r: r[0])
    sha256sum = min(run_sha256sum(files) for _ in range(args.repeat))
    throughput = hashlib_throughput()
    floor = total_bytes / throughput
    seconds, findings, listed, hashed = verifier
    result = {
        "environment": str(env),
        "cores": os.cpu_count(),
        "workers": args.workers or min(8, os.cpu_count() or 2),
        "files": len(files),
        "bytes": total_bytes,
        "verifier_s": round(seconds, 3),
        "verifier_files_checked": listed,
        "verifier_bytes_hashed": hashed,
        "sha256sum_s": round(sha256sum, 3),
        "hashlib_single_core_gb_s": round(throughput / 1e9, 3),
        "floor_s": round(floor, 3),
        "ratio_vs_sha256sum": round(seconds / sha256sum, 3),
        "ratio_vs_floor": round(seconds / floor, 3),
        "findings": [f.render() for f in findings],
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"environment: {len(files)} RECORD-listed files, {total_bytes / 1e6:.0f} MB")
        print(f"verifier:    {seconds:.3f} s  ({hashed / 1e6:.0f} MB hashed)")
        print(f"sha256sum:   {sha256sum:.3f} s")
        print(f"floor:       {floor:.3f} s  (hashlib single core {throughput / 1e9:.2f} GB/s)")
        print(f"ratio vs sha256sum: {seconds / sha256sum:.2f}x (goal <= 0.4)")
        print(f"ratio vs floor:     {seconds / floor:.2f}x (goal <= 2)")
        for line in result["findings"]:
            print("finding:", line)
    return 1 if findings.errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
