"""The Docker adapter of verify-provenance: inspect an image, run the probe, stream its filesystem.

Everything goes through ``releasekit.docker_engine``. Two rules make a hostile image harmless here:
the probe container has no network, a read-only root, no capabilities, bounded memory,
processes, time and output; and the filesystem is read as a tar *stream* from
``docker export`` of a never-started container, so nothing from the image is ever
written to the host's disk under a name the image chose.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from releasekit.docker_engine import (
    Container,
    ContainerSpec,
    Engine,
    EngineError,
    ImageFacts,
    NoSuchImage,
)
from releasekit.errors import InputError
from releasekit.provenance.tarstream import ExportAborted

__all__ = ["PROBE_OUTPUT_CAP", "ImageAdapter", "ImageFacts", "ProbeRun"]

PROBE_OUTPUT_CAP = 64 * 1024 * 1024
_LABEL = "io.releasekit.verify-provenance"


class ProbeRun(BaseModel):
    ok: bool
    report: dict[str, Any] | None = None
    error: str | None = None
    exit_code: int | None = None
    seconds: float = 0.0


class ImageAdapter:
    """One image under verification."""

    def __init__(self, engine: Engine, reference: str) -> None:
        self.engine = engine
        try:
            self.facts: ImageFacts = engine.inspect(reference)
        except NoSuchImage:
            raise InputError(f"no image {reference!r} in the Docker Engine") from None
        except EngineError as exc:
            raise InputError(f"cannot inspect image {reference!r}: {exc.explanation}") from None

    # --- the probe -----------------------------------------------------------------------

    def run_probe(self, import_names: list[str], *, timeout: float = 60.0) -> ProbeRun:
        source = (Path(__file__).parent / "probe.py").read_text(encoding="utf-8")
        argument = json.dumps({"import_names": sorted(set(import_names))})
        started = time.monotonic()
        try:
            container = self.engine.create(
                ContainerSpec(
                    self.facts.id,
                    # The image's python3 from its own PATH; the entrypoint is replaced so that
                    # a hostile entrypoint cannot run instead of the probe.
                    entrypoint=["python3", "-c", source, argument],
                    command=[],
                    network=False,
                    read_only_root=True,
                    tmpfs={"/tmp": "rw,noexec,nosuid,size=16m"},
                    cap_drop=["ALL"],
                    security_opt=["no-new-privileges"],
                    mem_limit="1g",
                    pids_limit=128,
                    log_max_size="64m",
                    labels={_LABEL: "probe"},
                )
            )
        except EngineError as exc:
            return ProbeRun(ok=False, error=f"cannot create the probe container: {exc}")
        try:
            container.start()
            try:
                code = container.wait(timeout=timeout)
            except EngineError:  # ContainerTimeout, or the engine connection broke: it hung
                return ProbeRun(
                    ok=False,
                    error=f"the probe did not finish within {timeout:.0f} s",
                    seconds=time.monotonic() - started,
                )
            return _probe_result(container, code, started)
        finally:
            container.remove()

    # --- the filesystem ------------------------------------------------------------------

    def export_stream(self, *, deadline: float) -> Iterator[bytes]:
        """The image's flattened filesystem as tar bytes, from a created (never started) container."""
        try:
            yield from self.engine.export_stream(self.facts.id, deadline=deadline, labels={_LABEL: "export"})
        except EngineError as exc:
            raise ExportAborted(str(exc)) from None


def _probe_result(container: Container, code: int, started: float) -> ProbeRun:
    """The probe's report from its stdout (bounded), or why there is none."""
    out = bytearray()
    for chunk in container.stream_logs(stdout=True, stderr=False):
        out.extend(chunk)
        if len(out) > PROBE_OUTPUT_CAP:
            return ProbeRun(ok=False, error="the probe's output exceeds 64 MB", exit_code=code)
    seconds = time.monotonic() - started
    if code != 0:
        err = container.logs(stdout=False, stderr=True, tail=5).decode(errors="replace").strip()
        return ProbeRun(
            ok=False,
            exit_code=code,
            seconds=seconds,
            error=f"the probe exited {code}: {' '.join(err.split())[-300:]}",
        )
    try:
        report = json.loads(bytes(out).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return ProbeRun(
            ok=False, exit_code=code, seconds=seconds, error=f"the probe's output is not JSON: {exc}"
        )
    if not isinstance(report, dict) or report.get("probe") != "releasekit.probe/v1":
        return ProbeRun(
            ok=False, exit_code=code, seconds=seconds, error="the probe's output is not a probe report"
        )
    return ProbeRun(ok=True, report=report, exit_code=code, seconds=seconds)
