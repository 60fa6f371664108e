"""Speculative acceptance from the server's own counters, as a delta over our requests."""

from __future__ import annotations

import json

from releasekit.bounded_read import DATASET_MAX_BYTES, read_bounded
from releasekit.errors import InputError
from releasekit.findings import Findings
from releasekit.manifest.validation import AcceptanceCheck
from releasekit.records.receipt import Metric
from releasekit.validate.checks.interface import CellCheck, CheckContext, metric
from releasekit.validate.metrics import SpecCounters, acceptance

# A fixed prompt set, so acceptance compares across releases at temperature 0. Structured,
# repetitive text on purpose: it is what drafters (ngram, MTP) are judged on in practice.
BUILTIN_PROMPTS = [
    "Count from one to forty in words, separated by commas: one, two, three,",
    "Write the multiplication table of 7 from 7 x 1 to 7 x 12, one line each:\n7 x 1 = 7\n7 x 2 = 14\n",
    "Repeat the sentence 'the quick brown fox jumps over the lazy dog' ten times, one per line.\n",
    "List the months of the year with their number of days: January 31, February 28, March 31,",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n\n"
    "def factorial(n):\n",
    "The alphabet in order, each letter followed by its position: A 1, B 2, C 3, D 4,",
    "Translate to JSON: name Alice age 30 city Paris; name Bob age 25 city Rome; name Carol age 41 city",
    "Continue the pattern: red green blue red green blue red green blue red",
]


def load_prompts(ctx: CheckContext, name: str | None) -> list[str]:
    if name is None:
        return list(BUILTIN_PROMPTS)
    dataset = ctx.spec.datasets.get(name)
    if dataset is None:
        raise InputError(f"cell {ctx.cell.id}: prompt set '{name}' is not in validation.datasets")
    prompts = []
    raw = read_bounded(ctx.manifest_dir / dataset.path, DATASET_MAX_BYTES)
    for line in raw.decode("utf-8", errors="replace").splitlines():
        if line.strip():
            record = json.loads(line)
            prompts.append(record["prompt"] if isinstance(record, dict) else str(record))
    return prompts


class Acceptance(CellCheck):
    kind = "acceptance"
    codes = ("REQUEST_FAILED", "NO_SPEC_METRICS", "NO_DRAFTS", "ACCEPTANCE_BELOW_MIN")
    config: AcceptanceCheck

    def measure(self, ctx: CheckContext, findings: Findings) -> tuple[list[Metric], dict[str, object]]:
        cfg = self.config
        assert ctx.client is not None
        prompts = load_prompts(ctx, cfg.prompts)
        chosen = [prompts[i % len(prompts)] for i in range(cfg.num_prompts)]
        names = ctx.engine.spec_decode_metrics
        before = SpecCounters.from_text(ctx.client.get_text(ctx.metrics_path), names)
        errors = [r.error for r in (ctx.client.complete(p, cfg.max_tokens) for p in chosen) if not r.ok]
        after = SpecCounters.from_text(ctx.client.get_text(ctx.metrics_path), names)
        if errors:
            findings.add(
                "REQUEST_FAILED", f"{len(errors)} of {len(chosen)} acceptance requests failed: {errors[0]}"
            )
        if not after.present:
            findings.add(
                "NO_SPEC_METRICS", f"the server exports no {names.prefix}* counters: is speculation on?"
            )
            return [], {}
        acc = acceptance(after.minus(before))
        ctx.notes["acceptance"] = acc
        if acc.drafts <= 0:
            findings.add("NO_DRAFTS", "no draft was proposed during the acceptance requests")
        if cfg.min_rate is not None and (acc.rate or 0.0) < cfg.min_rate:
            findings.add("ACCEPTANCE_BELOW_MIN", f"acceptance rate {acc.rate} is below {cfg.min_rate}")
        if cfg.min_mean_length is not None and (acc.mean_length or 0.0) < cfg.min_mean_length:
            findings.add(
                "ACCEPTANCE_BELOW_MIN",
                f"mean acceptance length {acc.mean_length} is below {cfg.min_mean_length}",
            )
        metrics = [
            metric(self.kind, "rate", acc.rate, "fraction"),
            metric(self.kind, "mean_length", acc.mean_length, "tokens/step"),
            metric(self.kind, "drafts", acc.drafts, "drafts"),
            metric(self.kind, "draft_tokens", acc.draft_tokens, "tokens"),
            metric(self.kind, "accepted_tokens", acc.accepted_tokens, "tokens"),
        ]
        metrics += [metric(self.kind, f"position_{i}", r, "fraction") for i, r in enumerate(acc.per_position)]
        return metrics, {
            "prompts": cfg.prompts or "builtin",
            "num_prompts": len(chosen),
            "per_position": acc.per_position,
        }
