"""GSM8K-style accuracy, scored like lm-eval's gsm8k task (flexible-extract by default).

The protocol, enforced before the server starts (``preflight``) and again before scoring:
the scored file and the few-shot file are separate datasets, each pinned by sha256 and
record count in the manifest; every record of the scored file is scored (no ``limit``), so
the count equals the manifest's ``samples`` and the baseline's ``gsm8k.n``; the first
``num_fewshot`` records of the train file are the examples (lm-eval's ``first_n``), and
none of them may also be a scored question. A file that fails any of this is a finding
(exit 1) in the cell's receipt, recorded with the hash actually found; no server starts.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

from pydantic import BaseModel

from releasekit.bounded_read import DATASET_MAX_BYTES, read_bounded
from releasekit.errors import InputError
from releasekit.findings import Findings
from releasekit.manifest.validation import Gsm8kCheck
from releasekit.records.receipt import Metric
from releasekit.validate import scoring
from releasekit.validate.checks.interface import CellCheck, CheckContext, metric
from releasekit.validate.gates import BaselineValues, accuracy_against_baseline, resolve_baseline
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
        raw = read_bounded(path, DATASET_MAX_BYTES)  # a FIFO or sparse file named by the manifest
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


class Prepared(BaseModel):
    """What the protocol scores: every question of the pinned set, examples from the pinned train file."""

    scored: list[Problem]
    examples: list[Problem]
    sha256: str
    fewshot_sha256: str | None = None


def _baseline(ctx: CheckContext, cfg: Gsm8kCheck) -> BaselineValues | None:
    """The baseline the accuracy is held to: the named one, else the first that gives the metric."""
    if cfg.baseline_metric is None:
        return None
    names = [cfg.baseline] if cfg.baseline is not None else list(ctx.spec.baselines)
    for name in names:
        base = ctx.spec.baselines.get(name)
        if base is None:
            continue
        values = resolve_baseline(name, base, ctx.manifest_dir)
        if cfg.baseline is not None or cfg.baseline_metric in values.values:
            return values
    return None


def _pinned(ctx: CheckContext, name: str, findings: Findings) -> tuple[list[Problem], str] | None:
    """The records of dataset ``name`` if the file matches its pin (sha256 and record count); else a finding."""
    dataset = ctx.spec.datasets.get(name)
    if dataset is None:
        raise InputError(f"cell {ctx.cell.id}: gsm8k dataset '{name}' is not in validation.datasets")
    problems, digest = read_problems(ctx.manifest_dir / dataset.path)
    if dataset.sha256 is None or dataset.samples is None:
        findings.add(
            "DATASET_NOT_PINNED",
            f"dataset '{name}' ({dataset.path}) needs sha256 and samples in the manifest; "
            f"the file has sha256 {digest} and {len(problems)} records",
        )
        return None
    if dataset.sha256 != digest:
        findings.add(
            "DATASET_CHANGED",
            f"dataset '{name}' ({dataset.path}) has sha256 {digest}, the manifest pins {dataset.sha256}",
        )
        return None
    if len(problems) != dataset.samples:
        findings.add(
            "DATASET_SIZE_MISMATCH",
            f"dataset '{name}' has {len(problems)} records, the manifest says {dataset.samples}",
        )
        return None
    return problems, digest


def prepare(ctx: CheckContext, cfg: Gsm8kCheck, findings: Findings) -> Prepared | None:
    """The protocol's inputs, or None with findings: run before the server starts and again before scoring."""
    scored = _pinned(ctx, cfg.dataset, findings)
    examples: list[Problem] = []
    fewshot_sha: str | None = None
    if cfg.num_fewshot > 0:
        assert cfg.fewshot is not None  # the manifest model requires it
        train = _pinned(ctx, cfg.fewshot, findings)
        if train is not None:
            examples, fewshot_sha = train[0][: cfg.num_fewshot], train[1]
            if len(examples) < cfg.num_fewshot:
                findings.add(
                    "DATASET_SIZE_MISMATCH",
                    f"few-shot dataset '{cfg.fewshot}' has {len(examples)} records, "
                    f"{cfg.num_fewshot} are asked for",
                )
    if scored is None or findings.codes():
        return None
    problems, digest = scored
    overlap = {p.question for p in examples} & {p.question for p in problems}
    if overlap:
        findings.add(
            "FEWSHOT_OVERLAP",
            f"{len(overlap)} few-shot example(s) of '{cfg.fewshot}' are also scored questions "
            f"of '{cfg.dataset}', e.g. {sorted(overlap)[0][:80]!r}",
        )
        return None
    base = _baseline(ctx, cfg)
    if base is not None and base.problem is None and cfg.baseline_metric in base.values:
        n = base.values.get("gsm8k.n")
        if n is None:
            findings.add(
                "BASELINE_UNAVAILABLE",
                f"baseline '{base.name}' gives {cfg.baseline_metric} but not gsm8k.n: "
                "an accuracy measured on an unknown number of questions cannot be compared",
            )
            return None
        if int(n) != len(problems):
            findings.add(
                "DATASET_SIZE_MISMATCH",
                f"{len(problems)} questions would be scored, baseline '{base.name}' "
                f"measured {cfg.baseline_metric} on {int(n)}",
            )
            return None
    return Prepared(scored=problems, examples=examples, sha256=digest, fewshot_sha256=fewshot_sha)


class Gsm8k(CellCheck):
    kind = "gsm8k"
    codes = (
        "DATASET_NOT_PINNED",
        "DATASET_CHANGED",
        "DATASET_SIZE_MISMATCH",
        "FEWSHOT_OVERLAP",
        "REQUEST_FAILED",
        "ACCURACY_BELOW_MIN",
        "BASELINE_UNAVAILABLE",
        "ACCURACY_BELOW_BASELINE",
    )
    config: Gsm8kCheck

    def preflight(self, ctx: CheckContext) -> Findings:
        findings = Findings()
        prepare(ctx, self.config, findings)
        return findings

    def _judge(self, ctx: CheckContext, s: Score, findings: Findings) -> None:
        """The accuracy against the cell's minimum and, by its Wilson lower bound, against the baseline."""
        cfg = self.config
        if cfg.min_accuracy is not None and s.accuracy < cfg.min_accuracy:
            findings.add(
                "ACCURACY_BELOW_MIN",
                f"gsm8k {cfg.filter} accuracy {s.accuracy:.4f} ({s.correct}/{s.n}) is below {cfg.min_accuracy}",
            )
        if cfg.baseline_metric is None:
            return
        base = _baseline(ctx, cfg)
        expected = base.values.get(cfg.baseline_metric) if base is not None else None
        if expected is None:
            why = (
                base.problem
                if base is not None and base.problem
                else f"no baseline gives {cfg.baseline_metric}"
            )
            findings.add("BASELINE_UNAVAILABLE", why)
        elif not accuracy_against_baseline(s.wilson_low, expected, cfg.rtol):
            findings.add(
                "ACCURACY_BELOW_BASELINE",
                f"gsm8k accuracy {s.accuracy:.4f} ({s.correct}/{s.n}): its one-sided {cfg.confidence:.0%} Wilson "
                f"lower bound {s.wilson_low:.4f} is below {expected} x (1 - {cfg.rtol}) = {expected * (1 - cfg.rtol):.4f}",
            )

    def measure(self, ctx: CheckContext, findings: Findings) -> tuple[list[Metric], dict[str, object]]:
        cfg = self.config
        ready = prepare(ctx, cfg, findings)
        if ready is None:
            return [], {"dataset": cfg.dataset}
        scored = ready.scored
        prefix = fewshot_prefix(ready.examples)
        assert ctx.client is not None
        prompts = [prompt_for(prefix, problem) for problem in scored]
        results, _ = asyncio.run(
            ctx.client.run_concurrent(prompts, cfg.max_tokens, cfg.concurrency, stop=STOP)
        )
        failed = [r.error for r in results if not r.ok]
        if failed:
            findings.add("REQUEST_FAILED", f"gsm8k request failed: {failed[0]}")
        errors = len(failed)
        outputs = [r.text for r in results]
        s = score_outputs(outputs, scored, cfg.filter, cfg.confidence)
        self._judge(ctx, s, findings)
        metrics = [
            metric(self.kind, "accuracy", s.accuracy, "fraction", low=s.wilson_low, high=s.wilson_high),
            metric(self.kind, "correct", s.correct, "questions"),
            metric(self.kind, "n", s.n, "questions"),
            metric(self.kind, "invalid", s.invalid, "questions"),
        ]
        examples_out = [
            {
                "question": p.question[:200],
                "output": o[:300],
                "extracted": scoring.score(o, p.answer, cfg.filter)[0],
            }
            for p, o in list(zip(scored, outputs, strict=True))[:3]
        ]
        ctx.notes["gsm8k"] = s
        return metrics, {
            "dataset": cfg.dataset,
            "dataset_sha256": ready.sha256,
            "fewshot": cfg.fewshot,
            "fewshot_sha256": ready.fewshot_sha256,
            "filter": cfg.filter,
            "num_fewshot": cfg.num_fewshot,
            "concurrency": cfg.concurrency,
            "request_errors": errors,
            "examples": examples_out,
        }
