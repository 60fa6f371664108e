"""Packing cells onto GPUs: disjoint GPU sets, longest first, one host or several.

Cells hold their GPUs for their whole run (one server per cell), so this is
rigid-job scheduling: LPT order, start every waiting cell that fits as soon as GPUs
free up, and prefer aligned contiguous GPU blocks (TP groups stay within an NVLink /
PCIe switch half where the topology has one). CPU cells (0 GPUs) run one at a time in
their own lane: they would otherwise fight over the same cores.

Several hosts (``pack(jobs, gpus_per_host, hosts=N)``): GPUs are numbered host by host
(host ``h`` owns ``h*G .. h*G+G-1``) and a cell's GPUs always lie on one host (a TP group
never spans machines); the first host with a fitting block takes the cell.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from pydantic import BaseModel

from releasekit.errors import InputError

T = TypeVar("T")


class Job(BaseModel):
    cell_id: str
    gpus: int
    duration_s: float


class Placement(BaseModel):
    cell_id: str
    gpus: list[int]  # numbered across hosts: host h owns h*G .. h*G+G-1
    start_s: float
    end_s: float
    host: int = 0


class Schedule(BaseModel):
    total_gpus: int
    hosts: int = 1
    placements: list[Placement]
    makespan_s: float
    sequential_s: float
    speedup: float
    gpu_utilisation: float
    order: str = ""


def choose_gpus(free: set[int], need: int, total: int, hosts: int = 1) -> list[int] | None:
    """On the first host that can take it: an aligned contiguous block if one is free, else the lowest free GPUs."""
    if hosts > 1:
        per = total // hosts
        for h in range(hosts):
            local = {g - h * per for g in free if h * per <= g < (h + 1) * per}
            block = choose_gpus(local, need, per)
            if block is not None:
                return [g + h * per for g in block]
        return None
    if need > len(free):
        return None
    align = 1
    while align < need:
        align *= 2
    for start in range(0, total - need + 1, align):
        block = list(range(start, start + need))
        if all(g in free for g in block):
            return block
    for start in range(0, total - need + 1):
        block = list(range(start, start + need))
        if all(g in free for g in block):
            return block
    return sorted(free)[:need]


def _order(jobs: list[Job]) -> list[Job]:
    # Longest first; ties: wider first (harder to place), then manifest order (a stable sort),
    # so a cell whose baseline is an earlier cell's receipt runs after it.
    return sorted(jobs, key=lambda j: (-j.duration_s, -j.gpus))


# Candidate priority orders. LPT alone strands GPUs when wide and narrow cells mix (a TP6
# cell leaves two GPUs that only TP2 cells can use); widest-first and largest-area-first
# fix that case. Simulating all three is cheap, and the shortest makespan wins.
ORDERS = {
    "longest-first": lambda j: (-j.duration_s, -j.gpus),
    "widest-first": lambda j: (-j.gpus, -j.duration_s),
    "largest-area-first": lambda j: (-j.gpus * j.duration_s, -j.gpus),
}


def pack(jobs: list[Job], total_gpus: int, hosts: int = 1) -> Schedule:
    """The shortest of the candidate orders' schedules (ties: the first order listed).

    ``total_gpus`` is per host; with ``hosts`` > 1 the schedule spans ``hosts * total_gpus`` GPUs.
    """
    best: Schedule | None = None
    for name, key in ORDERS.items():
        s = _pack_in_order(jobs, total_gpus, key, hosts)
        s.order = name
        if best is None or s.makespan_s < best.makespan_s:
            best = s
    assert best is not None
    return best


def best_order(jobs: list[Job], total_gpus: int) -> str:
    return pack(jobs, total_gpus).order


def _cpu_lane(jobs: list[Job]) -> list[Placement]:
    """CPU cells, one after another."""
    out: list[Placement] = []
    t = 0.0
    for job in _order([j for j in jobs if j.gpus == 0]):
        out.append(Placement(cell_id=job.cell_id, gpus=[], start_s=t, end_s=t + job.duration_s))
        t += job.duration_s
    return out


def _pack_in_order(jobs: list[Job], per_host: int, key, hosts: int = 1) -> Schedule:
    too_big = [j for j in jobs if j.gpus > per_host]
    if too_big:
        raise InputError(f"cell {too_big[0].cell_id} needs {too_big[0].gpus} GPUs; the host has {per_host}")
    total_gpus = per_host * hosts
    placements = _cpu_lane(jobs)
    waiting = sorted([j for j in jobs if j.gpus > 0], key=key)
    free = set(range(total_gpus))
    running: list[tuple[float, int, list[int]]] = []  # (end, seq, gpus)
    now = 0.0
    seq = 0
    while waiting or running:
        started = True
        while started:
            started = False
            for job in list(waiting):
                chosen = choose_gpus(free, job.gpus, total_gpus, hosts)
                if chosen is None:
                    continue
                free -= set(chosen)
                waiting.remove(job)
                placements.append(
                    Placement(
                        cell_id=job.cell_id,
                        gpus=chosen,
                        start_s=now,
                        end_s=now + job.duration_s,
                        host=chosen[0] // per_host,
                    )
                )
                heapq.heappush(running, (now + job.duration_s, seq, chosen))
                seq += 1
                started = True
                break
        if not running:
            break
        end, _, gpus = heapq.heappop(running)
        now = end
        free |= set(gpus)
        # Release everything else ending at the same moment before placing again.
        while running and running[0][0] == now:
            free |= set(heapq.heappop(running)[2])
    makespan = max((p.end_s for p in placements), default=0.0)
    sequential = sum(j.duration_s for j in jobs)
    busy = sum(j.duration_s * j.gpus for j in jobs)
    return Schedule(
        total_gpus=total_gpus,
        hosts=hosts,
        placements=sorted(placements, key=lambda p: (p.start_s, p.gpus[:1], p.cell_id)),
        makespan_s=makespan,
        sequential_s=sequential,
        speedup=sequential / makespan if makespan else 1.0,
        gpu_utilisation=busy / (makespan * total_gpus) if makespan and total_gpus else 0.0,
    )


def run_packed(jobs: list[Job], total_gpus: int, run: Callable[[Job, list[int]], T]) -> dict[str, T]:
    """Run jobs for real: each gets a disjoint GPU set while it runs; same policy as ``pack``."""
    too_big = [j for j in jobs if j.gpus > total_gpus]
    if too_big:
        raise InputError(f"cell {too_big[0].cell_id} needs {too_big[0].gpus} GPUs; the host has {total_gpus}")
    results: dict[str, T] = {}
    for job in _order([j for j in jobs if j.gpus == 0]):
        results[job.cell_id] = run(job, [])
    gpu_jobs = [j for j in jobs if j.gpus > 0]
    if not gpu_jobs:
        return results
    waiting = sorted(gpu_jobs, key=ORDERS[best_order(gpu_jobs, total_gpus)])
    free = set(range(total_gpus))
    cond = threading.Condition()
    with ThreadPoolExecutor(max_workers=max(1, total_gpus)) as pool:
        futures = []
        while waiting:
            with cond:
                while True:
                    pick = next(
                        ((j, g) for j in waiting if (g := choose_gpus(free, j.gpus, total_gpus))), None
                    )
                    if pick:
                        break
                    cond.wait()
                job, gpus = pick
                waiting.remove(job)
                free -= set(gpus)

            def task(job: Job = job, gpus: list[int] = gpus) -> None:
                try:
                    results[job.cell_id] = run(job, gpus)
                finally:
                    with cond:
                        free.update(gpus)  # noqa: B023 - one shared set, mutated under the lock
                        cond.notify_all()

            futures.append(pool.submit(task))
        for f in futures:
            f.result()
    return results
