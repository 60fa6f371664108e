"""Serving engines: one interface, one module per engine (vLLM first)."""

from __future__ import annotations

from releasekit.errors import InputError
from releasekit.validate.engines.interface import Engine, LogPatterns, ServeCommand, SpecDecodeMetricNames
from releasekit.validate.engines.tokenspeed import TokenSpeedEngine
from releasekit.validate.engines.vllm import VllmEngine

_ENGINES: dict[str, type[Engine]] = {"vllm": VllmEngine, "tokenspeed": TokenSpeedEngine}


def engine_for(name: str) -> Engine:
    try:
        return _ENGINES[name]()
    except KeyError:
        raise InputError(
            f"engine '{name}' has no adapter yet (known: {', '.join(sorted(_ENGINES))})"
        ) from None


def adapter_for(name: str) -> Engine | None:
    """The adapter for ``name``, or None when releasekit has none (for readers that judge, not run)."""
    cls = _ENGINES.get(name)
    return cls() if cls is not None else None


__all__ = [
    "Engine",
    "LogPatterns",
    "ServeCommand",
    "SpecDecodeMetricNames",
    "TokenSpeedEngine",
    "VllmEngine",
    "adapter_for",
    "engine_for",
]
