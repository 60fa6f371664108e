"""Prefill/decode topologies: the processes of one cell, what each needs, and which one clients talk to.

A cell with ``prefill_replicas``/``decode_replicas`` is not one server but a group of
processes: prefill workers, decode workers and a router (or the engine's own gateway) in
front that exposes the OpenAI API. An engine adapter renders a cell into a ``Topology``
(its vocabulary: flags, ports, readiness, metric names); ``topology_run`` starts it through
``releasekit.docker_engine``, waits for every process, watches each, scrapes each one's
metrics and tears all of them down. This module is only the model, so adapters can
import it without importing Docker.

GPUs: a cell's GPUs are split in order, ``tp x pp`` per worker: prefill workers first,
then decode workers (1P+1D at TP2 on 4 GPUs: prefill 0,1 and decode 2,3).
"""

from __future__ import annotations

import socket
from typing import Literal

from pydantic import BaseModel, Field

from releasekit.manifest.validation import Cell

Role = Literal["server", "prefill", "decode", "router"]


class ProcessSpec(BaseModel):
    """One process of a topology, as the adapter rendered it."""

    name: str = Field(description="unique in the topology: prefill-0, decode-0, router")
    role: Role
    argv: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    port: int = Field(description="the port it serves on (HTTP, or gRPC for workers behind a gateway)")
    ports: dict[str, int] = Field(
        default_factory=dict, description="further named ports: bootstrap, metrics, ..."
    )
    gpus: list[int] = Field(default_factory=list, description="the cell's GPU ids this process owns")
    readiness_paths: list[str] = Field(
        default_factory=list, description="HTTP paths that all answer 200 once ready"
    )
    ready_log: str | None = Field(default=None, description="a regular expression over its log meaning ready")
    metrics_path: str | None = Field(default=None, description="its Prometheus endpoint on metrics_port")
    metrics_port: int | None = Field(default=None, description="default: port")
    metric_names: list[str] = Field(
        default_factory=list, description="counters kept in the receipt (summed over labels)"
    )
    in_process: bool = Field(
        default=False, description="releasekit's own router, run by releasekit, not in a container"
    )
    shared_dirs: list[str] = Field(default_factory=list, description="keys of Topology.shared_dirs it mounts")


class RouterSpec(BaseModel):
    """How releasekit's own router (``validate/router.py``) hands a request from prefill to decode.

    The adapter says which fields its engine needs: ``prefill_fields`` are added to the
    prefill request (which always has max_tokens 1 and no streaming); ``handoff_field`` is a
    field of the prefill response copied into the decode request (vLLM's kv_transfer_params).
    """

    prefill: list[str] = Field(description="names of the prefill processes (round robin)")
    decode: list[str] = Field(description="names of the decode processes (round robin)")
    prefill_fields: dict[str, object] = Field(default_factory=dict)
    handoff_field: str | None = None
    metrics_from: Literal["decode", "prefill"] = Field(
        default="decode",
        description="whose /metrics the router's /metrics passes on (speculation runs in decode)",
    )


class Topology(BaseModel):
    processes: list[ProcessSpec]
    entry: str = Field(description="the process clients talk to (the router or gateway)")
    shared_dirs: dict[str, str] = Field(
        default_factory=dict,
        description="key -> container path of a fresh writable directory shared by the workers",
    )
    router: RouterSpec | None = Field(
        default=None, description="set when the entry is releasekit's own router"
    )
    problems: list[str] = Field(default_factory=list, description="cell settings the topology cannot express")

    def process(self, name: str) -> ProcessSpec:
        return next(p for p in self.processes if p.name == name)

    @property
    def entry_process(self) -> ProcessSpec:
        return self.process(self.entry)

    @property
    def workers(self) -> list[ProcessSpec]:
        return [p for p in self.processes if p.role in ("prefill", "decode", "server")]


def is_disaggregated(cell: Cell) -> bool:
    return bool(cell.parallel.prefill_replicas or cell.parallel.decode_replicas)


def worker_gpus(cell: Cell, gpus: list[int]) -> list[list[int]]:
    """The GPU ids of each worker, prefill workers first: ``tp x pp`` each, in order; [] each on the CPU."""
    par = cell.parallel
    count = par.prefill_replicas + par.decode_replicas
    per = par.tp * par.pp
    if not gpus:
        return [[] for _ in range(count)]
    return [gpus[i * per : (i + 1) * per] for i in range(count)]


def roles(cell: Cell) -> list[tuple[str, Literal["prefill", "decode"], int]]:
    """(name, role, index among all workers) for every worker of a P/D cell."""
    par = cell.parallel
    out: list[tuple[str, Literal["prefill", "decode"], int]] = []
    out += [(f"prefill-{i}", "prefill", i) for i in range(par.prefill_replicas)]
    out += [(f"decode-{i}", "decode", par.prefill_replicas + i) for i in range(par.decode_replicas)]
    return out


class PortPlan:
    """Ports for a topology's processes.

    Rendering (``releasekit matrix``): fixed, counted up from ``base``, so the argv is stable.
    Running: free ports of this host (the processes share the host's network), never one twice.
    """

    def __init__(self, base: int | None = 8000) -> None:
        self.base = base
        self._next = base
        self._taken: set[int] = set()

    @classmethod
    def free(cls) -> PortPlan:
        return cls(base=None)

    def take(self) -> int:
        if self._next is not None:
            port = self._next
            self._next += 1
            return port
        while True:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", 0))
                port = int(s.getsockname()[1])
            if port not in self._taken:
                self._taken.add(port)
                return port
