"""Benchmark of ``releasekit build`` on the demo example (two components; CUDA when nvcc exists).

Measures, in one run on this machine:
- the first build with an empty build cache, and a second build of the same lock with
  the cache warm (into another directory): the second as a ratio of the first;
- the final image's size against the base image plus the installed wheels.

Run: python benchmarks/bench_build.py [--dir DIR] [--json]
Needs the Docker Engine and the base image (made on first use, about a minute).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import zipfile
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=None, help="work directory (default: a temp dir)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    root = (args.dir or Path(tempfile.mkdtemp(prefix="releasekit-bench-"))).resolve()
    # A private cache: the first build must really be cold.
    os.environ["RELEASEKIT_CACHE"] = str(root / "cache")

    from releasekit.builder.baseimage import DEFAULT_BASE, ensure_base_image
    from releasekit.builder.service import BuildOptions, run_build
    from releasekit.clock import SystemClock
    from releasekit.demo.example import make_example
    from releasekit.docker_engine import Engine, LazyEngine
    from releasekit.forge import GitHubForges
    from releasekit.manifest import load_manifest
    from releasekit.plan.locking import build_lock
    from releasekit.records.lock import write_lock

    engine = Engine()
    base = ensure_base_image(engine, DEFAULT_BASE)
    example = make_example(root / "example", base_image=base.name)
    manifest = Path(example.manifest)
    lock = root / "lock.json"
    locked = build_lock(
        load_manifest(manifest), allow_local=True, forges=GitHubForges(), engine=LazyEngine(timeout=60)
    )
    write_lock(locked, lock)

    def build(out: str):
        start = time.perf_counter()
        record = run_build(
            BuildOptions(manifest=manifest, lock=lock, outdir=root / out, allow_local_repos=True),
            Engine(),
            clock=SystemClock(),
        )
        return record, time.perf_counter() - start

    first, t_first = build("first")
    second, t_second = build("second")
    assert second.image_id == first.image_id, "the cached build gave another image"

    image_size = int(engine.image_attrs(first.image_id)["Size"])
    base_size = int(engine.image_attrs(base.image_id)["Size"])
    wheel_files = [root / "first" / "wheels" / c.wheel_filename for c in first.components if c.wheel_filename]
    wheel_bytes = sum(p.stat().st_size for p in wheel_files)
    unpacked = 0
    for path in wheel_files:
        with zipfile.ZipFile(path) as zf:
            unpacked += sum(i.file_size for i in zf.infolist())
    result = {
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "components": [c.name for c in first.components],
        "first_build_s": round(t_first, 2),
        "cached_build_s": round(t_second, 2),
        "cached_over_first": round(t_second / t_first, 3),
        "first_cache": first.cache.model_dump(),
        "second_cache": second.cache.model_dump(),
        "image_id": first.image_id,
        "image_size": image_size,
        "base_image_size": base_size,
        "wheels_size": wheel_bytes,
        "wheels_unpacked_size": unpacked,
        "image_over_base_plus_unpacked_wheels": round(image_size / (base_size + unpacked), 4),
        "image_minus_base_minus_unpacked_wheels": image_size - base_size - unpacked,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"components: {', '.join(result['components'])}")
        print(f"first build (cold cache):  {t_first:7.2f} s")
        print(f"second build (warm cache): {t_second:7.2f} s   ratio {result['cached_over_first']:.3f}")
        print(
            f"image {image_size} B = base {base_size} B + installed {image_size - base_size} B "
            f"(wheels {wheel_bytes} B zipped, {unpacked} B unpacked); "
            f"image / (base + unpacked wheels) = {result['image_over_base_plus_unpacked_wheels']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
