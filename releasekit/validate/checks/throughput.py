"""Throughput sweep: random N-in/M-out prompts at each concurrency, with latency percentiles."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from releasekit.findings import Findings
from releasekit.manifest.validation import ThroughputCheck
from releasekit.records.receipt import Metric
from releasekit.validate.checks.interface import CellCheck, CheckContext, metric
from releasekit.validate.checks.prompts import random_prompts, token_pool
from releasekit.validate.client import Completion
from releasekit.validate.stats import percentile


class Level(BaseModel):
    """One concurrency level of the sweep; times in milliseconds like ``vllm bench serve``."""

    concurrency: int
    completed: int
    total: int
    wall_s: float
    output_tok_s: float
    request_per_s: float
    ttft_ms_p50: float | None
    ttft_ms_p99: float | None
    tpot_ms_p50: float | None
    tpot_ms_p99: float | None
    itl_ms_p50: float | None
    itl_ms_p99: float | None


def _pct(values: list[float], q: float) -> float | None:
    return round(percentile(values, q), 3) if values else None


def summarise(concurrency: int, results: list[Completion], wall_s: float) -> Level:
    ok = [r for r in results if r.ok and r.completion_tokens]
    out_tokens = sum(r.completion_tokens or 0 for r in ok)
    ttft = [r.ttft_s * 1000 for r in ok if r.ttft_s is not None]
    tpot = [
        (r.latency_s - r.ttft_s) * 1000 / (r.completion_tokens - 1)
        for r in ok
        if r.ttft_s is not None and r.completion_tokens is not None and r.completion_tokens > 1
    ]
    itl = [
        (b - a) * 1000 for r in ok for a, b in zip(r.chunk_times_s, r.chunk_times_s[1:], strict=False)
    ]
    return Level(
        concurrency=concurrency,
        completed=len(ok),
        total=len(results),
        wall_s=round(wall_s, 3),
        output_tok_s=out_tokens / wall_s if wall_s > 0 else 0.0,
        request_per_s=len(ok) / wall_s if wall_s > 0 else 0.0,
        ttft_ms_p50=_pct(ttft, 50),
        ttft_ms_p99=_pct(ttft, 99),
        tpot_ms_p50=_pct(tpot, 50),
        tpot_ms_p99=_pct(tpot, 99),
        itl_ms_p50=_pct(itl, 50),
        itl_ms_p99=_pct(itl, 99),
    )


def level_metrics(kind: str, level: Level) -> list[Metric]:
    c = f"c{level.concurrency}"
    out = [
        metric(kind, f"{c}.output_tok_s", level.output_tok_s, "tok/s"),
        metric(kind, f"{c}.completed", level.completed, "requests"),
        metric(kind, f"{c}.total", level.total, "requests"),
    ]
    for field, unit in (("ttft_ms", "ms"), ("tpot_ms", "ms"), ("itl_ms", "ms")):
        for q in ("p50", "p99"):
            value = getattr(level, f"{field}_{q}")
            out.append(metric(kind, f"{c}.{field}_{q}", value, unit))
    return out


class Throughput(CellCheck):
    kind = "throughput"
    codes = ("REQUESTS_INCOMPLETE",)
    config: ThroughputCheck

    def measure(self, ctx: CheckContext, findings: Findings) -> tuple[list[Metric], dict[str, object]]:
        cfg = self.config
        client = ctx.client
        assert client is not None
        pool = token_pool(client)
        levels: list[Level] = []
        metrics: list[Metric] = []
        for i, c in enumerate(cfg.concurrency):
            count = cfg.num_prompts or cfg.prompts_per_concurrency * c
            prompts = random_prompts(pool, count, cfg.input_len, ctx.seed + i)
            results, wall = asyncio.run(client.run_concurrent(prompts, cfg.output_len, c, ignore_eos=True))
            level = summarise(c, results, wall)
            levels.append(level)
            metrics += level_metrics(self.kind, level)
            if cfg.require_all_complete and level.completed < level.total:
                first = next((r.error for r in results if not r.ok), "no tokens")
                findings.add(
                    "REQUESTS_INCOMPLETE",
                    f"concurrency {c}: {level.completed}/{level.total} requests completed ({first})",
                )
        done = sum(lv.completed for lv in levels)
        total = sum(lv.total for lv in levels)
        metrics.append(metric(self.kind, "completed_ratio", done / total if total else 0.0, "fraction"))
        return metrics, {
            "input_len": cfg.input_len,
            "output_len": cfg.output_len,
            "levels": [lv.model_dump() for lv in levels],
        }
