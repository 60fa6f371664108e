"""The Docker adapter of verify-provenance: inspect an image, run the probe, stream its filesystem.

Everything goes through the ``docker`` SDK. Two rules make a hostile image harmless here:
the probe container has no network, a read-only root, no capabilities, bounded memory,
processes, time and output; and the filesystem is read as a tar *stream* from
``docker export`` of a never-started container, so nothing from the image is ever
written to the host's disk under a name the image chose.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from releasekit.errors import EnvironmentProblem, InputError
from releasekit.provenance.inventory import ExportAborted

PROBE_OUTPUT_CAP = 64 * 1024 * 1024
_LABEL = "io.releasekit.verify-provenance"


class ImageFacts(BaseModel):
    """What ``docker inspect`` says about the image (trusted: it comes from the engine, not the image)."""

    id: str
    tags: list[str] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    entrypoint: list[str] = Field(default_factory=list)
    cmd: list[str] = Field(default_factory=list)
    working_dir: str = ""
    user: str = ""


class ProbeRun(BaseModel):
    ok: bool
    report: dict[str, Any] | None = None
    error: str | None = None
    exit_code: int | None = None
    seconds: float = 0.0


def docker_client() -> Any:
    import docker

    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure here means: no usable engine
        raise EnvironmentProblem(f"cannot reach the Docker Engine: {exc}") from None
    return client


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


class ImageAdapter:
    """One image under verification."""

    def __init__(self, client: Any, reference: str) -> None:
        import docker.errors

        self.client = client
        try:
            self.image = client.images.get(reference)
        except docker.errors.ImageNotFound:
            raise InputError(f"no image {reference!r} in the Docker Engine") from None
        except docker.errors.APIError as exc:
            raise InputError(f"cannot inspect image {reference!r}: {exc.explanation or exc}") from None
        config = self.image.attrs.get("Config") or {}
        env: dict[str, str] = {}
        for item in config.get("Env") or []:
            key, _, value = item.partition("=")
            env[key] = value
        self.facts = ImageFacts(
            id=self.image.id,
            tags=list(self.image.tags),
            labels=dict(config.get("Labels") or {}),
            env=env,
            entrypoint=_as_list(config.get("Entrypoint")),
            cmd=_as_list(config.get("Cmd")),
            working_dir=config.get("WorkingDir") or "",
            user=config.get("User") or "",
        )

    # --- the probe -----------------------------------------------------------------------

    def run_probe(self, import_names: list[str], *, timeout: float = 60.0) -> ProbeRun:
        source = (Path(__file__).parent / "probe.py").read_text(encoding="utf-8")
        argument = json.dumps({"import_names": sorted(set(import_names))})
        started = time.monotonic()
        try:
            container = self.client.containers.create(
                self.facts.id,
                # The image's python3 from its own PATH; the entrypoint is replaced so that
                # a hostile entrypoint cannot run instead of the probe.
                entrypoint=["python3", "-c", source, argument],
                command=[],
                network_mode="none",
                read_only=True,
                tmpfs={"/tmp": "rw,noexec,nosuid,size=16m"},
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                mem_limit="1g",
                pids_limit=128,
                # The engine's log file is on the host: bound it so a chatty probe cannot fill the disk.
                log_config={"type": "json-file", "config": {"max-size": "64m", "max-file": "1"}},
                labels={_LABEL: "probe"},
                detach=True,
            )
        except Exception as exc:  # noqa: BLE001
            return ProbeRun(ok=False, error=f"cannot create the probe container: {exc}")
        try:
            container.start()
            try:
                result = container.wait(timeout=timeout)
            except Exception:  # noqa: BLE001 - requests' ReadTimeout / ConnectionError: it hung
                return ProbeRun(ok=False, error=f"the probe did not finish within {timeout:.0f} s",
                                seconds=time.monotonic() - started)
            code = int(result.get("StatusCode", -1))
            out = bytearray()
            for chunk in container.logs(stdout=True, stderr=False, stream=True):
                out.extend(chunk)
                if len(out) > PROBE_OUTPUT_CAP:
                    return ProbeRun(ok=False, error="the probe's output exceeds 64 MB", exit_code=code)
            seconds = time.monotonic() - started
            if code != 0:
                err = container.logs(stdout=False, stderr=True, tail=5).decode(errors="replace").strip()
                return ProbeRun(ok=False, exit_code=code, seconds=seconds,
                                error=f"the probe exited {code}: {' '.join(err.split())[-300:]}")
            try:
                report = json.loads(bytes(out).decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                return ProbeRun(ok=False, exit_code=code, seconds=seconds, error=f"the probe's output is not JSON: {exc}")
            if not isinstance(report, dict) or report.get("probe") != "releasekit.probe/v1":
                return ProbeRun(ok=False, exit_code=code, seconds=seconds, error="the probe's output is not a probe report")
            return ProbeRun(ok=True, report=report, exit_code=code, seconds=seconds)
        finally:
            _remove(container)

    # --- the filesystem ------------------------------------------------------------------

    def export_stream(self, *, deadline: float) -> Iterator[bytes]:
        """The image's flattened filesystem as tar bytes, from a created (never started) container."""
        try:
            container = self.client.containers.create(
                self.facts.id, entrypoint=["/nonexistent"], command=[], network_mode="none",
                labels={_LABEL: "export"}, detach=True,
            )
        except Exception as exc:  # noqa: BLE001 - any engine refusal means: nothing to read
            raise ExportAborted(f"cannot create a container to export: {exc}") from None
        # A watchdog: if the engine stalls mid-stream, removing the container ends the stream.
        expired = threading.Event()

        def _watch() -> None:
            if not expired.wait(max(0.0, deadline - time.monotonic())):
                _remove(container)

        watchdog = threading.Thread(target=_watch, daemon=True)
        watchdog.start()
        try:
            yield from container.export(chunk_size=1024 * 1024)
        except ExportAborted:
            raise
        except Exception as exc:  # noqa: BLE001 - the engine or the watchdog broke the stream
            raise ExportAborted(f"the export stream broke: {type(exc).__name__}: {exc}") from None
        finally:
            expired.set()
            _remove(container)


def _remove(container: Any) -> None:
    with contextlib.suppress(Exception):  # already gone
        container.remove(force=True)
