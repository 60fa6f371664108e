"""Containers: create/start/wait/logs/kill/remove, runs with a timeout, sandboxed runs, export streams.

A ``Container`` wraps one SDK container and turns the SDK's exceptions into ``EngineError``
(``ContainerTimeout`` for a wait that ran out), so no caller handles a ``docker`` exception.
"""

from __future__ import annotations

import contextlib
import os
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from releasekit.docker_engine.errors import ContainerTimeout, EngineError, NoSuchImage, explain

if TYPE_CHECKING:
    import docker


OWNER_LABEL = "io.releasekit.pid"  # on sandboxed containers: the releasekit process that made it


@dataclass(frozen=True)
class ContainerSpec:
    """Everything ``Engine.create`` makes a container from; the caller builds it, the adapter maps it.

    ``network=False``: no network at all. ``publish_port``: that container port on a random
    127.0.0.1 port (see ``Container.host_port``). ``read_only_mounts``: host path -> container
    path. ``gpus``: NVIDIA device IDs handed in through a device request (``gpu_count``: any
    that many). ``network_mode``: e.g. ``host`` (the processes of one topology reach each other
    on 127.0.0.1; nothing is published). ``writable_volumes``: named volume -> container path,
    read-write (made on first use; ``remove_volume`` removes it). ``log_max_size`` bounds the
    engine's log file on the host.
    """

    image: str
    entrypoint: list[str] | None = None
    command: list[str] | None = None
    environment: dict[str, str] | None = None
    user: str | None = None
    network: bool = True
    publish_port: int | None = None
    read_only_mounts: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    gpus: list[int] = field(default_factory=list)
    gpu_count: int = 0
    devices: list[str] = field(default_factory=list)
    workdir: str | None = None
    ipc_mode: str | None = None
    shm_size: str | None = None
    cpuset: str | None = None
    nano_cpus: int | None = (
        None  # a CPU quota in 1e-9 CPUs (Docker's NanoCpus): 950_000_000 is 0.95 of a core
    )
    read_only_root: bool = False
    tmpfs: dict[str, str] = field(default_factory=dict)
    cap_drop: list[str] = field(default_factory=list)
    security_opt: list[str] = field(default_factory=list)
    mem_limit: str | None = None
    pids_limit: int | None = None
    log_max_size: str | None = None
    network_mode: str | None = None
    writable_volumes: dict[str, str] = field(default_factory=dict)


def sdk_create_kwargs(spec: ContainerSpec) -> dict[str, Any]:
    """The SDK's ``containers.create`` keywords for ``spec``: only what the spec sets."""
    return {
        "detach": True,
        **_process_kwargs(spec),
        **_network_kwargs(spec),
        **_storage_kwargs(spec),
        **_device_kwargs(spec),
        **_confinement_kwargs(spec),
    }


def _process_kwargs(spec: ContainerSpec) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    if spec.entrypoint is not None:
        kwargs["entrypoint"] = spec.entrypoint
    if spec.command is not None:
        kwargs["command"] = spec.command
    if spec.environment is not None:
        kwargs["environment"] = spec.environment
    if spec.user is not None:
        kwargs["user"] = spec.user
    if spec.workdir is not None:
        kwargs["working_dir"] = spec.workdir
    if spec.labels:
        kwargs["labels"] = spec.labels
    if spec.log_max_size is not None:
        # The engine's log file is on the host: bound it so a chatty container cannot fill the disk.
        kwargs["log_config"] = {
            "type": "json-file",
            "config": {"max-size": spec.log_max_size, "max-file": "1"},
        }
    return kwargs


def _network_kwargs(spec: ContainerSpec) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    if not spec.network:
        kwargs["network_mode"] = "none"
    if spec.publish_port is not None:
        kwargs["ports"] = {f"{spec.publish_port}/tcp": ("127.0.0.1", None)}
    if spec.network_mode is not None:
        kwargs["network_mode"] = spec.network_mode
    return kwargs


def _storage_kwargs(spec: ContainerSpec) -> dict[str, Any]:
    volumes = {host: {"bind": inside, "mode": "ro"} for host, inside in spec.read_only_mounts.items()}
    volumes.update({name: {"bind": inside, "mode": "rw"} for name, inside in spec.writable_volumes.items()})
    kwargs: dict[str, Any] = {"volumes": volumes} if volumes else {}
    if spec.shm_size is not None:
        kwargs["shm_size"] = spec.shm_size
    if spec.tmpfs:
        kwargs["tmpfs"] = spec.tmpfs
    if spec.read_only_root:
        kwargs["read_only"] = True
    return kwargs


def _device_kwargs(spec: ContainerSpec) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    if spec.gpus or spec.gpu_count:
        from docker.types import DeviceRequest

        request = (
            DeviceRequest(device_ids=[str(g) for g in spec.gpus], capabilities=[["gpu"]])
            if spec.gpus
            else DeviceRequest(count=spec.gpu_count, capabilities=[["gpu"]])
        )
        kwargs["device_requests"] = [request]
    if spec.devices:
        kwargs["devices"] = [f"{d}:{d}:rwm" for d in spec.devices]
    if spec.ipc_mode is not None:
        kwargs["ipc_mode"] = spec.ipc_mode
    if spec.cpuset is not None:
        kwargs["cpuset_cpus"] = spec.cpuset
    if spec.nano_cpus is not None:
        kwargs["nano_cpus"] = spec.nano_cpus
    return kwargs


def _confinement_kwargs(spec: ContainerSpec) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    if spec.cap_drop:
        kwargs["cap_drop"] = spec.cap_drop
    if spec.security_opt:
        kwargs["security_opt"] = spec.security_opt
    if spec.mem_limit is not None:
        kwargs["mem_limit"] = spec.mem_limit
    if spec.pids_limit is not None:
        kwargs["pids_limit"] = spec.pids_limit
    return kwargs


@dataclass(frozen=True)
class Sandbox:
    """What ``run_sandboxed`` adds to a ``ContainerSpec``: the writable directories, made empty and
    owned by the spec's user before start, what is exported afterwards, and the deadline."""

    writable: list[str]
    export: str | None = None
    export_to: Path | None = None
    timeout: float | None = None
    max_export_bytes: int = 16 << 30  # a CUDA wheel of torch's size is 2-3 GiB


@dataclass
class RunResult:
    exit_code: int
    output: str
    timed_out: bool = False


class Container:
    """One container in the engine."""

    def __init__(self, sdk_container: Any) -> None:
        self._c = sdk_container

    @property
    def id(self) -> str:
        return str(self._c.id)

    def start(self) -> None:
        import docker.errors

        try:
            self._c.start()
        except docker.errors.APIError as exc:
            raise EngineError(explain(exc)) from None

    def wait(self, timeout: float | None = None) -> int:
        """The exit code; ContainerTimeout when it has not exited within ``timeout`` seconds."""
        import docker.errors

        try:
            status = self._c.wait(timeout=timeout) if timeout is not None else self._c.wait()
        except docker.errors.APIError as exc:
            raise EngineError(explain(exc)) from None
        except Exception as exc:  # noqa: BLE001 - requests' ReadTimeout / ConnectionError: it hung
            raise ContainerTimeout(
                f"the container did not exit within {timeout} s ({type(exc).__name__})"
            ) from None
        return int(status.get("StatusCode", -1))

    def logs(self, *, stdout: bool = True, stderr: bool = True, tail: int | None = None) -> bytes:
        import docker.errors

        options: dict[str, Any] = {"stdout": stdout, "stderr": stderr}
        if tail is not None:
            options["tail"] = tail
        try:
            return bytes(self._c.logs(**options))
        except docker.errors.APIError as exc:
            raise EngineError(explain(exc)) from None

    def exec(self, argv: list[str], *, timeout_s: float) -> RunResult:
        """``argv`` run inside this running container (``docker exec``), stopped after ``timeout_s``.

        The limit is coreutils ``timeout`` inside the container (the exec API has none); exit 124
        means it ran out. Output is stdout then stderr.
        """
        import docker.errors

        try:
            code, (out, err) = self._c.exec_run(
                ["timeout", "-k", "5", str(int(max(1, timeout_s))), *argv], demux=True
            )
        except docker.errors.APIError as exc:
            raise EngineError(explain(exc)) from None
        text = (out or b"").decode("utf-8", "replace") + (err or b"").decode("utf-8", "replace")
        return RunResult(exit_code=int(code if code is not None else -1), output=text, timed_out=code == 124)

    def stream_logs(self, *, stdout: bool = True, stderr: bool = True) -> Iterator[bytes]:
        """The log as it is read, chunk by chunk (bounded reads of a chatty container)."""
        import docker.errors

        try:
            yield from self._c.logs(stdout=stdout, stderr=stderr, stream=True)
        except docker.errors.APIError as exc:
            raise EngineError(explain(exc)) from None

    def state(self) -> tuple[str, int | None]:
        """(status, exit code once exited), freshly read from the engine."""
        import docker.errors

        try:
            self._c.reload()
        except docker.errors.APIError as exc:
            raise EngineError(explain(exc)) from None
        status = str(self._c.status)
        code = self._c.attrs.get("State", {}).get("ExitCode") if status in ("exited", "dead") else None
        return status, code

    def host_port(self, port: int) -> int | None:
        """The loopback port the engine published ``port/tcp`` on, if any."""
        self.state()
        bindings = (self._c.attrs.get("NetworkSettings", {}).get("Ports") or {}).get(f"{port}/tcp")
        return int(bindings[0]["HostPort"]) if bindings else None

    def limit_cpu(self, quota_us: int, period_us: int = 100_000) -> None:
        """Give a running container ``quota_us`` of CPU time per ``period_us`` (CFS quota; -1: no limit),
        without restarting it (benchmarks/bench_gate_catch.py slows a server by a known amount this way)."""
        import docker.errors

        try:
            self._c.update(cpu_quota=quota_us, cpu_period=period_us)
        except docker.errors.APIError as exc:
            raise EngineError(explain(exc)) from None

    def kill(self) -> None:
        """Kill it now; a container that already exited is fine."""
        with contextlib.suppress(Exception):
            self._c.kill()

    def remove(self, *, volumes: bool = False) -> None:
        """Remove it whatever its state; already gone is fine."""
        with contextlib.suppress(Exception):
            self._c.remove(force=True, v=volumes)

    def put_directory(self, dest: str, src: Path) -> None:
        """Copy the host directory ``src`` to the container path ``dest`` (before start); missing parents are made."""
        # Spooled to disk: a source tree (a vLLM checkout) can be large. Rooted at / so that the
        # engine creates any parent of ``dest`` the image does not have.
        with tempfile.TemporaryFile() as archive:
            with tarfile.open(fileobj=archive, mode="w", format=tarfile.PAX_FORMAT) as tar:
                tar.add(str(src), arcname=dest.strip("/"))
            archive.seek(0)
            self._c.put_archive("/", archive)

    def make_directories(self, paths: list[str], owner: str) -> None:
        """Empty directories at ``paths`` (before start), owned by ``owner`` ("uid:gid"), mode 0755."""
        uid, _, gid = owner.partition(":")
        with tempfile.TemporaryFile() as archive:
            with tarfile.open(fileobj=archive, mode="w", format=tarfile.PAX_FORMAT) as tar:
                for path in paths:
                    info = tarfile.TarInfo(path.strip("/"))
                    info.type = tarfile.DIRTYPE
                    info.mode = 0o755
                    info.uid, info.gid = int(uid), int(gid or uid)
                    tar.addfile(info)
            archive.seek(0)
            self._c.put_archive("/", archive)

    def read_file(self, path: str) -> bytes | None:
        """The content of the regular file at ``path`` in the container, or None when there is none."""
        import docker.errors

        try:
            stream, _ = self._c.get_archive(path)
        except docker.errors.NotFound:
            return None
        except docker.errors.APIError as exc:
            raise EngineError(explain(exc)) from None
        with tempfile.TemporaryFile() as spool:
            for chunk in stream:
                spool.write(chunk)
            spool.seek(0)
            with tarfile.open(fileobj=spool) as tar:
                for member in tar:
                    if member.isfile():
                        handle = tar.extractfile(member)
                        return handle.read() if handle is not None else None
        return None

    def archive_to(self, path: str, out: Path, max_bytes: int | None = None) -> None:
        """Stream ``path`` of the container's filesystem to ``out`` as a tar; past ``max_bytes``, an
        EngineError (what was written stays: the caller's temporary file)."""
        stream, _ = self._c.get_archive(path)
        written = 0
        with out.open("wb") as fh:
            for chunk in stream:
                written += len(chunk)
                if max_bytes is not None and written > max_bytes:
                    raise EngineError(f"{path} of the container is larger than {max_bytes} bytes")
                fh.write(chunk)

    def export(self, chunk_size: int = 1024 * 1024) -> Iterator[bytes]:
        """The container's flattened filesystem as a tar stream (``docker export``)."""
        return iter(self._c.export(chunk_size=chunk_size))

    def commit(self, repository: str | None, tag: str | None, changes: list[str]) -> str:
        """``docker commit`` with Dockerfile-style ``changes``; returns the new image ID (untagged
        when ``repository`` is None)."""
        import docker.errors

        try:
            return str(self._c.commit(repository=repository, tag=tag, changes=changes).id)
        except docker.errors.APIError as exc:
            raise EngineError(explain(exc)) from None


class ContainerOperations:
    """Container operations of ``Engine`` (``client`` is the SDK client)."""

    client: docker.DockerClient

    def create(self, spec: ContainerSpec) -> Container:
        """A created (not started) container as ``spec`` describes it."""
        import docker.errors

        try:
            return Container(self.client.containers.create(spec.image, **sdk_create_kwargs(spec)))
        except docker.errors.ImageNotFound:
            raise NoSuchImage(spec.image) from None
        except docker.errors.APIError as exc:
            raise EngineError(explain(exc)) from None

    def remove_volume(self, name: str) -> None:
        """Remove the named volume; already gone is fine."""
        with contextlib.suppress(Exception):
            self.client.volumes.get(name).remove(force=True)

    def run(
        self,
        image: str,
        command: list[str],
        *,
        timeout: float,
        entrypoint: list[str] | None = None,
        environment: dict[str, str] | None = None,
        labels: dict[str, str] | None = None,
    ) -> RunResult:
        """Run ``command`` without network; killed when it runs past ``timeout`` seconds; always removed."""
        container = self.create(
            ContainerSpec(
                image,
                entrypoint=entrypoint,
                command=command,
                environment=environment,
                network=False,
                labels=labels or {},
            )
        )
        try:
            container.start()
            try:
                code, timed_out = container.wait(timeout), False
            except ContainerTimeout:
                container.kill()
                code, timed_out = -1, True
            output = container.logs().decode("utf-8", "replace")
            return RunResult(code, output, timed_out)
        finally:
            container.remove()

    def run_sandboxed(self, spec: ContainerSpec, box: Sandbox) -> RunResult:
        """Run ``spec`` as a sandbox: ``box.writable`` are the only writable places (made empty, owned
        by ``spec.user``), ``box.export`` is streamed to ``box.export_to`` after the run (whatever its
        exit code, when it exists), and the container is removed, with every process it started,
        before this returns (killed when it runs past ``box.timeout`` seconds)."""
        container = self.create(replace(spec, labels={**spec.labels, OWNER_LABEL: str(os.getpid())}))
        try:
            container.make_directories(box.writable, spec.user or "0:0")
            container.start()
            try:
                code, timed_out = container.wait(box.timeout), False
            except ContainerTimeout:
                container.kill()
                code, timed_out = -1, True
            output = container.logs().decode("utf-8", "replace")
            if box.export and box.export_to is not None:
                try:
                    container.archive_to(box.export, box.export_to, box.max_export_bytes)
                except Exception:  # noqa: BLE001 - nothing to export, or too much: no export at all
                    box.export_to.unlink(missing_ok=True)
            return RunResult(code, output, timed_out)
        finally:
            container.remove()

    def export_stream(
        self, image: str, *, deadline: float, labels: dict[str, str] | None = None
    ) -> Iterator[bytes]:
        """An image's flattened filesystem as tar bytes, from a created, never started container.

        Nothing of the image runs. ``deadline`` (``time.monotonic()``): a stalled engine is cut
        off by removing the container, which ends the stream. Any failure is an EngineError.
        """
        try:
            container = self.create(
                ContainerSpec(
                    image, entrypoint=["/nonexistent"], command=[], network=False, labels=labels or {}
                )
            )
        except EngineError as exc:  # any engine refusal means: nothing to read
            raise EngineError(f"cannot create a container to export: {exc}") from None
        expired = threading.Event()

        def _watch() -> None:
            if not expired.wait(max(0.0, deadline - time.monotonic())):
                container.remove()

        watchdog = threading.Thread(target=_watch, daemon=True)
        watchdog.start()
        try:
            yield from container.export()
        except Exception as exc:  # noqa: BLE001 - the engine or the watchdog broke the stream
            raise EngineError(f"the export stream broke: {type(exc).__name__}: {exc}") from None
        finally:
            expired.set()
            container.remove()
