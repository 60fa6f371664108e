"""Long-context output check: a pass key hidden at a depth of a long prompt must come back."""

from __future__ import annotations

import random
import re
from typing import Any

from releasekit.findings import Findings
from releasekit.manifest.validation import LongContextCheck
from releasekit.records.receipt import Metric
from releasekit.validate.checks.interface import CellCheck, CheckContext, metric

FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "
QUESTION = "\nWhat is the pass key? The pass key is"


def needle(key: str) -> str:
    return f" The pass key is {key}. Remember it. {key} is the pass key. "


def build_prompt(filler_repeats: int, depth: float, key: str) -> str:
    """Filler text with the needle inserted after ``depth`` (0..1) of it, then the question."""
    before = round(filler_repeats * min(max(depth, 0.0), 1.0))
    return (
        "There is a pass key hidden in this text. Find it and memorise it.\n"
        + FILLER * before
        + needle(key)
        + FILLER * (filler_repeats - before)
        + QUESTION
    )


def passkey_found(output: str, key: str) -> bool:
    # Whole number only: "714320" must not count as "71432".
    return re.search(rf"(?<!\d){re.escape(key)}(?!\d)", output) is not None


class LongContext(CellCheck):
    kind = "long_context"
    codes = ("REQUEST_FAILED", "PASSKEY_NOT_RETURNED")
    config: LongContextCheck

    def measure(self, ctx: CheckContext, findings: Findings) -> tuple[list[Metric], dict[str, object]]:
        cfg = self.config
        client = ctx.client
        assert client is not None
        rng = random.Random(ctx.seed)
        # Size the filler with the real tokenizer so the prompt fills context_len minus the answer.
        per_filler = max(1, len(client.tokenize(FILLER)))
        budget = cfg.context_len - cfg.max_tokens - 64
        repeats = max(1, budget // per_filler)
        results: list[dict[str, Any]] = []
        for depth in cfg.needle_depths:
            key = str(rng.randint(10000, 99999))
            prompt = build_prompt(repeats, depth, key)
            out = client.complete(prompt, cfg.max_tokens)
            found = out.ok and passkey_found(out.text, key)
            results.append(
                {
                    "depth": depth,
                    "key": key,
                    "found": found,
                    "prompt_tokens": out.prompt_tokens,
                    "output": out.text[:200],
                    "error": out.error,
                }
            )
            if not out.ok:
                findings.add("REQUEST_FAILED", f"long-context request at depth {depth} failed: {out.error}")
            elif not found:
                findings.add(
                    "PASSKEY_NOT_RETURNED",
                    f"pass key {key} at depth {depth} of {out.prompt_tokens} tokens did not come back: {out.text[:80]!r}",
                )
        found_fraction = sum(r["found"] for r in results) / len(results)
        prompt_tokens = max((r["prompt_tokens"] or 0) for r in results)
        return [
            metric(self.kind, "found", found_fraction, "fraction"),
            metric(self.kind, "prompt_tokens", prompt_tokens, "tokens"),
        ], {"context_len": cfg.context_len, "needles": results}
