"""benchmarks/plant: the per-step delay bench_gate_catch.py plants in a vLLM server (``--slow-by step``).

The server's Python finds the plant through ``PYTHONPATH`` and wraps ``vllm.v1.worker.gpu_worker.Worker``'s
model calls when that module is imported. Here the module is a stand-in with the same names, imported by
a fresh interpreter the way the server's worker would import it, with the clock and sleep under the
test's control: the delay asked for is computed in the test from the call's time and the control file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PLANT = REPO / "benchmarks" / "plant"

WORKER = """
class Worker:
    def execute_model(self, scheduler_output):
        self.tick()
        return scheduler_output

    def sample_tokens(self, grammar_output):
        self.tick()
        return grammar_output

    def shutdown(self, now):
        self.tick()
        return now
"""

DRIVER = """
import json, sys, time
import sitecustomize  # the plant, as the interpreter imported it at start-up
clock, slept, spun = [0.0], [], []
time.perf_counter = lambda: clock[0]
time.sleep = slept.append
sitecustomize.spin = spun.append
from vllm.v1.worker.gpu_worker import Worker
control, results = sys.argv[1], []
worker = Worker()
worker.tick = lambda: clock.__setitem__(0, clock[0] + 0.010)  # every call takes 10 ms
for fraction, method in json.loads(sys.argv[2]):
    if fraction is None:
        open(control, "w").close()
    elif fraction != "no file":
        open(control, "w").write(fraction)
    del slept[:], spun[:]
    assert getattr(worker, method)("in") == "in"  # what the call returns is passed through
    results.append({"sleep": slept[:], "spin": spun[:]})
print(json.dumps({"slept": results, "planted": getattr(Worker, "rk_planted", False)}))
"""


def _driven(tmp_path: Path, control: Path, cases: list) -> dict:
    fake = tmp_path / "site"
    worker = fake / "vllm" / "v1" / "worker"
    worker.mkdir(parents=True, exist_ok=True)
    for package in (fake / "vllm", fake / "vllm" / "v1", worker):
        (package / "__init__.py").write_text("")
    (worker / "gpu_worker.py").write_text(WORKER)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(PLANT), str(fake)]),
        "RK_PLANT_CONTROL": str(control),
    }
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, str(control), json.dumps(cases)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_plant_waits_the_controlled_fraction_of_each_model_call(tmp_path: Path) -> None:
    control = tmp_path / "fraction"
    cases = [
        ["0.05", "execute_model"],  # 5 %: a 10 ms call waits 10 x 0.05 / 0.95 ms, asleep
        ["0.05 spin", "execute_model"],  # the same wait, busy on the CPU
        ["0.2 spin", "sample_tokens"],  # both model calls are wrapped
        ["0.2 hover", "sample_tokens"],  # a wait it does not know: asleep
        ["0.2", "shutdown"],  # nothing else is
        ["0", "execute_model"],
        [None, "execute_model"],  # an empty control file
        ["0.7 spin", "execute_model"],  # outside (0, 0.5): ignored, not a 70 % slowdown
        ["slow", "execute_model"],
    ]
    out = _driven(tmp_path, control, cases)
    assert out["planted"] is True
    five, twenty = 0.010 * 0.05 / 0.95, 0.010 * 0.2 / 0.8
    none: dict[str, list[float]] = {"sleep": [], "spin": []}
    want = [
        {"sleep": [five], "spin": []},
        {"sleep": [], "spin": [five]},
        {"sleep": [], "spin": [twenty]},
        {"sleep": [twenty], "spin": []},
        *[none] * 5,
    ]
    assert len(out["slept"]) == len(want)
    for got, expected in zip(out["slept"], want, strict=True):
        for wait in ("sleep", "spin"):
            assert len(got[wait]) == len(expected[wait]), (got, expected)
            assert all(abs(g - e) < 1e-12 for g, e in zip(got[wait], expected[wait], strict=True))


def test_without_its_control_file_the_plant_does_nothing(tmp_path: Path) -> None:
    out = _driven(tmp_path, tmp_path / "absent", [["no file", "execute_model"]])
    assert out == {"slept": [{"sleep": [], "spin": []}], "planted": True}
