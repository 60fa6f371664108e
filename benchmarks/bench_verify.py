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

Then the full-image accounting, the path ``verify-provenance`` takes for an image that is
not the reproduced one: the whole environment as one uncompressed tar stream (what ``docker
export`` sends; the tar is written once beside the environment), every entry's type, mode,
owner, link and sha256 read (files of 4 MiB and more hashed on verify-provenance's hashing
thread; ``--hash-thread-bytes`` overrides) and compared with a reference table of the same
tree; against ``sha256sum`` of every regular file of the tree and the floor for those same
bytes (goal ≤ 1.3 × the floor). Each repeat starts once the last one's hashing thread has
ended (it unmaps its ring after the digests are in, off the read's critical path).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from releasekit.findings import Findings  # noqa: E402
from releasekit.provenance.accounting import differences, table  # noqa: E402
from releasekit.provenance.checks.records import verify_installed_files  # noqa: E402
from releasekit.provenance.hashthread import THREAD_NAME  # noqa: E402
from releasekit.provenance.installed import installed_distributions  # noqa: E402
from releasekit.provenance.inventory import CHUNK, ReadPlan, inventory_from_directory, inventory_from_tar  # noqa: E402

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
    subprocess.run(
        [str(env / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", TORCH], check=True
    )
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


def env_tar(env: Path) -> Path:
    """The environment as one uncompressed tar (sorted, like an export), written once."""
    out = env.parent / (env.name + ".tar")
    if not out.is_file():
        partial = out.with_suffix(".tmp")
        subprocess.run(["tar", "--sort=name", "-cf", str(partial), "-C", str(env), "."], check=True)
        partial.rename(out)
    return out


def all_files(env: Path) -> list[Path]:
    return sorted(
        Path(d) / f
        for d, _, names in os.walk(env)
        for f in names
        if (Path(d) / f).is_file() and not (Path(d) / f).is_symlink()
    )


def settle() -> None:
    """Wait for the previous read's hashing thread, which unmaps its ring after the digests are in."""
    for thread in threading.enumerate():
        if thread.name == THREAD_NAME:
            thread.join()


def run_accounting(
    tar: Path, reference: dict | None, thread_bytes: int | None = None
) -> tuple[float, int, int, dict]:
    def chunks():
        with tar.open("rb", buffering=0) as handle:
            while chunk := handle.read(CHUNK):
                yield chunk

    settle()  # each run starts with nothing of the last one still running
    started = time.perf_counter()
    # The plan verify-provenance reads the locked base with (accounting only: sha256, no git blob ids).
    inv = inventory_from_tar(
        chunks(),
        ReadPlan(
            python_roots=[],
            hash_all=True,
            extra_digests=False,
            max_kept_bytes=0,
            hash_thread_bytes=thread_bytes,
        ),
    )
    ref = reference if reference is not None else table(inv)
    bad = sum(1 for p, e in inv.files.items() if p not in ref or differences(ref[p], e)) + len(
        set(ref) - set(inv.files)
    )
    seconds = time.perf_counter() - started
    return seconds, bad, inv.hashed_bytes, ref


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
    parser.add_argument(
        "--env", type=Path, help="an installed environment (default: a cached torch==2.13.0 venv)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs of each timing; the best counts")
    parser.add_argument(
        "--workers", type=int, default=None, help="hashing threads (default: cores, at most 8)"
    )
    parser.add_argument(
        "--hash-thread-bytes",
        type=int,
        default=None,
        help="files this large are hashed on the hashing thread (0: never; "
        "default: verify-provenance's own choice)",
    )
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
    # Full-image accounting on the same tree as one tar stream.
    tar = env_tar(env)
    everything = all_files(env)
    image_bytes = sum(p.stat().st_size for p in everything)
    _, _, _, reference = run_accounting(tar, None)  # the reference table, and a warm page cache
    accounting = min(
        (run_accounting(tar, reference, args.hash_thread_bytes) for _ in range(args.repeat)),
        key=lambda r: r[0],
    )
    sha256sum_all = min(run_sha256sum(everything) for _ in range(args.repeat))
    image_floor = image_bytes / throughput
    plan = ReadPlan(python_roots=[], hash_thread_bytes=args.hash_thread_bytes)
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
        "accounting_hash_thread_bytes": plan.thread_bytes(),
        "accounting_files": len(everything),
        "accounting_bytes": image_bytes,
        "accounting_s": round(accounting[0], 3),
        "accounting_differences": accounting[1],
        "accounting_sha256sum_s": round(sha256sum_all, 3),
        "accounting_floor_s": round(image_floor, 3),
        "accounting_ratio_vs_sha256sum": round(accounting[0] / sha256sum_all, 3),
        "accounting_ratio_vs_floor": round(accounting[0] / image_floor, 3),
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
        print(f"full-image accounting: {len(everything)} files, {image_bytes / 1e6:.0f} MB as one tar stream")
        print(
            f"accounting:  {accounting[0]:.3f} s  (thread for files >= "
            f"{result['accounting_hash_thread_bytes']} bytes; {accounting[1]} differences)"
        )
        print(f"sha256sum:   {sha256sum_all:.3f} s  (every regular file)")
        print(f"floor:       {image_floor:.3f} s")
        print(f"ratio vs sha256sum: {accounting[0] / sha256sum_all:.2f}x")
        print(f"ratio vs floor:     {accounting[0] / image_floor:.2f}x (goal <= 1.3)")
    return 1 if findings.errors or accounting[1] else 0


if __name__ == "__main__":
    raise SystemExit(main())
