"""One pipeline: ``releasekit demo`` runs the release workflow's stages in the workflow's order.

The demo's stages each name the ``releasekit`` commands they stand for
(``releasekit.demo.service.STAGES``); the workflow's jobs run those commands in their steps.
Read in the order the jobs run, the workflow's commands (each run of the same command counted
once) must be the demo's, so staging, or any stage added to one, cannot be missing from the other.
"""

from __future__ import annotations

import re
from pathlib import Path

from ruamel.yaml import YAML

from releasekit.demo.service import STAGES

WORKFLOW = Path(__file__).resolve().parents[1] / ".github" / "workflows" / "release.yml"
# `releasekit COMMAND [SUBCOMMAND]` at the start of a shell line or after `$(`, `|`, `&&`.
_CALL = re.compile(r"(?:^|\$\(|[|&;]\s*)\s*releasekit\s+([a-z][a-z-]*)(?:\s+([a-z][a-z-]*))?", re.MULTILINE)
GROUPS = {"plan", "validate"}  # commands whose first word is a group: `plan lock`, `validate aggregate`
# What the workflow runs that is no pipeline stage: reports (`validate aggregate` is the
# validation report publish's gate does not read) and the matrix listing.
NOT_STAGES = {"summary", "matrix", "validate aggregate"}
# Jobs that run only when the manifest asks (``publish.require_reproduced``: the independent
# reproduction and its signature, issue 43); the demo's manifest does not, so the demo has no such
# stage. Recognised by their condition, and checked to be exactly these two.
ON_REQUEST = "needs.lock.outputs.reproduce == 'true'"
OPTIONAL_JOBS = {"reproduce", "sign-reproduction"}


def _ordered_jobs(jobs: dict) -> list[str]:
    """The jobs in an order that respects ``needs`` (file order among those ready)."""
    done: list[str] = []
    while len(done) < len(jobs):
        for name, job in jobs.items():
            needs = job.get("needs", [])
            needs = [needs] if isinstance(needs, str) else needs
            if name not in done and all(n in done for n in needs):
                done.append(name)
                break
        else:
            raise AssertionError(f"the workflow's needs do not resolve: {sorted(set(jobs) - set(done))}")
    return done


def workflow_jobs() -> dict:
    return YAML(typ="safe").load(WORKFLOW.read_text(encoding="utf-8"))["jobs"]


def optional_jobs(jobs: dict) -> set[str]:
    return {name for name, job in jobs.items() if ON_REQUEST in str(job.get("if", ""))}


def workflow_commands(jobs: dict) -> list[str]:
    found: list[str] = []
    for name in _ordered_jobs(jobs):
        if name in optional_jobs(jobs):
            continue
        for step in jobs[name].get("steps", []):
            for command, sub in _CALL.findall(str(step.get("run", ""))):
                called = f"{command} {sub}" if command in GROUPS and sub else command
                if command in NOT_STAGES or called in NOT_STAGES:
                    continue
                if called.startswith("validate ") or called == "plan":
                    raise AssertionError(f"job {name}: unrecognised call `releasekit {called}`")
                if not found or found[-1] != called:
                    found.append(called)
    return found


def demo_commands() -> list[str]:
    return [command for stage in STAGES for command in stage.commands]


def test_the_demo_runs_the_workflows_stages_in_its_order() -> None:
    assert optional_jobs(workflow_jobs()) == OPTIONAL_JOBS
    assert workflow_commands(workflow_jobs()) == demo_commands()
    # Staging is in both: the demo tests, validates and publishes the staged digest too; and
    # each host signs what it wrote, after the step that wrote it.
    assert "stage" in demo_commands()
    assert demo_commands().count("sign") == 4


def test_a_stage_missing_or_moved_in_the_workflow_is_caught() -> None:
    jobs = workflow_jobs()
    stage = jobs["stage"]["steps"]
    stage[:] = [step for step in stage if "releasekit stage" not in str(step.get("run", ""))]
    assert workflow_commands(jobs) != demo_commands()
    # Hygiene after the suites in the test job.
    jobs = workflow_jobs()
    steps = jobs["test"]["steps"]
    at = {
        name: i
        for i, step in enumerate(steps)
        for name in ("hygiene", "test")
        if f"releasekit {name} " in str(step.get("run", ""))
    }
    steps[at["hygiene"]], steps[at["test"]] = steps[at["test"]], steps[at["hygiene"]]
    assert workflow_commands(jobs) != demo_commands()
