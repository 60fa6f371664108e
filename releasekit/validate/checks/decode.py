"""Single-stream decode speed and the target-step rate (output tok/s / acceptance length).

The target-step rate is what speculative changes must not regress: with MTP:k, tok/s
rises with acceptance, so tok/s alone would hide a slower target model step.
"""

from __future__ import annotations

import asyncio

from releasekit.findings import Findings
from releasekit.manifest.validation import DecodeCheck
from releasekit.validate.checks.interface import CellCheck, CheckContext, metric
from releasekit.validate.checks.prompts import random_prompts, token_pool
from releasekit.validate.client import Completion
from releasekit.validate.metrics import SpecCounters, acceptance
from releasekit.validate.receipt import Metric


def streamed_per_token(c: Completion) -> bool:
    """Did the tokens arrive one by one? A starved API server (e.g. on a busy CPU host)
    flushes many tokens in one chunk, and then the first chunk's time says nothing."""
    return bool(c.completion_tokens) and len(c.chunk_times_s) * 2 >= (c.completion_tokens or 0)


def decode_tok_s(c: Completion) -> float | None:
    """Tokens after the first over the time after the first, so prefill does not count;
    when the stream was coalesced, the whole request's rate (prefill included) instead."""
    if c.completion_tokens is None or c.ttft_s is None or c.completion_tokens < 2:
        return None
    if not streamed_per_token(c):
        return c.completion_tokens / c.latency_s if c.latency_s > 0 else None
    span = c.latency_s - c.ttft_s
    return (c.completion_tokens - 1) / span if span > 0 else None


def target_step_rate(tok_s: float, mean_length: float | None) -> float:
    return tok_s / (mean_length if mean_length and mean_length > 0 else 1.0)


class Decode(CellCheck):
    kind = "decode"
    config: DecodeCheck

    def measure(self, ctx: CheckContext, findings: Findings) -> tuple[list[Metric], dict[str, object]]:
        cfg = self.config
        client = ctx.client
        assert client is not None
        prompts = random_prompts(token_pool(client), cfg.num_prompts, cfg.input_len, ctx.seed)
        spec_on = ctx.cell.speculative.mode != "off"
        before = SpecCounters.from_text(client.get_text(ctx.metrics_path)) if spec_on else None
        results, wall = asyncio.run(client.run_concurrent(prompts, cfg.output_len, cfg.concurrency, ignore_eos=True))
        acc = None
        if before is not None:
            acc = acceptance(SpecCounters.from_text(client.get_text(ctx.metrics_path)).minus(before))
        failed = [r for r in results if not r.ok]
        if failed:
            findings.add("REQUEST_FAILED", f"{len(failed)} of {len(results)} decode requests failed: {failed[0].error}")
        rates = [r for r in (decode_tok_s(c) for c in results if c.ok) if r is not None]
        if not rates:
            findings.add("NO_MEASUREMENT", "no decode request produced two or more tokens")
            return [], {}
        per_stream = sum(rates) / len(rates)
        mean_length = acc.mean_length if acc else None
        step = target_step_rate(per_stream, mean_length)
        if cfg.min_output_tok_s is not None and per_stream < cfg.min_output_tok_s:
            findings.add("DECODE_TOO_SLOW", f"decode {per_stream:.2f} tok/s is below {cfg.min_output_tok_s}")
        metrics = [
            metric(self.kind, "output_tok_s", per_stream, "tok/s"),
            metric(self.kind, "target_step_rate", step, "steps/s"),
            metric(self.kind, "acceptance_length", mean_length or 1.0, "tokens/step"),
        ]
        return metrics, {
            "streamed_per_token": all(streamed_per_token(c) for c in results if c.ok),
            "concurrency": cfg.concurrency,
            "input_len": cfg.input_len,
            "output_len": cfg.output_len,
            "num_prompts": cfg.num_prompts,
            "wall_s": round(wall, 3),
        }
