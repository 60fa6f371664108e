"""Serving engines: one interface, one module per engine (vLLM first).

Which adapters exist, and where each is, is ``releasekit/engine_adapters.py``: the manifest
accepts exactly the names listed there, and these lookups load from the same list.
"""

from __future__ import annotations

import importlib

from releasekit.engine_adapters import ENGINE_ADAPTERS
from releasekit.errors import InputError
from releasekit.validate.engines.interface import Engine, LogPatterns, ServeCommand, SpecDecodeMetricNames
from releasekit.validate.engines.tokenspeed import TokenSpeedEngine
from releasekit.validate.engines.vllm import VllmEngine


def adapter_class(name: str) -> type[Engine] | None:
    """The adapter class the engine registry lists for ``name``, or None when it lists none."""
    target = ENGINE_ADAPTERS.get(name)
    if target is None:
        return None
    module, _, attribute = target.partition(":")
    cls = getattr(importlib.import_module(module), attribute)
    if not (isinstance(cls, type) and issubclass(cls, Engine)) or cls.name != name:
        raise TypeError(f"engine registry: {target} is no Engine adapter named '{name}'")
    return cls


def engine_for(name: str) -> Engine:
    cls = adapter_class(name)
    if cls is None:
        raise InputError(f"engine '{name}' has no adapter yet (known: {', '.join(sorted(ENGINE_ADAPTERS))})")
    return cls()


def adapter_for(name: str) -> Engine | None:
    """The adapter for ``name``, or None when releasekit has none (for readers that judge, not run)."""
    cls = adapter_class(name)
    return cls() if cls is not None else None


__all__ = [
    "Engine",
    "LogPatterns",
    "ServeCommand",
    "SpecDecodeMetricNames",
    "TokenSpeedEngine",
    "VllmEngine",
    "adapter_class",
    "adapter_for",
    "engine_for",
]
