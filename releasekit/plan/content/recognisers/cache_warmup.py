"""``cache-warmup``: a script that drives the engine's API (``/v1/chat/completions``,
``/v1/completions``) and watches or fills its runtime caches (``.cache/vllm``, TorchInductor,
Triton, CuTe DSL, a JIT cache): a deployment step that prepares a server before traffic."""

from __future__ import annotations

import re
from collections.abc import Iterator

from releasekit.manifest.content_rules import ContentRule
from releasekit.plan.content.interface import Hit, Kind, ScannedFile

_API = re.compile(r"/v1/(?:chat/)?completions\b")
_CACHE = re.compile(
    r"\.cache/(?:vllm|triton|torchinductor|cutlass_dsl)\b|\btorchinductor\b|/cache/jit\b|VLLM_CACHE_ROOT"
)


class CacheWarmup:
    rule: ContentRule = "cache-warmup"
    kinds: frozenset[Kind] = frozenset({"shell"})

    def find(self, source: ScannedFile) -> Iterator[Hit]:
        if not _API.search(source.text):
            return
        for lineno, line in enumerate(source.lines, start=1):
            m = _CACHE.search(line)
            if m:
                yield Hit(
                    source.path,
                    lineno,
                    self.rule,
                    f"fills the engine's runtime cache {m.group(0)} through its API",
                )
                return


RECOGNISER = CacheWarmup()
