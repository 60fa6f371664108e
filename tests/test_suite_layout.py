"""How the test suite shares what it makes (issue 42), checked on the syntax trees of ``tests/*.py``:

- one definition of each fixture: a fixture name is defined in one module only (conftest.py for the
  shared ones), so ``release`` or ``keys`` means one thing everywhere; a module's private autouse
  fixtures (``_name``) are its own;
- no test module imports from another: what several modules use lives in a support module (a name
  that does not start with ``test_``), under a public name.

Each rule is shown able to fail on a small suite written in tmp_path.
"""

from __future__ import annotations

import ast
import functools
import textwrap
from pathlib import Path

TESTS = Path(__file__).resolve().parent


@functools.cache  # both rules read the same trees
def _modules(root: Path) -> dict[str, ast.Module]:
    return {p.name: ast.parse(p.read_text(encoding="utf-8"), str(p)) for p in sorted(root.glob("*.py"))}


def _is_fixture(fn: ast.FunctionDef) -> bool:
    for decorator in fn.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Attribute) and target.attr == "fixture":
            return True
        if isinstance(target, ast.Name) and target.id == "fixture":
            return True
    return False


def fixtures_defined_twice(root: Path) -> list[str]:
    where: dict[str, list[str]] = {}
    for name, tree in _modules(root).items():
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and _is_fixture(node) and not node.name.startswith("_"):
                where.setdefault(node.name, []).append(name)
    return [
        f"fixture {fixture} is defined in {', '.join(modules)}; define it once (conftest.py) or name each its own"
        for fixture, modules in sorted(where.items())
        if len(modules) > 1
    ]


def _imported_module(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module]
    return []


def imports_of_test_modules(root: Path) -> list[str]:
    """Every import, anywhere in a module of ``tests/``, of a ``test_*`` module (``tests.test_x`` too)."""
    found = []
    for name, tree in _modules(root).items():
        for node in ast.walk(tree):
            for module in _imported_module(node):
                last = module.split(".")[-1]
                if last.startswith("test_") and module.split(".")[0] in (last, "tests"):
                    found.append(f"{name}:{node.lineno}: imports {last}")
    return sorted(found)


def test_each_fixture_is_defined_once() -> None:
    assert fixtures_defined_twice(TESTS) == []


def test_no_test_module_imports_another() -> None:
    assert imports_of_test_modules(TESTS) == [], "move what several modules share into a support module"


def _suite(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def test_a_fixture_defined_in_two_modules_is_found(tmp_path: Path) -> None:
    root = _suite(
        tmp_path,
        {
            "conftest.py": """
                import pytest


                @pytest.fixture(scope="module")
                def release(tmp_path_factory):
                    return tmp_path_factory.mktemp("r")
            """,
            "test_a.py": """
                import pytest


                @pytest.fixture
                def release(tmp_path):
                    return tmp_path


                @pytest.fixture(autouse=True)
                def _env(monkeypatch):
                    pass
            """,
            "test_b.py": """
                from pytest import fixture


                @fixture(autouse=True)
                def _env(monkeypatch):
                    pass
            """,
        },
    )
    assert fixtures_defined_twice(root) == [
        "fixture release is defined in conftest.py, test_a.py; define it once (conftest.py) or name each its own"
    ]


def test_an_import_of_another_test_module_is_found_wherever_it_is(tmp_path: Path) -> None:
    root = _suite(
        tmp_path,
        {
            "support.py": "X = 1\n",
            "test_a.py": "from support import X\n\n\ndef _helper():\n    return X\n",
            "test_b.py": """
                import test_a
                from tests.test_a import _helper


                def test_x():
                    from test_a import X

                    assert X == test_a.X == _helper()
            """,
        },
    )
    assert imports_of_test_modules(root) == [
        "test_b.py:2: imports test_a",
        "test_b.py:3: imports test_a",
        "test_b.py:7: imports test_a",
    ]


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="1" skipped="1" tests="4" time="95.5">
<testcase classname="tests.test_a" name="test_one" time="60.0" />
<testcase classname="tests.test_a.TestGroup" name="test_two[x]" time="20.0"><failure message="no" /></testcase>
<testcase classname="tests.test_b" name="test_three@test_b.py" time="30.0" />
<testcase classname="tests.test_b" name="test_four" time="0.0"><skipped message="gpu" /></testcase>
</testsuite></testsuites>
"""


def test_the_durations_summary_reads_the_junit_xml(tmp_path: Path) -> None:
    """benchmarks/suite_durations.py, which ends CI's log and makes docs/benchmarks.md's suite row."""
    import subprocess
    import sys

    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT, encoding="utf-8")
    script = TESTS.parent / "benchmarks" / "suite_durations.py"
    shown = subprocess.run(
        [sys.executable, str(script), str(junit)], capture_output=True, text=True, check=True
    )
    lines = shown.stdout.splitlines()
    assert lines[0] == (
        "suite: 4 tests, 1 failed, 0 errors, 1 skipped; wall 1 min 36 s, tests' own time summed 1 min 50 s"
    )
    assert lines[2:4] == [
        "      80.0 s     2 tests  tests/test_a.py",
        "      30.0 s     2 tests  tests/test_b.py",
    ]
    assert "      30.0 s  tests/test_b.py::test_three" in lines  # xdist's @group suffix taken off
    row = subprocess.run(
        [sys.executable, str(script), str(junit), "--row", "--workers", "3"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert row.startswith(
        "| the test command, `CI=true bash .ci/run` in a fresh clone | 4 tests (1 skipped, 1 failed)"
    )
    assert "pytest **1 min 36 s** on 3 workers; the slowest module tests/test_a.py 1 min 20 s" in row
