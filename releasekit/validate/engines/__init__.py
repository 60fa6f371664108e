"""Serving engines: one interface, one module per engine (vLLM first)."""

from __future__ import annotations

from releasekit.errors import InputError
from releasekit.validate.engines.interface import Engine, ServeCommand
from releasekit.validate.engines.vllm import VllmEngine

_ENGINES: dict[str, type[Engine]] = {"vllm": VllmEngine}


def engine_for(name: str) -> Engine:
    try:
        return _ENGINES[name]()
    except KeyError:
        raise InputError(
            f"engine '{name}' has no adapter yet (known: {', '.join(sorted(_ENGINES))})"
        ) from None


__all__ = ["Engine", "ServeCommand", "VllmEngine", "engine_for"]
