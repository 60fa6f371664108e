"""Does the configured performance gate catch a real 5 % slowdown, and pass an unchanged candidate? (issue 45)

Run:  python benchmarks/bench_gate_catch.py [--blocks 60] [--max-minutes 48] [--cpus 0.25] [--slowdown 0.05]
          [--slow-by step|quota] [--plant-wait spin|sleep] [--period-us 100000]
          [--trials 1000] [--cell cpu-ngram3] [--output-len 64] [--prompts 2] [--json FILE] [--row]
      python benchmarks/bench_gate_catch.py --runs-file FILE [--runs N] [--min-ratio R]   # judge saved runs
      python benchmarks/bench_gate_catch.py --quick                  # 3 blocks, 200 trials: the pipeline only
      python benchmarks/bench_gate_catch.py --synthetic 0.02         # no Docker: normal runs of 2 % variation

One real vLLM server (the demo's CPU engine image, vllm-cpu, serving the demo's SmolLM2-135M as the
demo's candidate cell does) is measured by the validate stage's own decode check, in blocks of three
runs, interleaved on the same server: A (the baseline), B (the planted slowdown) and A' (A again: an
unchanged candidate). The server is never restarted between runs. B is slowed one of two ways:
- ``--slow-by step`` (the default): a delay planted inside the server (``benchmarks/plant``, mounted
  with ``PYTHONPATH``) waits after each of the worker's model calls ``slowdown / (1 - slowdown)`` of
  that call's own time, so each model step takes ``1 / (1 - slowdown)`` as long whatever the host does
  meanwhile. A control file switches it between runs. ``--plant-wait spin`` (the default) waits busy on
  the CPU, as a slower model step would; ``sleep`` hands the CPU to the server's other processes (its
  three processes share two cores here), which then run faster: the run slows by less, or not at all.
- ``--slow-by quota``: B gets ``1 - slowdown`` of A's CFS quota (``docker update`` between runs). How
  much slower that makes the server depends on how much of a run waits on the CPU: on this 2-core VM a
  5 % cut was a 2.7 % slowdown (2026-12-06), and at a load average of 36 a server held to 1 core got 0.3
  cores and the quota hardly bound at all.
With ``--cpus`` above 0 every run holds the server to that many cores (B too, with ``step``); each run
records the CPU seconds its container used and the share of periods in which a quota stopped it (the
cgroup's counters). The order of the three runs rotates from block to block (``--fixed-order``: always
A B A'), so no side always runs first. The slowdown actually measured (mean B / mean A, Fieller's 95 %
interval) is printed beside the planted one: the reference measured in the same run.

Then the gate configured in manifests/ff-next.yaml (``decode.target_step_rate`` of the TP8 MTP:3 cell:
``min_ratio``, ``runs``, ``guards``) is applied, by the real gate code (releasekit/validate/gates.py), to
the measured runs, as an interleaved gate would see them (``runs`` baseline runs with their spread
against ``runs`` candidate runs):
- resampled: ``--trials`` times, ``runs`` blocks drawn with replacement from the measured blocks (a
  block bootstrap: A and B of one block stay together, as interleaving keeps them); the gate judges
  B against A (caught = it fails) and A' against A (a false failure = it fails), and A' x (1 - slowdown)
  against A (the measured noise with a slowdown of exactly the planted size);
- disjoint: the measured blocks cut into consecutive groups of ``runs``, each judged once (no
  resampling: few trials, every one fully real).
Beside each rate: the rate ``manifest/gate_power.py`` computes for the measured variation, and the runs
and threshold window at which both error rates would be at most 5 % there.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import fmean, stdev

from releasekit.manifest import load_manifest
from releasekit.manifest.gate_power import (
    MAX_RUNS,
    Design,
    gate_fail_probability,
    runs_for_error_rates,
    t_quantile,
    threshold_window,
)
from releasekit.manifest.validation import Gate
from releasekit.records.receipt import Metric
from releasekit.validate.checks.decode import ENGINE_TIMED
from releasekit.validate.gates import BaselineValues, evaluate_gate
from releasekit.validate.stats import fieller

REPO = Path(__file__).resolve().parent.parent
PLANT = Path(__file__).resolve().parent / "plant" / "sitecustomize.py"  # the per-step delay (--slow-by step)
PLANT_INSIDE = "/rk-plant"  # where the server's container sees it; its control file is ``fraction`` there
GATED_CELL = "glm52-tp8-dcp1-mtp3"
GATED_METRIC = "decode.target_step_rate"
LIMIT = 0.05  # both error rates at most this
LABELS = ("A", "B", "A'")  # baseline, slowed candidate, unchanged candidate: the order within a block
UNCHANGED = "unchanged A' vs A: failed"
EXACT = "A' slowed exactly vs A: caught"


# --- statistics (no Docker) ----------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    """One interleaved block: the baseline run, the slowed run and the unchanged run, in that order."""

    a: float
    b: float
    a2: float


@dataclass(frozen=True)
class Outcome:
    passed: bool
    below: bool  # GATE_BELOW_BASELINE: the bound is under the threshold
    underpowered: bool  # GATE_UNDERPOWERED: it passed its bound but cannot detect what it guards


@dataclass
class Rates:
    trials: int = 0
    failed: int = 0
    below: int = 0
    underpowered: int = 0

    def add(self, o: Outcome) -> None:
        self.trials += 1
        self.failed += not o.passed
        self.below += o.below
        self.underpowered += o.underpowered

    def rate(self, what: str = "failed") -> float:
        return getattr(self, what) / self.trials if self.trials else math.nan


def ff_next_gate(manifest: Path = REPO / "manifests" / "ff-next.yaml") -> Gate:
    """The gate under test: ff-next's ``decode.target_step_rate`` gate of the TP8 MTP:3 cell."""
    cells = load_manifest(manifest).manifest.validation.cells
    cell = next(c for c in cells if c.id == GATED_CELL)
    return next(g for g in cell.gates if g.metric == GATED_METRIC)


def judge(gate: Gate, candidate: Sequence[float], baseline: Sequence[float]) -> Outcome:
    """The real gate (``validate.gates.evaluate_gate``) on these runs; the baseline as one of our receipts
    with its runs (an interleaved baseline: its spread is in the bound)."""
    name = gate.baseline or "baseline"
    base = {
        name: BaselineValues(
            name=name,
            values={gate.metric: fmean(baseline)},
            samples={gate.metric: list(baseline)},
            from_receipt={gate.metric},
        )
    }
    metric = Metric(name=gate.metric, value=fmean(candidate), unit="steps/s", samples=list(candidate))
    result, findings = evaluate_gate(gate, {gate.metric: metric}, base)
    codes = findings.codes()
    return Outcome(result.passed, "GATE_BELOW_BASELINE" in codes, "GATE_UNDERPOWERED" in codes)


def resampled(
    gate: Gate, blocks: Sequence[Block], *, trials: int, seed: int, exact: float | None = None
) -> tuple[Rates, Rates, Rates]:
    """(B against A, A' against A, A' x (1 - exact) against A) over ``trials`` block-bootstrap draws of
    ``gate.runs`` blocks; the third (measured noise, a slowdown of exactly ``exact``) only with ``exact``."""
    rng = random.Random(seed)
    caught, false, planted = Rates(), Rates(), Rates()
    for _ in range(trials):
        drawn = [blocks[rng.randrange(len(blocks))] for _ in range(gate.runs)]
        base = [x.a for x in drawn]
        caught.add(judge(gate, [x.b for x in drawn], base))
        false.add(judge(gate, [x.a2 for x in drawn], base))
        if exact is not None:
            planted.add(judge(gate, [x.a2 * (1 - exact) for x in drawn], base))
    return caught, false, planted


def disjoint(gate: Gate, blocks: Sequence[Block]) -> tuple[Rates, Rates]:
    """(B against A, A' against A) on consecutive, non-overlapping groups of ``gate.runs`` blocks."""
    caught, false = Rates(), Rates()
    for start in range(0, len(blocks) - gate.runs + 1, gate.runs):
        group = blocks[start : start + gate.runs]
        base = [x.a for x in group]
        caught.add(judge(gate, [x.b for x in group], base))
        false.add(judge(gate, [x.a2 for x in group], base))
    return caught, false


def cv(xs: Sequence[float]) -> float:
    return stdev(xs) / fmean(xs)


@dataclass
class Variation:
    """What the runs measured: each side's variation and the slowdown that was really there."""

    cv_a: float
    cv_b: float
    cv_a2: float
    ratio: float  # mean B / mean A
    ratio_low: float | None  # Fieller's two-sided 95 % interval of it
    ratio_high: float | None
    unchanged_ratio: float  # mean A' / mean A

    @property
    def cv(self) -> float:
        """The variation a gate is designed for: an unchanged release's, pooled over A and A' (the baseline
        and the unchanged candidate: the same server, the same quota)."""
        return math.sqrt((self.cv_a**2 + self.cv_a2**2) / 2)


def variation(blocks: Sequence[Block]) -> Variation:
    a, b, a2 = [x.a for x in blocks], [x.b for x in blocks], [x.a2 for x in blocks]
    n = len(blocks)
    t = t_quantile(0.975, 2 * n - 2)
    bounds = fieller(mean_c=fmean(b), var_c=stdev(b) ** 2 / n, mean_b=fmean(a), var_b=stdev(a) ** 2 / n, t=t)
    return Variation(
        cv_a=cv(a),
        cv_b=cv(b),
        cv_a2=cv(a2),
        ratio=fmean(b) / fmean(a),
        ratio_low=bounds[0] if bounds else None,
        ratio_high=bounds[1] if bounds else None,
        unchanged_ratio=fmean(a2) / fmean(a),
    )


@dataclass
class Computed:
    """gate_power's rates for this gate at the measured variation (an integral, no simulation)."""

    false_failure: float  # true ratio 1
    caught_measured: float  # true ratio = the measured slowdown
    caught_guarded: float | None  # true ratio = 1 - guards
    design_runs: int | None  # fewest runs (each side) with both error rates <= LIMIT at the measured cv
    window: tuple[float, float] | None  # the min_ratio window there
    runs_uncapped: int | None = None  # the same search past MAX_RUNS (a manifest allows at most MAX_RUNS)


def runs_past_cap(cv: float, guards: float, limit: float = LIMIT, ceiling: int = 100_000) -> int | None:
    """The fewest runs of each side with some threshold keeping both error rates <= ``limit``, searched
    past ``MAX_RUNS`` (doubling, then bisection); None beyond ``ceiling``."""

    def enough(n: int) -> bool:
        return threshold_window(Design(cv, n, cv, n), guards=guards, limit=limit) is not None

    hi = 2
    while not enough(hi):
        if hi > ceiling:
            return None
        hi *= 2
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return hi


def computed(gate: Gate, v: Variation) -> Computed:
    assert gate.min_ratio is not None
    design = Design(v.cv_a2, gate.runs, v.cv_a, gate.runs)
    slowed = Design(v.cv_b, gate.runs, v.cv_a, gate.runs)
    guards = gate.guarded
    caught_guarded = (
        None
        if guards is None
        else gate_fail_probability(
            Design(v.cv, gate.runs, v.cv, gate.runs), margin=1 - guards - gate.min_ratio
        )
    )
    found = (
        runs_for_error_rates(Design(v.cv, gate.runs, v.cv, gate.runs), guards=guards, limit=LIMIT)
        if guards is not None
        else None
    )
    return Computed(
        false_failure=gate_fail_probability(design, margin=v.unchanged_ratio - gate.min_ratio),
        caught_measured=gate_fail_probability(slowed, margin=v.ratio - gate.min_ratio),
        caught_guarded=caught_guarded,
        design_runs=None if found is None else found[0],
        window=None if found is None else (found[1], found[2]),
        runs_uncapped=(found[0] if found else runs_past_cap(v.cv, guards)) if guards is not None else None,
    )


def synthetic_blocks(n: int, *, cv: float, ratio: float, seed: int) -> list[Block]:
    """Normal runs of relative sd ``cv`` around 100 (A, A') and 100 x ``ratio`` (B)."""
    rng = random.Random(seed)
    return [
        Block(
            rng.gauss(100.0, 100.0 * cv),
            rng.gauss(100.0 * ratio, 100.0 * ratio * cv),
            rng.gauss(100.0, 100.0 * cv),
        )
        for _ in range(n)
    ]


# --- measuring (Docker) ----------------------------------------------------------------------------


@dataclass
class Run:
    label: str
    value: float
    seconds: float
    load: float  # the host's 1-minute load average as the run ended
    cpu_s: float | None = None  # CPU seconds the server's container used in the run (its cgroup)
    throttled: float | None = None  # the share of CFS periods in which the quota stopped it


def _cgroup_files(container_id: str) -> tuple[Path, Path] | None:
    """(cpu.stat, a usage file) of a container's cgroup: v1 with the cgroupfs driver, or v2 (systemd)."""
    v1 = Path("/sys/fs/cgroup/cpu/docker") / container_id
    if (v1 / "cpu.stat").is_file():
        return v1 / "cpu.stat", Path("/sys/fs/cgroup/cpuacct/docker") / container_id / "cpuacct.usage"
    v2 = Path("/sys/fs/cgroup/system.slice") / f"docker-{container_id}.scope"
    if (v2 / "cpu.stat").is_file():
        return v2 / "cpu.stat", v2 / "cpu.stat"
    return None


def _cpu_counters(files: tuple[Path, Path] | None) -> tuple[float, int, int] | None:
    """(CPU seconds used, CFS periods, periods throttled) so far; None where the cgroup is not readable."""
    if files is None:
        return None
    try:
        stat = dict(line.split() for line in files[0].read_text().splitlines() if line.strip())
        if files[1] == files[0]:  # v2: usage_usec in cpu.stat
            used = int(stat["usage_usec"]) / 1e6
        else:
            used = int(files[1].read_text()) / 1e9
        return used, int(stat["nr_periods"]), int(stat["nr_throttled"])
    except (OSError, KeyError, ValueError):
        return None


@dataclass
class Measured:
    cell: str
    cpus: float
    slowdown: float
    period_us: int = 100_000  # the CFS period of the quota
    slow_by: str = "quota"  # B's slowdown: "quota" (a CPU quota cut) or "step" (a delay planted in each step)
    rotated: bool = False  # block k ran its three runs in LABELS' order rotated by k (else always A B A')
    plant_wait: str = "sleep"  # how the planted delay waits (step): "sleep" or "spin" (busy)
    decode_method: str = "by difference"  # how the decode check timed the runs (its details' "method")
    runs: list[Run] = field(default_factory=list)
    startup_s: float = 0.0
    warmup: float = 0.0

    def blocks(self, bound: float | None = None) -> list[Block]:
        """The blocks in order; with ``bound``, only those whose three runs each had the quota stop the
        server in at least that share of periods (the planted slowdown really in force)."""
        runs = [self.runs[i : i + 3] for i in range(0, len(self.runs) - 2, 3)]
        if bound is not None:
            runs = [b for b in runs if all(r.throttled is not None and r.throttled >= bound for r in b)]
        return [Block(*({r.label: r.value for r in b}[label] for label in LABELS)) for b in runs]


def _server(
    engine, cell_id: str, plant: Path | None = None
):  # -> (ServerSpec, Cell, ValidationSpec, adapter)
    from releasekit.builder.baseimage import DEFAULT_BASE, ensure_base_image
    from releasekit.demo.cpu_image import ensure_cpu_engine_image
    from releasekit.demo.cpu_matrix import cpu_validation_section
    from releasekit.demo.small_model import ensure_small_model
    from releasekit.manifest.validation import ValidationSpec
    from releasekit.validate.container import ServerSpec
    from releasekit.validate.engines import engine_for

    image = ensure_cpu_engine_image(engine, ensure_base_image(engine, DEFAULT_BASE).name).tag
    model = ensure_small_model(engine, image)
    spec = ValidationSpec.model_validate(cpu_validation_section())
    cell = next(c for c in spec.cells if c.id == cell_id)
    adapter = engine_for(cell.engine)
    inside = "/models/smollm2-135m"
    command = adapter.serve_command(cell, inside)
    server = ServerSpec(
        image=image,
        argv=command.argv,
        env={**cell.env, **command.env, **({"PYTHONPATH": PLANT_INSIDE} if plant else {})},
        port=command.port,
        mounts={str(model): inside, **({str(plant): PLANT_INSIDE} if plant else {})},
        cell_id=f"bench-gate-catch-{cell_id}",
    )
    return server, cell, spec, adapter


def measure(
    engine,
    args: argparse.Namespace,
    progress: Callable[[str], None],
    save: Callable[[Measured], None] | None = None,
) -> Measured:
    """The interleaved runs on one server; the slowdown (the planted delay's control file, or the quota)
    switched between runs, never a restart."""
    with tempfile.TemporaryDirectory(prefix="rk-plant-") as tmp:
        plant = None
        if args.slow_by == "step":
            plant = Path(tmp)
            shutil.copyfile(PLANT, plant / PLANT.name)
            (plant / "fraction").write_text("0\n", encoding="ascii")
            plant.chmod(0o755)
        return _measure(engine, args, progress, save, plant)


def _measure(
    engine,
    args: argparse.Namespace,
    progress: Callable[[str], None],
    save: Callable[[Measured], None] | None,
    plant: Path | None,
) -> Measured:
    from releasekit.findings import Findings
    from releasekit.manifest.validation import DecodeCheck
    from releasekit.validate.checks.decode import Decode
    from releasekit.validate.checks.interface import CheckContext
    from releasekit.validate.client import EngineClient
    from releasekit.validate.container import serve

    server, cell, spec, adapter = _server(engine, args.cell, plant)
    check = Decode(
        DecodeCheck(kind="decode", input_len=32, output_len=args.output_len, num_prompts=args.prompts)
    )
    period = args.period_us
    quota = {"A": round(args.cpus * period), "A'": round(args.cpus * period)}
    quota["B"] = round(args.cpus * (1 - args.slowdown if plant is None else 1) * period)
    slow = {"A": 0.0, "B": args.slowdown if plant else 0.0, "A'": 0.0}  # the planted per-step fraction
    out = Measured(
        cell=args.cell,
        cpus=args.cpus,
        slowdown=args.slowdown,
        period_us=period,
        slow_by=args.slow_by,
        rotated=args.rotate,
        plant_wait=args.plant_wait,
    )

    def order(block: int) -> tuple[str, ...]:
        """A B A', B A' A, A' A B, ...: each side takes each place in a block equally often (the third run
        of a block came out 1-2 % faster than the first on this host)."""
        k = block % 3 if args.rotate else 0
        return LABELS[k:] + LABELS[:k]

    start = time.monotonic()
    with serve(engine, server) as running:
        running.wait_ready(adapter.readiness_paths, cell.startup_timeout_s)  # unthrottled: a quick start
        out.startup_s = round(time.monotonic() - start, 1)
        if args.cpus:
            running.container.limit_cpu(quota["A"], period)
        client = EngineClient(running.base_url, cell.model.name, timeout_s=cell.request_timeout_s)
        ctx = CheckContext(cell=cell, spec=spec, manifest_dir=REPO, client=client, engine=adapter, seed=45)

        def once() -> float:
            findings = Findings()
            metrics, details = check.measure(ctx, findings)
            out.decode_method = str(details.get("method", out.decode_method))
            found = {m.name: m.value for m in metrics}
            value = found.get(GATED_METRIC)
            if value is None:
                raise RuntimeError(f"no {GATED_METRIC}: {[f.message for f in findings]}")
            return float(value)

        out.warmup = once()
        files = _cgroup_files(running.container.id)
        began = time.monotonic()
        for block in range(args.blocks):
            if args.max_minutes is not None and time.monotonic() - began > 60 * args.max_minutes:
                progress(f"stopped after {block} blocks: --max-minutes {args.max_minutes:g}")
                break
            for label in order(block):
                if args.cpus:
                    running.container.limit_cpu(quota[label], period)
                if plant is not None:
                    (plant / "fraction").write_text(f"{slow[label]!r} {args.plant_wait}\n", encoding="ascii")
                before, t0 = _cpu_counters(files), time.monotonic()
                value = once()
                seconds, after = time.monotonic() - t0, _cpu_counters(files)
                run = Run(label, round(value, 4), round(seconds, 2), os.getloadavg()[0])
                if before is not None and after is not None:
                    run.cpu_s = round(after[0] - before[0], 3)
                    periods = after[1] - before[1]
                    run.throttled = round((after[2] - before[2]) / periods, 4) if periods else 0.0
                out.runs.append(run)
            a, b, a2 = (next(r for r in out.runs[-3:] if r.label == label) for label in LABELS)
            progress(
                f"block {block + 1}/{args.blocks}: A {a.value:.2f}  B {b.value:.2f}  A' {a2.value:.2f}  "
                f"(load {os.getloadavg()[0]:.1f}; throttled A {a.throttled} B {b.throttled})"
            )
            if save is not None:
                save(out)
    return out


# --- report ----------------------------------------------------------------------------------------


def _pooled(v: dict) -> float:
    return math.sqrt((v["cv_a"] ** 2 + v["cv_a2"] ** 2) / 2)


def _pct(x: float | None) -> str:
    return "–" if x is None or math.isnan(x) else f"{x:.1%}"


def report(gate: Gate, blocks: Sequence[Block], *, trials: int, seed: int, slowdown: float) -> dict:
    v = variation(blocks)
    c = computed(gate, v)
    caught, false, planted = resampled(gate, blocks, trials=trials, seed=seed, exact=slowdown)
    d_caught, d_false = disjoint(gate, blocks)
    return {
        "gate": {"min_ratio": gate.min_ratio, "runs": gate.runs, "guards": gate.guarded},
        "blocks": len(blocks),
        "variation": asdict(v),
        "computed": asdict(c),
        "resampled": {
            "trials": trials,
            "caught": asdict(caught),
            "false": asdict(false),
            "exact": asdict(planted),
            "slowdown": slowdown,
        },
        "disjoint": {"caught": asdict(d_caught), "false": asdict(d_false)},
    }


def _rates(d: dict) -> Rates:
    return Rates(**d)


def _server_lines(m: Measured) -> list[str]:
    """Per side: mean run time, CPU cores the container used, share of periods the quota stopped it."""
    lines = []
    for label in LABELS:
        runs = [x for x in m.runs if x.label == label]
        if not runs:
            continue
        used = [x.cpu_s / x.seconds for x in runs if x.cpu_s is not None and x.seconds]
        stopped = [x.throttled for x in runs if x.throttled is not None]
        lines.append(
            f"  {label:2} {len(runs)} runs, mean {fmean(x.value for x in runs):.3f} {GATED_METRIC}, "
            f"{fmean(x.seconds for x in runs):.1f} s a run, load {fmean(x.load for x in runs):.1f}"
            + (f", {fmean(used):.2f} cores used" if used else "")
            + (f", quota reached in {fmean(stopped):.0%} of periods" if stopped else "")
        )
    return lines


def _slowed(m: Measured) -> str:
    """What was measured and how B was slowed."""
    if m.slow_by == "step":
        cores = f"{m.cpus:g} cores for every run" if m.cpus else "no CPU quota"
        return (
            f"{m.cell}, {cores}, B with a delay planted in every step (each {1 / (1 - m.slowdown):.4g}x as long, "
            f"{'busy' if m.plant_wait == 'spin' else 'asleep'}), decode timed "
            f"{'by the engine' if m.decode_method == ENGINE_TIMED else m.decode_method}"
        )
    return f"cell {m.cell}, {m.cpus:g} cores for A and A', {m.cpus * (1 - m.slowdown):g} for B (planted slowdown {m.slowdown:.1%})"


def table(r: dict, measured: Measured | None) -> str:
    v, c = r["variation"], r["computed"]
    g = r["gate"]
    rc, rf = _rates(r["resampled"]["caught"]), _rates(r["resampled"]["false"])
    re_ = _rates(r["resampled"]["exact"])
    dc, df = _rates(r["disjoint"]["caught"]), _rates(r["disjoint"]["false"])
    lines = []
    if measured is not None:
        lines += _server_lines(measured)
    if measured is not None:
        lines.append(
            f"server: {_slowed(measured)}; start {measured.startup_s:.0f} s, warm-up run {measured.warmup:.2f}"
        )
    low, high = v["ratio_low"], v["ratio_high"]
    lines += [
        f"runs: {r['blocks']} blocks of A B A'; variation (sd/mean) A {v['cv_a']:.2%}  B {v['cv_b']:.2%}  "
        f"A' {v['cv_a2']:.2%}",
        f"measured slowdown: B/A = {v['ratio']:.4f} (95 % {low if low is None else round(low, 4)}"
        f"–{high if high is None else round(high, 4)}), i.e. {1 - v['ratio']:.2%}; unchanged A'/A = "
        f"{v['unchanged_ratio']:.4f}",
        f"gate (manifests/ff-next.yaml): one-sided 95 % lower bound of candidate/baseline >= {g['min_ratio']}, "
        f"{g['runs']} runs each side, guards {_pct(g['guards'])}",
        "",
        f"{'':34} {'resampled':>22} {'disjoint':>10} {'computed':>9}",
        f"{'slowed B vs A: caught':34} {_pct(rc.rate()):>9} of {rc.trials:<6} "
        f"({_pct(rc.rate('below'))} by bound) {dc.failed:>3}/{dc.trials:<3} {_pct(c['caught_measured']):>9}",
        f"{UNCHANGED:34} {_pct(rf.rate()):>9} of {rf.trials:<6} "
        f"({_pct(rf.rate('below'))} by bound) {df.failed:>3}/{df.trials:<3} {_pct(c['false_failure']):>9}",
        f"{'  of which GATE_UNDERPOWERED':34} {_pct(rf.rate('underpowered')):>9}",
        f"{EXACT:34} {_pct(re_.rate()):>9} of {re_.trials:<6} ({_pct(re_.rate('below'))} by bound)"
        f"  (A' x {1 - r['resampled']['slowdown']:g}: measured noise, an exact slowdown)",
        f"a {_pct(g['guards'])} regression at this variation: caught {_pct(c['caught_guarded'])} (computed)",
    ]
    if c["design_runs"] is None:
        lines.append(
            f"no design of at most {MAX_RUNS} runs keeps both error rates <= {LIMIT:.0%} at the unchanged "
            f"runs' pooled variation ({_pooled(v):.2%}): {c['runs_uncapped']} runs each side would"
        )
    else:
        lo, hi = c["window"]
        lines.append(
            f"both error rates <= {LIMIT:.0%} at the unchanged runs' pooled variation ({_pooled(v):.2%}): "
            f"{c['design_runs']} runs each side, min_ratio in [{lo:.4f}, {hi:.4f}] (gate_power)"
        )
    return "\n".join(lines)


def row(r: dict, measured: Measured, date: str) -> str:
    """docs/benchmarks.md's row."""
    v, g = r["variation"], r["gate"]
    rc, rf = _rates(r["resampled"]["caught"]), _rates(r["resampled"]["false"])
    dc, df = _rates(r["disjoint"]["caught"]), _rates(r["disjoint"]["false"])
    cmd = (
        f"`python benchmarks/bench_gate_catch.py --blocks {r['blocks']} --cpus {measured.cpus:g} --period-us {measured.period_us} "
        f"--slow-by {measured.slow_by}{f' --plant-wait {measured.plant_wait}' if measured.slow_by == 'step' else ''} --trials {r['resampled']['trials']} --row`"
    )
    return (
        f"| ff-next's step-rate gate ({g['runs']} runs, {g['min_ratio']}) on {_slowed(measured)}, "
        f"{r['blocks']} interleaved A B A' blocks | "
        f"5 % slowdown caught **{_pct(rc.rate())}**, unchanged candidate failed **{_pct(rf.rate())}** "
        f"({rc.trials} block-bootstrap trials; disjoint {dc.failed}/{dc.trials} and {df.failed}/{df.trials}); "
        f"run-to-run variation {v['cv_a']:.2%} / {v['cv_b']:.2%} / {v['cv_a2']:.2%} | "
        f"measured slowdown B/A {v['ratio']:.4f} ({1 - v['ratio']:.1%}; planted {measured.slowdown:.0%}) | "
        f"{cmd} | {date} |"
    )


def read_runs(path: Path) -> tuple[Measured, dict]:
    """The runs an earlier ``--json`` (or bench_gate_catch_gpu.py) wrote, and what else the file holds
    that a judged file carries over (the GPU benchmark's sessions)."""
    whole = json.loads(path.read_text(encoding="utf-8"))
    data = whole["measured"]
    measured = Measured(**{**data, "runs": [Run(**x) for x in data["runs"]]})
    return measured, {k: v for k, v in whole.items() if k == "gpu"}


def _saver(path: Path | None) -> Callable[[Measured], None] | None:
    """Writes the runs so far after each block: a stopped run can still be judged (``--runs-file``)."""
    if path is None:
        return None

    def save(m: Measured) -> None:
        path.write_text(json.dumps({"measured": asdict(m)}, indent=1) + "\n", encoding="utf-8")

    return save


def _gate_from(args: argparse.Namespace) -> Gate:
    gate = ff_next_gate()
    changes = {k: v for k, v in (("runs", args.runs), ("min_ratio", args.min_ratio)) if v is not None}
    return gate.model_copy(update=changes) if changes else gate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--blocks", type=int, default=60, help="interleaved A B A' blocks")
    parser.add_argument("--cpus", type=float, default=0.25, help="the server's CPU quota, in cores (0: none)")
    parser.add_argument(
        "--slow-by",
        choices=("step", "quota"),
        default="step",
        help="how B is slowed: a delay planted in every engine step (benchmarks/plant) or a CPU quota cut",
    )
    parser.add_argument(
        "--plant-wait",
        choices=("spin", "sleep"),
        default="spin",
        help="how the planted delay waits (--slow-by step): busy on the CPU, or asleep",
    )
    parser.add_argument(
        "--slowdown",
        type=float,
        default=0.05,
        help="B's step rate (step) or CPU quota (quota) is 1 - this of A's",
    )
    parser.add_argument(
        "--period-us",
        type=int,
        default=100_000,
        help="the CFS period the quota is given in (shorter: the server is stopped in shorter spells)",
    )
    parser.add_argument(
        "--fixed-order",
        dest="rotate",
        action="store_false",
        help="run every block as A B A' (default: the order rotates from block to block)",
    )
    parser.add_argument("--cell", default="cpu-ngram3", help="the demo cell whose server is measured")
    parser.add_argument("--output-len", type=int, default=64, help="decode tokens per long request")
    parser.add_argument("--prompts", type=int, default=2, help="decode requests per run (each length)")
    parser.add_argument("--max-minutes", type=float, help="start no block after this many minutes of runs")
    parser.add_argument("--trials", type=int, default=1000, help="block-bootstrap trials")
    parser.add_argument("--runs", type=int, help="judge with this many runs instead of ff-next's")
    parser.add_argument("--min-ratio", type=float, help="judge with this threshold instead of ff-next's")
    parser.add_argument(
        "--quick", action="store_true", help="3 blocks, 200 trials: the pipeline, not figures"
    )
    parser.add_argument(
        "--synthetic", type=float, metavar="CV", help="no Docker: normal runs of this variation"
    )
    parser.add_argument(
        "--runs-file", type=Path, help="judge the runs of an earlier --json instead of measuring"
    )
    parser.add_argument(
        "--quota-bound",
        type=float,
        metavar="SHARE",
        help="with --runs-file: judge only blocks whose runs each hit the quota in at least this share of periods",
    )
    parser.add_argument("--seed", type=int, default=45)
    parser.add_argument("--json", type=Path, help="write the runs and the figures here")
    parser.add_argument("--row", action="store_true", help="also print docs/benchmarks.md's row")
    args = parser.parse_args(argv)
    if args.quick:
        args.blocks, args.trials = 3, 200
    gate = _gate_from(args)
    measured: Measured | None = None
    kept: dict = {}  # with --runs-file: what else the file holds (the GPU benchmark's sessions), carried over
    if args.synthetic is not None:
        blocks = synthetic_blocks(args.blocks, cv=args.synthetic, ratio=1 - args.slowdown, seed=args.seed)
    elif args.runs_file is not None:
        measured, kept = read_runs(args.runs_file)
        blocks = measured.blocks(args.quota_bound)
    else:
        from releasekit.docker_engine import connect

        # A plain kill (timeout, kill PID) ends the run through ``finally``: the server's container goes too.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        engine = connect()
        try:
            measured = measure(
                engine, args, lambda line: print(line, file=sys.stderr, flush=True), save=_saver(args.json)
            )
        finally:
            engine.close()
        blocks = measured.blocks()
    r = report(gate, blocks, trials=args.trials, seed=args.seed, slowdown=args.slowdown)
    print(table(r, measured))
    if args.json is not None:
        args.json.write_text(
            json.dumps({"measured": asdict(measured) if measured else None, **kept, **r}, indent=1) + "\n",
            encoding="utf-8",
        )
    if args.row and measured is not None:
        print(row(r, measured, datetime.date.today().isoformat()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
