"""Running a topology: one container per process, every one watched, all of them removed.

Why one container per process (not one container running several): each process gets
its own GPUs through its own device request, its own exit status and log from the engine,
and can fail (or be killed) alone, exactly as on a GPU runner where each role is a
separate server; teardown is "remove every container", which cannot leave a stray
process behind inside a container that is still running. The containers share the host's
network (``network_mode=host``): the processes reach each other on 127.0.0.1 at the
ports the topology gave them, as the engines' own launch scripts do (bootstrap and KV
side-channel ports work unchanged), and releasekit reaches each one for readiness and
metrics. A fresh named volume per shared directory (vLLM's shared-storage KV connector)
is mounted read-write into the workers and removed at the end.

``TopologyServer`` answers what ``container.RunningServer`` answers (``base_url`` of the
entry, ``alive``, ``healthy``, ``settle``, ``wait_ready``, ``logs``), so the cell's checks
run unchanged against the router; when something dies, ``who_exited`` names the process
and its role.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

import httpx

from releasekit.docker_engine import Container, ContainerSpec, EngineError
from releasekit.docker_engine import Engine as DockerEngine
from releasekit.records.receipt import ProcessRecord
from releasekit.validate.container import LABEL, ServerFailed
from releasekit.validate.health import ServerHealth, answers_ok
from releasekit.validate.metrics import parse_prometheus
from releasekit.validate.router import Router
from releasekit.validate.topology import ProcessSpec, Topology

PROCESS_LABEL = "io.releasekit.validate.process"
LOG_TAIL_LINES = 60


@dataclass
class _Process:
    spec: ProcessSpec
    container: Container | None = None
    router: Router | None = None
    started: float = 0.0
    ready_s: float | None = None
    exit_code: int | None = None
    exited: bool = False
    final_log: str = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.spec.port}"

    def describe(self) -> str:
        return f"the {self.spec.role} process {self.spec.name}"


@dataclass
class TopologyServer(ServerHealth):
    engine: DockerEngine
    topology: Topology
    image: str
    cell_id: str
    mounts: dict[str, str] = field(default_factory=dict)
    shm_size: str = "2g"
    request_timeout_s: float = 600
    processes: list[_Process] = field(default_factory=list)
    volumes: dict[str, str] = field(default_factory=dict)  # shared-dir key -> volume name
    first_exit: _Process | None = None
    base_url: str = ""

    def __post_init__(self) -> None:
        self.processes = [_Process(p) for p in self.topology.processes]
        self.base_url = f"http://127.0.0.1:{self.topology.entry_process.port}"

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Create and start every process; EngineError when the engine refuses one (the caller tears down)."""
        token = uuid.uuid4().hex[:8]
        self.volumes = {key: f"releasekit-{self.cell_id}-{key}-{token}" for key in self.topology.shared_dirs}
        for proc in self.processes:
            spec = proc.spec
            if spec.in_process:
                continue
            env = dict(spec.env)
            if spec.gpus:
                env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(len(spec.gpus)))
            proc.container = self.engine.create(
                ContainerSpec(
                    self.image,
                    entrypoint=spec.argv[:1],
                    command=spec.argv[1:],
                    environment=env,
                    network_mode="host",
                    read_only_mounts=self.mounts,
                    writable_volumes={
                        self.volumes[k]: self.topology.shared_dirs[k] for k in spec.shared_dirs
                    },
                    labels={LABEL: self.cell_id, PROCESS_LABEL: spec.name},
                    gpus=spec.gpus,
                    ipc_mode="host" if spec.gpus else None,
                    shm_size=None if spec.gpus else self.shm_size,
                )
            )
            proc.container.start()
            proc.started = time.monotonic()
        for proc in self.processes:
            if proc.spec.in_process and self.topology.router is not None:
                backends = {p.spec.name: p.url for p in self.processes if not p.spec.in_process}
                proc.router = Router(
                    self.topology.router, backends, proc.spec.port, timeout_s=self.request_timeout_s
                )
                proc.router.start()
                proc.started = time.monotonic()

    def snapshot(self) -> list[ProcessRecord]:
        """Every process as it stands now: state, exit code, its metrics, its log tail."""
        records = []
        for proc in self.processes:
            self._refresh(proc)
            log = self._log(proc)
            status = "not-started" if not proc.started else ("exited" if proc.exited else "running")
            records.append(
                ProcessRecord(
                    name=proc.spec.name,
                    role=proc.spec.role,
                    argv=proc.spec.argv,
                    env=proc.spec.env,
                    gpus=proc.spec.gpus,
                    port=proc.spec.port,
                    ports=proc.spec.ports,
                    where="in-process" if proc.spec.in_process else "container",
                    ready_s=None if proc.ready_s is None else round(proc.ready_s, 3),
                    status=status,
                    exit_code=proc.exit_code,
                    metrics=self._metrics(proc) if not proc.exited else {},
                    log_tail=log.splitlines()[-LOG_TAIL_LINES:],
                )
            )
        return records

    def teardown(self) -> None:
        for proc in self.processes:
            if proc.router is not None:
                proc.router.stop()
            if proc.container is not None:
                proc.final_log = self._log(proc)
                proc.container.remove(volumes=True)
        for name in self.volumes.values():
            self.engine.remove_volume(name)

    # -- what RunningServer answers --------------------------------------------------------

    def _refresh(self, proc: _Process) -> None:
        if proc.exited or not proc.started:
            return
        if proc.router is not None:
            if not proc.router.running:
                proc.exited, proc.exit_code = True, None
        elif proc.container is not None:
            try:
                status, code = proc.container.state()
            except EngineError:
                status, code = "dead", None
            if status in ("exited", "dead"):
                proc.exited, proc.exit_code = True, code
        if proc.exited and self.first_exit is None:
            self.first_exit = proc

    def alive(self) -> tuple[bool, int | None]:
        """False (and the exit code) once any process of the topology has exited."""
        for proc in self.processes:
            self._refresh(proc)
        if self.first_exit is not None:
            return False, self.first_exit.exit_code
        return True, None

    def who_exited(self) -> str:
        """The process that exited first, by name and role ("the decode process decode-0")."""
        return self.first_exit.describe() if self.first_exit is not None else "the server"

    def _ready(self, proc: _Process) -> bool:
        spec = proc.spec
        if spec.ready_log is not None and not re.search(spec.ready_log, self._log(proc)):
            return False
        return all(answers_ok(proc.url + path) for path in spec.readiness_paths)

    def wait_ready(self, paths: list[str], deadline_s: float) -> float:
        """Seconds until every process was ready (workers first, then the entry); each one's time is kept.

        ``paths`` is what a single server would be asked; here each process has its own readiness.
        ServerFailed names the process that exited or was not ready.
        """
        start = time.monotonic()
        entry = self.topology.entry
        while True:
            alive, code = self.alive()
            if not alive:
                raise ServerFailed(
                    "SERVER_EXITED",
                    f"{self.who_exited()} exited with code {code} before the topology was ready",
                )
            pending = [p for p in self.processes if p.ready_s is None]
            workers_ready = all(p.ready_s is not None for p in self.processes if p.spec.name != entry)
            for proc in pending:
                if proc.spec.name == entry and not workers_ready:
                    continue
                if self._ready(proc):
                    proc.ready_s = time.monotonic() - proc.started
            if all(p.ready_s is not None for p in self.processes):
                return time.monotonic() - start
            if time.monotonic() - start > deadline_s:
                waiting = ", ".join(
                    f"{p.spec.name} ({p.spec.role})" for p in self.processes if p.ready_s is None
                )
                raise ServerFailed("SERVER_NOT_READY", f"not ready within {deadline_s:.0f} s: {waiting}")
            time.sleep(1.0)

    def _log(self, proc: _Process) -> str:
        if proc.router is not None:
            return f"router: {proc.router.requests} requests, {proc.router.failures} failed at a backend"
        if proc.container is None:
            return proc.final_log
        try:
            return proc.container.logs().decode("utf-8", "replace")
        except Exception:  # noqa: BLE001 - a vanished container has no log to give
            return proc.final_log

    def logs(self) -> str:
        """Every process's log, one section each (the log scan judges them all)."""
        return "\n".join(f"==> {p.spec.name} ({p.spec.role}) <==\n{self._log(p)}" for p in self.processes)

    def _metrics(self, proc: _Process) -> dict[str, float]:
        spec = proc.spec
        if not spec.metrics_path or not spec.metric_names:
            return {}
        try:
            r = httpx.get(f"http://127.0.0.1:{spec.metrics_port or spec.port}{spec.metrics_path}", timeout=5)
        except httpx.HTTPError:
            return {}
        if r.status_code != 200:
            return {}
        wanted = set(spec.metric_names)
        out: dict[str, float] = {}
        for sample in parse_prometheus(r.text):
            if sample.name in wanted:
                out[sample.name] = out.get(sample.name, 0.0) + sample.value
        return out


@contextmanager
def serve_topology(
    engine: DockerEngine,
    topology: Topology,
    *,
    image: str,
    cell_id: str,
    mounts: dict[str, str] | None = None,
    request_timeout_s: float = 600,
    records: list[ProcessRecord] | None = None,
) -> Iterator[TopologyServer]:
    """Every process of ``topology`` started; on the way out (whatever happened) each one's state is
    appended to ``records`` and all of them are removed. EngineError when the engine refuses one."""
    server = TopologyServer(
        engine, topology, image, cell_id, mounts=mounts or {}, request_timeout_s=request_timeout_s
    )
    try:
        server.start()
        yield server
    finally:
        with suppress(Exception):
            if records is not None:
                records.extend(server.snapshot())
        server.teardown()
