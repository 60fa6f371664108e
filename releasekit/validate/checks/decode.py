"""Single-stream decode speed and the target-step rate (output tok/s / acceptance length).

The target-step rate is what speculative changes must not regress: with MTP:k, tok/s
rises with acceptance, so tok/s alone would hide a slower target model step.

Where the engine times decode itself (``Engine.decode_timing``: vLLM's per-request decode
seconds and output tokens, stamped by the engine core), decode speed is its own account of
our requests: (output tokens - one per request) / decode seconds, the delta of its
histograms over ``num_prompts`` requests for ``output_len`` tokens with ``ignore_eos``.
Prefill, the HTTP server and how it flushes a stream are outside it.

Otherwise it is measured by difference: those requests and as many for a quarter of
``output_len``, on different random prompts of the same length (prefix caching cannot help
either). Latency = prefill + tokens x step time, so (extra tokens) / (extra latency) is the
decode rate with prefill cancelled out, whether or not the server streams token by token
(a CPU-starved API server flushes a whole answer at once, which makes stream timestamps
meaningless). It is biased for a speculating cell (a long answer drafts better than a short
one, so its extra tokens cost fewer steps), which is why the engine's account comes first.
The receipt names the method. TPOT from the stream is recorded beside it.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from statistics import fmean

import httpx

from releasekit.findings import Findings
from releasekit.manifest.validation import DecodeCheck
from releasekit.records.receipt import Metric
from releasekit.validate.checks.interface import CellCheck, CheckContext, metric
from releasekit.validate.checks.prompts import random_prompts, token_pool
from releasekit.validate.client import Completion, EngineClient
from releasekit.validate.engines.interface import DecodeTimingMetricNames
from releasekit.validate.metrics import DecodeTiming, SpecCounters, acceptance

ENGINE_TIMED = "engine decode timing"
BY_DIFFERENCE = "by difference"
# The front end observes a finished request's histograms just after handing its answer over: how
# long to wait for them to count every request sent before measuring by difference instead.
TIMING_WAIT_S = 5.0


def decode_rate(long: list[Completion], short: list[Completion]) -> float | None:
    """(mean tokens long - short) / (mean latency long - short); None when not measurable."""
    long_ok = [c for c in long if c.ok and c.completion_tokens]
    short_ok = [c for c in short if c.ok and c.completion_tokens]
    if not long_ok or not short_ok:
        return None
    d_tokens = fmean(c.completion_tokens or 0 for c in long_ok) - fmean(
        c.completion_tokens or 0 for c in short_ok
    )
    d_time = fmean(c.latency_s for c in long_ok) - fmean(c.latency_s for c in short_ok)
    return d_tokens / d_time if d_tokens > 0 and d_time > 0 else None


def stream_tpot_ms(results: list[Completion]) -> float | None:
    tpots = [
        (c.latency_s - c.ttft_s) * 1000 / (c.completion_tokens - 1)
        for c in results
        if c.ok and c.ttft_s is not None and c.completion_tokens is not None and c.completion_tokens > 1
    ]
    return fmean(tpots) if tpots else None


def target_step_rate(tok_s: float, mean_length: float | None) -> float:
    return tok_s / (mean_length if mean_length and mean_length > 0 else 1.0)


def scrape_timing(
    client: EngineClient, path: str, names: DecodeTimingMetricNames | None
) -> DecodeTiming | None:
    """The engine's decode histograms now; None when it names none or its /metrics has none."""
    if names is None:
        return None
    try:
        timing = DecodeTiming.from_text(client.get_text(path), names)
    except httpx.HTTPError:
        return None
    return timing if timing.present else None


def engine_decode_rate(
    client: EngineClient, path: str, names: DecodeTimingMetricNames, before: DecodeTiming, requests: int
) -> tuple[float | None, DecodeTiming]:
    """The engine's decode rate over the ``requests`` finished since ``before``, once it counts them all."""
    deadline = time.monotonic() + TIMING_WAIT_S
    while True:
        after = scrape_timing(client, path, names)
        delta = after.minus(before) if after is not None else DecodeTiming()
        if delta.requests >= requests or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    return (delta.decode_rate() if delta.requests == requests else None), delta


@dataclass
class Runs:
    """The decode requests of one measurement and the rate they gave (None: not measurable)."""

    long: list[Completion]
    short: list[Completion]  # empty where the engine timed the long ones itself
    wall_s: float
    rate: float | None
    timing: DecodeTiming | None  # the engine's histograms' delta over the long requests


def short_len(cfg: DecodeCheck) -> int:
    """The short requests' length, where decode is measured by difference."""
    return max(1, cfg.output_len // 4)


def run_decode(ctx: CheckContext, cfg: DecodeCheck, prompts: list[list[int]]) -> Runs:
    """``num_prompts`` requests for ``output_len`` tokens, timed by the engine where it can; by
    difference with as many for a quarter of that where it cannot."""
    client = ctx.client
    assert client is not None
    names = ctx.engine.decode_timing
    before = scrape_timing(client, ctx.metrics_path, names)
    long, wall_long = asyncio.run(
        client.run_concurrent(prompts[: cfg.num_prompts], cfg.output_len, cfg.concurrency, ignore_eos=True)
    )
    if before is not None and names is not None:
        rate, timing = engine_decode_rate(client, ctx.metrics_path, names, before, len(long))
        if rate is not None:
            return Runs(long, [], wall_long, rate, timing)
    short, wall_short = asyncio.run(
        client.run_concurrent(prompts[cfg.num_prompts :], short_len(cfg), cfg.concurrency, ignore_eos=True)
    )
    return Runs(long, short, wall_long + wall_short, decode_rate(long, short), None)


def run_details(cfg: DecodeCheck, runs: Runs) -> dict[str, object]:
    details: dict[str, object] = {
        "method": BY_DIFFERENCE if runs.short else ENGINE_TIMED,
        "concurrency": cfg.concurrency,
        "input_len": cfg.input_len,
        "output_len": [cfg.output_len, short_len(cfg)] if runs.short else [cfg.output_len],
        "num_prompts": cfg.num_prompts,
        "latency_s": [round(fmean(c.latency_s for c in b), 4) for b in (runs.long, runs.short) if b],
        "wall_s": round(runs.wall_s, 3),
    }
    if runs.timing is not None:
        details["engine_timed"] = {
            "requests": int(runs.timing.requests),
            "decode_tokens": int(runs.timing.decode_tokens),
            "decode_s": round(runs.timing.decode_s, 4),
        }
    return details


class Decode(CellCheck):
    kind = "decode"
    codes = ("REQUEST_FAILED", "NO_MEASUREMENT", "DECODE_TOO_SLOW")
    config: DecodeCheck

    def measure(self, ctx: CheckContext, findings: Findings) -> tuple[list[Metric], dict[str, object]]:
        cfg = self.config
        client = ctx.client
        assert client is not None
        prompts = random_prompts(token_pool(client), 2 * cfg.num_prompts, cfg.input_len, ctx.seed)
        names = ctx.engine.spec_decode_metrics
        spec_on = ctx.cell.speculative.mode != "off"
        before = SpecCounters.from_text(client.get_text(ctx.metrics_path), names) if spec_on else None
        runs = run_decode(ctx, cfg, prompts)
        acc = None
        if before is not None:
            acc = acceptance(SpecCounters.from_text(client.get_text(ctx.metrics_path), names).minus(before))
        failed = [r for r in runs.long + runs.short if not r.ok]
        if failed:
            sent = len(runs.long) + len(runs.short)
            findings.add(
                "REQUEST_FAILED", f"{len(failed)} of {sent} decode requests failed: {failed[0].error}"
            )
        rate = runs.rate
        if rate is None:
            findings.add(
                "NO_MEASUREMENT",
                "the engine timed no decode of our requests, and the long decode requests were not "
                "measurably slower than the short ones",
            )
            return [], {}
        mean_length = acc.mean_length if acc else None
        step = target_step_rate(rate, mean_length)
        if cfg.min_output_tok_s is not None and rate < cfg.min_output_tok_s:
            findings.add("DECODE_TOO_SLOW", f"decode {rate:.2f} tok/s is below {cfg.min_output_tok_s}")
        metrics = [
            metric(self.kind, "output_tok_s", rate, "tok/s"),
            metric(self.kind, "target_step_rate", step, "steps/s"),
            metric(self.kind, "acceptance_length", mean_length or 1.0, "tokens/step"),
            metric(self.kind, "stream_tpot_ms", stream_tpot_ms(runs.long), "ms"),
        ]
        return metrics, run_details(cfg, runs)
