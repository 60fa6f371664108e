"""The serving-engine adapters releasekit has, by name: the one list of engines.

The manifest accepts exactly these names (a cell's ``engine``, a quantisation scheme's
``engine``), and validate loads each adapter from here (``validate/engines``:
``engine_for``, ``adapter_for``), so the two cannot disagree: a manifest naming an engine
with no adapter is refused when it is loaded, not when validate runs.

A shared module, so the manifest (the first stage) reads it without importing validate (a
later one): each entry says where its adapter class is, as ``module:Class``, and that
module is imported only when validate asks for the adapter. Adding an engine is one module
in ``validate/engines/`` and one entry here.
"""

from __future__ import annotations

ENGINE_ADAPTERS: dict[str, str] = {
    "vllm": "releasekit.validate.engines.vllm:VllmEngine",
    "tokenspeed": "releasekit.validate.engines.tokenspeed:TokenSpeedEngine",
}


def engine_names() -> tuple[str, ...]:
    """The engines a manifest may name, in the registry's order."""
    return tuple(ENGINE_ADAPTERS)
