"""A planted slowdown of known size inside a vLLM server, for ``bench_gate_catch.py --slow-by step``.

Mounted into the server's container with ``PYTHONPATH`` pointing at it, so every Python process of the
server imports it at start-up. When ``vllm.v1.worker.gpu_worker`` is imported (the worker process: the
CPU worker is a subclass), ``Worker.execute_model`` and ``Worker.sample_tokens`` are wrapped: after each
call the worker waits ``elapsed * f / (1 - f)``, where ``elapsed`` is that call's own time and ``f`` is
the number in the control file (``RK_PLANT_CONTROL``; missing, empty, unreadable or outside (0, 0.5):
no delay). Each model step then takes ``1 / (1 - f)`` times as long, however fast the host happens to
be at that moment. The control file is ``F`` (sleep) or ``F spin`` (spin on the CPU). A sleep hands
the CPU to the server's other processes: on a 2-core host they then ran faster, and vLLM's own decode
timing saw no slowdown at all (2026-12-06, B/A 1.006 over 68 blocks). A spin keeps the worker busy as
a slower model step would. The worker is where the delay goes because the engine core overlaps its own work
with the worker's (a delay planted in ``EngineCore.step`` slowed nothing: 2026-12-06, B/A 1.007). The
control file is re-read every call, so the benchmark switches the slowdown on and off between runs
without restarting the server.

Benchmark code only: nothing of releasekit imports it, and no image is built with it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import time

CONTROL = os.environ.get("RK_PLANT_CONTROL", "/rk-plant/fraction")
TARGET = "vllm.v1.worker.gpu_worker"
CLASS = "Worker"
METHODS = ("execute_model", "sample_tokens")


def _control() -> tuple[float, str]:
    """The fraction and how to wait it out ("sleep" or "spin"); (0, "sleep") when there is nothing to do."""
    try:
        with open(CONTROL, encoding="ascii") as f:
            words = f.read(32).split()
        value = float(words[0]) if words else 0.0
    except (OSError, ValueError):
        return 0.0, "sleep"
    wait = words[1] if len(words) > 1 and words[1] in ("sleep", "spin") else "sleep"
    return (value, wait) if 0 < value < 0.5 else (0.0, "sleep")


def spin(seconds: float) -> None:
    """Busy until ``seconds`` have passed: the CPU stays with this worker."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _planted(call):  # type: ignore[no-untyped-def]
    def call_then_wait(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        began = time.perf_counter()
        out = call(self, *args, **kwargs)
        fraction, wait = _control()
        if fraction:
            delay = (time.perf_counter() - began) * fraction / (1 - fraction)
            (spin if wait == "spin" else time.sleep)(delay)
        return out

    return call_then_wait


class _PlantOnImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):  # type: ignore[no-untyped-def]
        if name != TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        run = loader.exec_module

        def exec_module(module) -> None:  # type: ignore[no-untyped-def]
            run(module)
            cls = getattr(module, CLASS)
            for method in METHODS:
                if hasattr(cls, method):
                    setattr(cls, method, _planted(getattr(cls, method)))
            cls.rk_planted = True

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


sys.meta_path.insert(0, _PlantOnImport())
