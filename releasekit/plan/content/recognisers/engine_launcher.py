"""``engine-launcher``: a launcher that starts the serving engine as its own process with tuning.

A launcher ``exec``s the engine (``exec vllm serve ...``, ``exec python -m vllm.entrypoints...``)
or is an image's ``ENTRYPOINT``/``CMD`` that runs it. It is tuned when that command carries a
memory, graph, NUMA or parallelism setting, or the file sets ``VLLM_*`` switches. A test or a
benchmark starts the engine in the background and stops it again: it never ``exec``s it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from releasekit.manifest.content_rules import ContentRule
from releasekit.plan.content.interface import Hit, Kind, ScannedFile
from releasekit.plan.content.reading import engine_start

# Engine options that set memory envelopes, graph capture, NUMA placement or parallelism.
_TUNING = re.compile(
    r"^(?:--gpu-memory-utilization|--kv-cache-memory(?:-bytes)?|--swap-space|--cpu-offload-gb"
    r"|--max-model-len|--max-num-seqs|--max-num-batched-tokens|--block-size"
    r"|--max-cudagraph-capture-size|--cuda-graph-sizes|--compilation-config|-O\d?|-cc\..*|--enforce-eager"
    r"|--tensor-parallel-size|-tp|--pipeline-parallel-size|-pp|--data-parallel-size|-dp"
    r"|--decode-context-parallel-size|-dcp|--enable-expert-parallel|--numa[-\w]*)(?:=.*)?$"
)
_VLLM_SETTING = re.compile(r"^\s*(?:export\s+)?(VLLM_[A-Z0-9_]+)=", re.MULTILINE)


class EngineLauncher:
    rule: ContentRule = "engine-launcher"
    kinds: frozenset[Kind] = frozenset({"dockerfile", "shell"})

    def find(self, source: ScannedFile) -> Iterator[Hit]:
        # An image's ENV VLLM_* are mostly build and identity variables; a script's exports are the launch's switches.
        switches = sorted(set(_VLLM_SETTING.findall(source.text))) if source.kind == "shell" else []
        for command in source.commands:
            words = [w.strip("[],") for _, w in command.words]
            if not words:
                continue
            head = words[0].upper() if source.kind == "dockerfile" else words[0]
            if head not in ("exec", "ENTRYPOINT", "CMD"):
                continue
            start = engine_start(words)
            if start is None:
                continue
            tuning = [w.split("=", 1)[0] for w in words[start:] if _TUNING.match(w)]
            if not tuning and not switches:
                continue
            said = ", ".join(list(dict.fromkeys(tuning))[:4]) if tuning else ", ".join(switches[:3])
            engine = " ".join(words[start : start + (3 if words[start + 1] == "-m" else 2)])
            yield Hit(source.path, command.line, self.rule, f"starts the engine ({engine}) with {said}")


RECOGNISER = EngineLauncher()
