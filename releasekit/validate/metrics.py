"""Prometheus text parsing, an engine's speculative-decoding counters and its decode timing on /metrics.

The names come from the engine adapter (``Engine.spec_decode_metrics``, ``Engine.decode_timing``).

Acceptance is measured as the *difference* of counters before and after our own
requests, so whatever the server did before (warm-up, other checks) does not count.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from releasekit.validate.engines.interface import DecodeTimingMetricNames, SpecDecodeMetricNames

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


class Sample(BaseModel):
    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    value: float


def parse_prometheus(text: str) -> list[Sample]:
    samples: list[Sample] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        try:
            value = float(m.group("value"))
        except ValueError:
            continue
        labels = dict(_LABEL.findall(m.group("labels") or ""))
        samples.append(Sample(name=m.group("name"), labels=labels, value=value))
    return samples


def _counter(samples: list[Sample], base: str) -> float:
    # Counters appear as NAME_total in the text format (prometheus_client appends it);
    # sum over every label set (e.g. one per engine or model).
    return sum(s.value for s in samples if s.name in (base, base + "_total"))


def _per_position(samples: list[Sample], names: SpecDecodeMetricNames) -> dict[int, float]:
    out: dict[int, float] = {}
    base, label = names.accepted_per_position, names.position_label
    for s in samples:
        if s.name in (base, base + "_total") and label in s.labels:
            pos = int(s.labels[label])
            out[pos] = out.get(pos, 0.0) + s.value
    return out


class SpecCounters(BaseModel):
    drafts: float = 0
    draft_tokens: float = 0
    accepted_tokens: float = 0
    accepted_per_position: dict[int, float] = Field(default_factory=dict)
    present: bool = False

    @classmethod
    def from_text(cls, text: str, names: SpecDecodeMetricNames) -> SpecCounters:
        """The counters in ``text``, found by the engine adapter's metric ``names``."""
        samples = parse_prometheus(text)
        present = any(s.name.startswith(names.prefix) for s in samples)
        return cls(
            drafts=_counter(samples, names.drafts),
            draft_tokens=_counter(samples, names.draft_tokens),
            accepted_tokens=_counter(samples, names.accepted_tokens),
            accepted_per_position=_per_position(samples, names),
            present=present,
        )

    def minus(self, before: SpecCounters) -> SpecCounters:
        positions = set(self.accepted_per_position) | set(before.accepted_per_position)
        return SpecCounters(
            drafts=self.drafts - before.drafts,
            draft_tokens=self.draft_tokens - before.draft_tokens,
            accepted_tokens=self.accepted_tokens - before.accepted_tokens,
            accepted_per_position={
                p: self.accepted_per_position.get(p, 0.0) - before.accepted_per_position.get(p, 0.0)
                for p in sorted(positions)
            },
            present=self.present,
        )


class Acceptance(BaseModel):
    """Derived from a counter delta. ``mean_length`` counts the bonus token: 1 + accepted/drafts."""

    drafts: float
    draft_tokens: float
    accepted_tokens: float
    rate: float | None = Field(description="accepted / proposed draft tokens")
    mean_length: float | None = Field(description="tokens emitted per target step: 1 + accepted / drafts")
    per_position: list[float] = Field(default_factory=list, description="acceptance rate at draft position i")


def acceptance(delta: SpecCounters) -> Acceptance:
    rate = delta.accepted_tokens / delta.draft_tokens if delta.draft_tokens > 0 else None
    mean_length = 1 + delta.accepted_tokens / delta.drafts if delta.drafts > 0 else None
    per_pos = (
        [delta.accepted_per_position.get(p, 0.0) / delta.drafts for p in sorted(delta.accepted_per_position)]
        if delta.drafts > 0
        else []
    )
    return Acceptance(
        drafts=delta.drafts,
        draft_tokens=delta.draft_tokens,
        accepted_tokens=delta.accepted_tokens,
        rate=rate,
        mean_length=mean_length,
        per_position=per_pos,
    )


class DecodeTiming(BaseModel):
    """The engine's decode-phase histograms: finished requests, their decode seconds and output tokens."""

    requests: float = 0
    decode_s: float = 0
    tokens: float = 0  # output tokens of those requests, each one's first (from prefill) included
    token_requests: float = 0  # the output-token histogram's own count (must match ``requests``)
    present: bool = False

    @classmethod
    def from_text(cls, text: str, names: DecodeTimingMetricNames) -> DecodeTiming:
        samples = parse_prometheus(text)
        return cls(
            requests=_counter(samples, names.decode_time + "_count"),
            decode_s=_counter(samples, names.decode_time + "_sum"),
            tokens=_counter(samples, names.generation_tokens + "_sum"),
            token_requests=_counter(samples, names.generation_tokens + "_count"),
            present=any(s.name == names.decode_time + "_count" for s in samples),
        )

    def minus(self, before: DecodeTiming) -> DecodeTiming:
        return DecodeTiming(
            requests=self.requests - before.requests,
            decode_s=self.decode_s - before.decode_s,
            tokens=self.tokens - before.tokens,
            token_requests=self.token_requests - before.token_requests,
            present=self.present and before.present,
        )

    @property
    def decode_tokens(self) -> float:
        """Each request's output tokens but its first (which prefill made)."""
        return self.tokens - self.requests

    def decode_rate(self) -> float | None:
        """Decode tokens per decode second; None when this delta holds no decode (or its two histograms
        disagree about how many requests finished)."""
        decoded = self.decode_tokens
        if not self.present or self.requests <= 0 or self.token_requests != self.requests:
            return None
        return decoded / self.decode_s if decoded > 0 and self.decode_s > 0 else None
