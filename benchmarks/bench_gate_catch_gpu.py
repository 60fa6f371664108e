"""The gate-catch measurement on a GPU host: a known 5 % per-step delay in a real decode loop (issue 45).

Run (on a machine with a CUDA GPU and PyTorch; nothing of releasekit is imported):
    python benchmarks/bench_gate_catch_gpu.py [--sessions 5] [--blocks 75] [--steps 150] [--max-minutes M] --json FILE
then judge the runs with the real gate code (ff-next's gate, or another --runs/--min-ratio):
    python benchmarks/bench_gate_catch.py --runs-file FILE [--runs N] [--min-ratio R] [--row]

What runs: the decode step of a Llama-shaped model (bf16; by default 32 layers, hidden 5120, 40 heads
of 128, MLP 13824, batch 8, a KV cache of 1024 positions per layer: about 25 GB of weights and cache,
9.3 ms a step on an H100) captured once as a CUDA graph and replayed, one step after another, each
step followed by what a sampler does on the host: the next token of every sequence (argmax) copied to
the CPU. This is not vLLM (the device machines have none); it is the shape of the work ff-next's gated
cells do, on the kind of host they run on.

Two servers, as a gate sees them: a baseline process and a candidate process, each with its own model,
graph and allocations (the same weights), started together for each of ``--sessions`` sessions and
measured in blocks of three runs, interleaved: A (the baseline), B (the candidate with a planted delay
after every step, sized from three runs of its own alone after both warmed up (they warm up at once,
sharing the GPU) so that its step rate is ``1 - slowdown`` of what it was:
the host spins ``t_step * slowdown / (1 - slowdown)`` seconds after each step) and A' (the candidate as
it is: an unchanged release). A fresh pair of processes each session puts the offset between two
servers of the same code into the runs, which a baseline from an earlier receipt also carries.

The metric is steps per second. ``--json`` gets bench_gate_catch.py's ``measured`` shape (written after
every block, so a stopped run can still be judged) and, under ``gpu``, the device, the delay and each
session's mean A'/A and B/A.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from statistics import fmean

LABELS = ("A", "B", "A'")


def _model(args: argparse.Namespace):  # -> (step function, torch)
    import torch

    torch.manual_seed(45)
    dev, dt = "cuda", torch.bfloat16
    h, heads, mlp, b, kv = args.hidden, args.heads, args.mlp, args.batch, args.kv
    hd = h // heads
    layers = []
    for _ in range(args.layers):
        layers.append(
            {
                "qkv": torch.randn(h, 3 * h, device=dev, dtype=dt) * 0.02,
                "o": torch.randn(h, h, device=dev, dtype=dt) * 0.02,
                "up": torch.randn(h, 2 * mlp, device=dev, dtype=dt) * 0.02,
                "down": torch.randn(mlp, h, device=dev, dtype=dt) * 0.02,
                "k": torch.randn(b, heads, kv, hd, device=dev, dtype=dt),
                "v": torch.randn(b, heads, kv, hd, device=dev, dtype=dt),
            }
        )
    x = torch.randn(b, h, device=dev, dtype=dt)
    out = torch.empty_like(x)

    def step() -> None:
        y = x
        for w in layers:
            q = (y @ w["qkv"]).view(b, 3, heads, hd)[:, 0]
            att = torch.nn.functional.scaled_dot_product_attention(q.unsqueeze(2), w["k"], w["v"])
            y = y + att.reshape(b, h) @ w["o"]
            gate, up = (y @ w["up"]).chunk(2, dim=-1)
            y = y + (torch.nn.functional.silu(gate) * up) @ w["down"]
        out.copy_(y)

    return step, out, torch


def _graph(step, torch):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph


def _run(graph, out, steps: int, delay: float) -> float:
    """Steps per second of ``steps`` replays, each followed by the sampler's copy to the host (and,
    with ``delay``, a spin of that many seconds)."""
    start = time.perf_counter()
    for _ in range(steps):
        graph.replay()
        out.argmax(dim=-1).tolist()  # waits for the step, as the sampled tokens reach the scheduler
        if delay:
            until = time.perf_counter() + delay
            while time.perf_counter() < until:
                pass
    return steps / (time.perf_counter() - start)


def worker(args: argparse.Namespace) -> int:
    """One server: builds its model and graph, warms up, answers ``run STEPS DELAY`` lines with steps/s."""
    began = time.perf_counter()
    step, out, torch = _model(args)
    graph = _graph(step, torch)
    warm = [_run(graph, out, args.steps, 0.0) for _ in range(4)]
    rate = fmean(warm[1:])
    print(json.dumps({"ready": round(time.perf_counter() - began, 2), "rate": rate}), flush=True)
    for line in sys.stdin:
        _, steps, delay = line.split()
        print(json.dumps({"value": _run(graph, out, int(steps), float(delay))}), flush=True)
    return 0


class Server:
    def __init__(self, args: argparse.Namespace) -> None:
        argv = [sys.executable, __file__, "--worker", "--steps", str(args.steps)]
        for name in ("layers", "hidden", "heads", "mlp", "batch", "kv"):
            argv += [f"--{name}", str(getattr(args, name))]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.ready: dict = {}

    def wait_ready(self) -> dict:
        self.ready = self._read()
        return self.ready

    def run(self, steps: int, delay: float) -> float:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"run {steps} {delay!r}\n")
        self.proc.stdin.flush()
        return float(self._read()["value"])

    def _read(self) -> dict:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the worker ended (exit {self.proc.wait()})")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=5, help="fresh pairs of server processes")
    parser.add_argument(
        "--blocks", type=int, default=75, help="A B A' blocks in all, split over the sessions"
    )
    parser.add_argument("--steps", type=int, default=150, help="decode steps per run")
    parser.add_argument("--slowdown", type=float, default=0.05)
    parser.add_argument("--max-minutes", type=float, help="start no block after this many minutes")
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=5120)
    parser.add_argument("--heads", type=int, default=40)
    parser.add_argument("--mlp", type=int, default=13824)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--kv", type=int, default=1024, help="KV cache positions per layer")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    if args.json is None:
        parser.error("--json is required")

    import torch

    device = torch.cuda.get_device_name()
    began = time.monotonic()
    runs: list[dict] = []
    sessions: list[dict] = []
    per = max(1, args.blocks // args.sessions)
    measured = {
        "cell": f"gpu decode loop on {device} ({args.layers} layers x {args.hidden}, batch {args.batch}, "
        f"kv {args.kv}, {args.steps} steps a run, CUDA graph; baseline and candidate in two processes, "
        f"{args.sessions} sessions)",
        "cpus": 0.0,
        "slowdown": args.slowdown,
        "period_us": 0,
        "slow_by": "step",
        "runs": runs,
        "startup_s": 0.0,
        "warmup": 0.0,
    }

    def save() -> None:
        gpu = {"device": device, "torch": torch.__version__, "cuda": torch.version.cuda, "sessions": sessions}
        args.json.write_text(
            json.dumps({"measured": measured, "gpu": gpu}, indent=1) + "\n", encoding="utf-8"
        )

    stopped = False
    for session in range(args.sessions):
        if stopped:
            break
        t0 = time.monotonic()
        base, cand = Server(args), Server(args)
        try:
            ready_a, ready_c = base.wait_ready(), cand.wait_ready()
            measured["startup_s"] = round(time.monotonic() - t0, 1)
            measured["warmup"] = round(ready_a["rate"], 4)
            # Both warmed up at once, sharing the GPU: the candidate's own rate, alone, sizes the delay.
            alone = fmean(cand.run(args.steps, 0.0) for _ in range(3))
            delay = (1 / alone) * args.slowdown / (1 - args.slowdown)
            record = {
                "session": session,
                "delay_s_per_step": delay,
                "candidate_alone": alone,
                "warmup": [ready_a, ready_c],
                "blocks": 0,
            }
            sessions.append(record)
            for block in range(per):
                if args.max_minutes is not None and time.monotonic() - began > 60 * args.max_minutes:
                    stopped = True
                    break
                for label in LABELS:
                    t = time.monotonic()
                    server = base if label == "A" else cand
                    value = server.run(args.steps, delay if label == "B" else 0.0)
                    runs.append(
                        {
                            "label": label,
                            "value": round(value, 4),
                            "seconds": round(time.monotonic() - t, 3),
                            "load": os.getloadavg()[0],
                        }
                    )
                mine = runs[-3 * (block + 1) :]
                a = fmean(r["value"] for r in mine if r["label"] == "A")
                record["blocks"] = block + 1
                record["b_over_a"] = fmean(r["value"] for r in mine if r["label"] == "B") / a
                record["a2_over_a"] = fmean(r["value"] for r in mine if r["label"] == "A'") / a
                save()
            print(
                f"session {session}: {record['blocks']} blocks, B/A {record.get('b_over_a', 0):.4f}, "
                f"A'/A {record.get('a2_over_a', 0):.4f}",
                flush=True,
            )
        finally:
            base.close()
            cand.close()
    save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
