"""GSM8K-style accuracy, scored like lm-eval's gsm8k task (flexible-extract by default)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pydantic import BaseModel

from releasekit.errors import InputError
from releasekit.findings import Findings
from releasekit.manifest.validation import Gsm8kCheck
from releasekit.records.receipt import Metric
from releasekit.validate import scoring
from releasekit.validate.checks.interface import CellCheck, CheckContext, metric
from releasekit.validate.gates import accuracy_against_baseline, resolve_baseline
from releasekit.validate.stats import wilson_lower, wilson_upper

# lm-eval's gsm8k generation stops here; a model that keeps going would otherwise
# write the next question and its number would become "the last number".
STOP = ["Question:", "</s>", "<|im_end|>"]


class Problem(BaseModel):
    question: str
    answer: str


def read_problems(path: Path) -> tuple[list[Problem], str]:
    """The problems of a GSM8K-format JSONL file and the file's sha256."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read GSM8K data: {exc.strerror}") from None
    problems = []
    for i, line in enumerate(raw.decode("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            problems.append(Problem.model_validate(json.loads(line)))
        except (ValueError, TypeError) as exc:
            raise InputError(f"{path}:{i}: not a GSM8K record (question, answer): {exc}") from None
    return problems, hashlib.sha256(raw).hexdigest()


def fewshot_prefix(examples: list[Problem]) -> str:
    return "".join(f"Question: {p.question}\nAnswer: {p.answer}\n\n" for p in examples)


def prompt_for(prefix: str, problem: Problem) -> str:
    return f"{prefix}Question: {problem.question}\nAnswer:"


class Score(BaseModel):
    n: int
    correct: int
    accuracy: float
    wilson_low: float
    wilson_high: float
    invalid: int  # outputs with no number at all


def score_outputs(outputs: list[str], problems: list[Problem], filter_name: str, confidence: float) -> Score:
    correct = invalid = 0
    for out, problem in zip(outputs, problems, strict=True):
        extracted, ok = scoring.score(out, problem.answer, filter_name)
        correct += ok
        invalid += extracted == scoring.NO_MATCH
    n = len(problems)
    return Score(
        n=n,
        correct=correct,
        accuracy=correct / n if n else 0.0,
        wilson_low=wilson_lower(correct, n, confidence),
        wilson_high=wilson_upper(correct, n, confidence),
        invalid=invalid,
    )


def baseline_value(ctx: CheckContext, name: str) -> float | None:
    for base_name, base in ctx.spec.baselines.items():
        value = resolve_baseline(base_name, base, ctx.manifest_dir).values.get(name)
        if value is not None:
            return value
    return None


class Gsm8k(CellCheck):
    kind = "gsm8k"
    codes = ("DATASET_CHANGED", "REQUEST_FAILED", "ACCURACY_BELOW_MIN", "BASELINE_UNAVAILABLE", "ACCURACY_BELOW_BASELINE")
    config: Gsm8kCheck

    def measure(self, ctx: CheckContext, findings: Findings) -> tuple[list[Metric], dict[str, object]]:
        cfg = self.config
        dataset = ctx.spec.datasets.get(cfg.dataset)
        if dataset is None:
            raise InputError(f"cell {ctx.cell.id}: gsm8k dataset '{cfg.dataset}' is not in validation.datasets")
        problems, digest = read_problems(ctx.manifest_dir / dataset.path)
        if dataset.sha256 and dataset.sha256 != digest:
            findings.add("DATASET_CHANGED", f"dataset '{cfg.dataset}' has sha256 {digest}, the manifest pins {dataset.sha256}")
            return [], {"dataset_sha256": digest}
        # Few-shot examples come from the front of the file and are never scored.
        examples, scored = problems[: cfg.num_fewshot], problems[cfg.num_fewshot :]
        if cfg.limit is not None:
            scored = scored[: cfg.limit]
        if not scored:
            raise InputError(f"cell {ctx.cell.id}: dataset '{cfg.dataset}' leaves no question after {cfg.num_fewshot} few-shot examples")
        prefix = fewshot_prefix(examples)
        outputs: list[str] = []
        errors = 0
        assert ctx.client is not None
        for problem in scored:
            result = ctx.client.complete(prompt_for(prefix, problem), cfg.max_tokens, stop=STOP)
            if not result.ok:
                errors += 1
                if errors == 1:
                    findings.add("REQUEST_FAILED", f"gsm8k request failed: {result.error}")
            outputs.append(result.text)
        s = score_outputs(outputs, scored, cfg.filter, cfg.confidence)
        if cfg.min_accuracy is not None and s.accuracy < cfg.min_accuracy:
            findings.add(
                "ACCURACY_BELOW_MIN",
                f"gsm8k {cfg.filter} accuracy {s.accuracy:.4f} ({s.correct}/{s.n}) is below {cfg.min_accuracy}",
            )
        if cfg.baseline_metric is not None:
            expected = baseline_value(ctx, cfg.baseline_metric)
            if expected is None:
                findings.add("BASELINE_UNAVAILABLE", f"no baseline gives {cfg.baseline_metric}")
            elif not accuracy_against_baseline(s.wilson_low, expected, cfg.rtol):
                findings.add(
                    "ACCURACY_BELOW_BASELINE",
                    f"gsm8k accuracy {s.accuracy:.4f} ({s.correct}/{s.n}): its one-sided {cfg.confidence:.0%} Wilson "
                    f"lower bound {s.wilson_low:.4f} is below {expected} x (1 - {cfg.rtol}) = {expected * (1 - cfg.rtol):.4f}",
                )
        metrics = [
            metric(self.kind, "accuracy", s.accuracy, "fraction", low=s.wilson_low, high=s.wilson_high),
            metric(self.kind, "correct", s.correct, "questions"),
            metric(self.kind, "n", s.n, "questions"),
            metric(self.kind, "invalid", s.invalid, "questions"),
        ]
        examples_out = [
            {"question": p.question[:200], "output": o[:300], "extracted": scoring.score(o, p.answer, cfg.filter)[0]}
            for p, o in list(zip(scored, outputs, strict=True))[:3]
        ]
        ctx.notes["gsm8k"] = s
        return metrics, {"dataset": cfg.dataset, "dataset_sha256": digest, "filter": cfg.filter,
                         "num_fewshot": cfg.num_fewshot, "request_errors": errors, "examples": examples_out}
