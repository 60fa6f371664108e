"""``releasekit summary``: release records as GitHub-flavoured markdown for ``$GITHUB_STEP_SUMMARY``.

The plan table is made from a real lock and plan check: a git repository with pull requests
(tests/forge.py) and a GitHub-REST-shaped forge on 127.0.0.1 (tests/github_server.py) that
says one planned PR is a draft. The table must name the forge's state of each PR and the
code that fails the plan, and a PR title holding ``|`` must not add a column.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_run import invoke
from forge import Forge
from github_server import PR, GitHubServer
from plan_world import plan_check, plan_lock

from releasekit.manifest import load_manifest
from releasekit.plan.check import PlanCheckOptions
from releasekit.publish.step_summary import cell, table
from releasekit.records.base import write_record
from releasekit.records.lock import write_lock


@pytest.fixture()
def server() -> Iterator[GitHubServer]:
    found = GitHubServer(owner="lab", repo="app").start()
    yield found
    found.stop()


def _row(markdown: str, first_cells: str) -> list[str]:
    """The cells of the table row that starts with ``first_cells`` (escaped pipes kept inside a cell)."""
    line = next(line for line in markdown.splitlines() if line.startswith(first_cells))
    cells = line.replace("\\|", "\0").strip("|").split("|")
    return [c.strip().replace("\0", "|") for c in cells]


def test_the_plan_table_shows_the_forge_state_and_the_failing_code(
    local_repos: None, monkeypatch: pytest.MonkeyPatch, server: GitHubServer, tmp_path: Path
) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.delenv("GH_TOKEN", raising=False)
    git = Forge(tmp_path / "git", "app")
    git.init()
    git.open_pr(1, [{"one.py": "1\n"}])
    git.open_pr(2, [{"two.py": "2\n"}])
    server.add(PR(1, git.pr_head(1), "one | with a pipe"))
    server.add(PR(2, git.pr_head(2), "two", draft=True))
    data = {
        "schema": "releasekit/v1",
        "name": "summary-test",
        "components": {
            "app": {
                "kind": "git",
                "repo": git.url,
                "canonical_branch": "main",
                "forge": {"api_url": server.api_url, "repo": "lab/app"},
                "merge_plan": [{"pr": 1, "title": "one | with a pipe"}, {"pr": 2, "title": "two"}],
            }
        },
        "toolchain": {
            "base_image": {"name": "releasekit-test/none", "digest": "sha256:" + "0" * 64},
            "cuda_arch_list": ["12.0a"],
        },
    }
    manifest = tmp_path / "m.yaml"
    manifest.write_text(json.dumps(data))
    loaded = load_manifest(manifest)
    lock = plan_lock(loaded, allow_local=True)
    write_lock(lock, tmp_path / "lock.json")
    result = plan_check(loaded, PlanCheckOptions(lock=lock, allow_local=True, require_forge=True))
    write_record(result, tmp_path / "plan-check.json")

    proc = invoke("summary", "plan", str(tmp_path / "plan-check.json"), "--lock", str(tmp_path / "lock.json"))
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert text.startswith("## Plan check: ❌ failed\n"), text
    header = _row(text, "| component |")
    assert header == ["component", "PR", "title", "role", "state", "how it landed", "forge", "codes"]
    one, two = _row(text, "| app | #1 |"), _row(text, "| app | #2 |")
    assert len(one) == len(two) == len(header), text
    assert one[2] == "one | with a pipe"
    assert (one[3], one[6]) == ("planned", "open, into main")
    assert (two[3], two[6]) == ("planned", "open, draft, into main")
    assert "PLANNED_PR_IS_DRAFT" in two[7]
    # The finding itself, with its severity, below the table.
    assert any(line.startswith("| error | PLANNED_PR_IS_DRAFT |") for line in text.splitlines()), text


def test_a_cell_is_one_line_and_never_adds_a_column() -> None:
    assert cell("a|b\nc  d") == "a\\|b c d"
    assert cell(None) == ""
    assert len(cell("x" * 1000)) == 300
    lines = table(("a", "b"), [("1|2", "3\\")])
    assert lines == ["| a | b |", "|---|---|", "| 1\\|2 | 3\\\\ |"]
