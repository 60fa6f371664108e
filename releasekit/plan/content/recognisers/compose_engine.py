"""``compose-engine``: a Compose file with a service that runs the serving engine (its command
starts it, its image is the engine's, or its environment sets ``VLLM_*``). A Compose file of
other services (an example's Prometheus and Grafana) is not a deployment of the engine."""

from __future__ import annotations

import re
from collections.abc import Iterator

from releasekit.manifest.content_rules import ContentRule
from releasekit.plan.content.interface import Hit, Kind, ScannedFile
from releasekit.plan.content.reading import engine_start

_SERVICES = re.compile(r"^services\s*:")
_IMAGE = re.compile(r"^\s*image\s*:\s*[\"']?(?P<image>\S*vllm\S*)", re.IGNORECASE)
_ENV = re.compile(r"^\s*-?\s*[\"']?(?P<name>VLLM_[A-Z0-9_]+)\s*[:=]")


class ComposeEngine:
    rule: ContentRule = "compose-engine"
    kinds: frozenset[Kind] = frozenset({"compose"})

    def find(self, source: ScannedFile) -> Iterator[Hit]:
        if not any(_SERVICES.match(line) for line in source.lines):
            return
        for lineno, line in enumerate(source.lines, start=1):
            image = _IMAGE.match(line)
            env = _ENV.match(line)
            starts = engine_start(re.findall(r"[^\s\"'\[\],]+", line)) is not None
            if image or env or starts:
                what = (
                    f"image {image.group('image')}"
                    if image
                    else f"sets {env.group('name')}"
                    if env
                    else "starts the engine"
                )
                yield Hit(source.path, lineno, self.rule, f"a Compose service of the engine: {what}")
                return


RECOGNISER = ComposeEngine()
