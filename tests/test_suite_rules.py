"""Rules for the test suite itself (issue 33), checked on the syntax trees of ``tests/*.py``:

- one Docker policy: only ``conftest.py`` asks for the engine (``docker.from_env``), through
  ``_engine_or_skip`` (skip on a workstation, fail under CI=true); everything else takes the
  ``docker_client`` fixture or one made from it;
- every test that reaches the engine (a fixture that needs ``docker_client``, directly or through
  other fixtures of its module or of conftest) carries the ``docker`` marker, on itself or on its
  module, and a module that imports ``docker`` is marked as a whole, so ``-m "not docker"`` leaves
  no Docker test behind;
- no test writes ``os.environ`` itself (``monkeypatch.setenv``/``delenv``, or a
  ``pytest.MonkeyPatch.context()`` in a module fixture, restore what they change);
- a ``test_*.py`` module holds tests: helpers live in modules named otherwise;
- one CLI runner (issue 42): only ``cli_run.py`` spawns ``python -m releasekit`` or calls
  ``releasekit.cli.main``; a test takes ``invoke`` (in-process) or, where the process itself is
  the subject, ``run_cli``/``start_cli``/``releasekit_argv``.

Each rule is shown able to fail on a small suite written in tmp_path.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterable
from pathlib import Path

TESTS = Path(__file__).resolve().parent
POLICY_MODULE = "conftest.py"
RUNNER_MODULE = "cli_run.py"
# (module, fixture) that still spawn the CLI themselves: fixtures being reworked apart (issue 42:
# the demo release built once per run, one definition of each fixture); move them to cli_run then.
RUNNER_EXEMPT: frozenset[tuple[str, str]] = frozenset()
ENGINE_FIXTURE = "docker_client"
ENV_MUTATORS = frozenset({"pop", "update", "setdefault", "clear", "popitem", "__setitem__", "__delitem__"})


def _modules(root: Path) -> dict[str, ast.Module]:
    return {p.name: ast.parse(p.read_text(encoding="utf-8"), str(p)) for p in sorted(root.glob("*.py"))}


def _dotted(node: ast.expr) -> str:
    """``a.b.c`` for a Name/Attribute chain (calls are looked through), else ``""``."""
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _is_fixture(fn: ast.FunctionDef) -> bool:
    return any(_dotted(d) in ("pytest.fixture", "fixture") for d in fn.decorator_list)


def _params(fn: ast.FunctionDef) -> set[str]:
    return {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}


def _fixtures(tree: ast.Module) -> dict[str, set[str]]:
    """Each fixture defined at the module's top level and the fixtures it requests."""
    return {n.name: _params(n) for n in tree.body if isinstance(n, ast.FunctionDef) and _is_fixture(n)}


def _needing_engine(fixtures: dict[str, set[str]], known: set[str]) -> set[str]:
    """The fixtures that reach ``docker_client`` through ``fixtures``, starting from ``known``."""
    found = set(known)
    changed = True
    while changed:
        changed = False
        for name, requested in fixtures.items():
            if name not in found and requested & found:
                found.add(name)
                changed = True
    return found


def _marks_docker(exprs: Iterable[ast.expr]) -> bool:
    for expr in exprs:
        for node in ast.walk(expr):
            if isinstance(node, ast.Attribute) and _dotted(node) == "pytest.mark.docker":
                return True
    return False


def _module_marked(tree: ast.Module) -> bool:
    values = [
        n.value
        for n in tree.body
        if isinstance(n, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in n.targets)
    ]
    return _marks_docker(values)


def _tests(tree: ast.Module) -> list[ast.FunctionDef]:
    found = []
    for node in tree.body:
        members = node.body if isinstance(node, ast.ClassDef) and node.name.startswith("Test") else [node]
        found += [m for m in members if isinstance(m, ast.FunctionDef) and m.name.startswith("test_")]
    return found


def _imports_docker(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "docker" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "docker":
            return True
    return False


def engine_probes(root: Path) -> list[str]:
    """Calls of ``docker.from_env`` outside conftest: a second way to find (or miss) the engine."""
    problems = []
    for name, tree in _modules(root).items():
        if name == POLICY_MODULE:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _dotted(node.func).split(".")[-1] == "from_env":
                problems.append(
                    f"{name}:{node.lineno}: probes the engine itself; take the docker_client fixture"
                )
    return problems


def unmarked_docker_tests(root: Path) -> list[str]:
    modules = _modules(root)
    shared = _fixtures(modules[POLICY_MODULE]) if POLICY_MODULE in modules else {}
    shared_engine = _needing_engine(shared, {ENGINE_FIXTURE})
    problems = []
    for name, tree in modules.items():
        if not name.startswith("test_") or _module_marked(tree):
            continue
        if _imports_docker(tree):
            problems.append(f"{name}: imports docker but its pytestmark has no pytest.mark.docker")
        local = _fixtures(tree)
        # A fixture the module defines again replaces conftest's under that name.
        engine = _needing_engine(local, (shared_engine - set(local)) | {ENGINE_FIXTURE})
        for fn in _tests(tree):
            used = sorted(_params(fn) & engine)
            if used and not _marks_docker(fn.decorator_list):
                problems.append(
                    f"{name}:{fn.lineno}: {fn.name} needs {', '.join(used)} without the docker marker"
                )
    return problems


def _is_environ(node: ast.expr) -> bool:
    return _dotted(node) in ("os.environ", "environ")


def environment_writes(root: Path) -> list[str]:
    """Writes to the process environment that nothing restores (the runner restores all of it)."""
    problems: list[tuple[str, int]] = []
    for name, tree in _modules(root).items():
        if name == RUNNER_MODULE:
            continue
        for node in ast.walk(tree):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            elif isinstance(node, ast.Delete):
                targets = node.targets
            hit = any(isinstance(t, ast.Subscript) and _is_environ(t.value) for t in targets)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner, method = node.func.value, node.func.attr
                hit = (_is_environ(owner) and method in ENV_MUTATORS) or _dotted(node.func) in (
                    "os.putenv",
                    "os.unsetenv",
                )
            if hit:
                problems.append((name, node.lineno))
    return [
        f"{name}:{line}: writes os.environ; use monkeypatch.setenv/delenv" for name, line in sorted(problems)
    ]


def helpers_named_as_tests(root: Path) -> list[str]:
    return [
        f"{name}: a test_*.py module without tests; name the helper module otherwise"
        for name, tree in _modules(root).items()
        if name.startswith("test_") and not _tests(tree)
    ]


def _spawns_releasekit(node: ast.AST) -> bool:
    """A command line holding ``-m releasekit`` (``[sys.executable, "-m", "releasekit", ...]``)."""
    if not isinstance(node, (ast.List, ast.Tuple)):
        return False
    words = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
    return any(a == "-m" and b == "releasekit" for a, b in zip(words, words[1:], strict=False))


def _calls_main(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom) and node.module == "releasekit.cli":
        return any(a.name == "main" for a in node.names)
    return isinstance(node, ast.Call) and _dotted(node.func) in ("cli.main", "releasekit.cli.main")


def own_cli_runners(root: Path) -> list[str]:
    """Runs of the CLI outside ``cli_run.py``: a child ``python -m releasekit``, or ``main`` called."""
    problems: list[tuple[str, int, str]] = []
    for name, tree in _modules(root).items():
        if name == RUNNER_MODULE:
            continue
        exempt = [
            range(n.lineno, (n.end_lineno or n.lineno) + 1)
            for n in tree.body
            if isinstance(n, ast.FunctionDef) and (name, n.name) in RUNNER_EXEMPT
        ]
        for node in ast.walk(tree):
            if any(getattr(node, "lineno", 0) in span for span in exempt):
                continue
            if _spawns_releasekit(node):
                problems.append((name, node.lineno, "spawns python -m releasekit; use cli_run"))
            elif _calls_main(node):
                problems.append((name, node.lineno, "runs releasekit.cli.main itself; use cli_run.invoke"))
    return [f"{name}:{line}: {what}" for name, line, what in sorted(problems)]


def test_the_suite_keeps_its_rules() -> None:
    found = [
        *engine_probes(TESTS),
        *unmarked_docker_tests(TESTS),
        *environment_writes(TESTS),
        *helpers_named_as_tests(TESTS),
        *own_cli_runners(TESTS),
    ]
    assert found == []


def _suite(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text), encoding="utf-8")
    return root


CONFTEST = """
    import docker
    import pytest


    @pytest.fixture(scope="session")
    def docker_client():
        return docker.from_env()


    @pytest.fixture()
    def base_image(docker_client):
        return docker_client.images.get("base")
"""


def test_an_own_engine_probe_is_found_and_conftests_is_the_policy(tmp_path: Path) -> None:
    root = _suite(
        tmp_path,
        {
            "conftest.py": CONFTEST,
            "test_probe.py": """
                import docker
                import pytest

                pytestmark = pytest.mark.docker


                def test_x():
                    client = docker.from_env()
            """,
        },
    )
    assert engine_probes(root) == [
        "test_probe.py:9: probes the engine itself; take the docker_client fixture"
    ]


def test_a_docker_test_without_the_marker_is_found_through_its_fixtures(tmp_path: Path) -> None:
    root = _suite(
        tmp_path,
        {
            "conftest.py": CONFTEST,
            "test_unmarked.py": """
                import pytest


                @pytest.fixture(scope="module")
                def built(base_image):
                    return base_image


                def test_through_a_local_fixture(built):
                    pass


                @pytest.mark.docker
                def test_marked(docker_client):
                    pass


                def test_no_engine(tmp_path):
                    pass
            """,
            "test_imports.py": """
                import docker.errors


                def test_nothing():
                    pass
            """,
            "test_marked_module.py": """
                import docker
                import pytest

                pytestmark = [pytest.mark.docker, pytest.mark.slow]


                def test_y(base_image):
                    pass
            """,
        },
    )
    assert unmarked_docker_tests(root) == [
        "test_imports.py: imports docker but its pytestmark has no pytest.mark.docker",
        "test_unmarked.py:10: test_through_a_local_fixture needs built without the docker marker",
    ]


def test_environment_writes_are_found_and_monkeypatch_is_not(tmp_path: Path) -> None:
    root = _suite(
        tmp_path,
        {
            "test_env.py": """
                import os


                def test_writes(monkeypatch):
                    os.environ["A"] = "1"
                    os.environ.setdefault("B", "2")
                    os.environ.pop("C", None)
                    os.environ.update({"D": "4"})
                    del os.environ["E"]
                    monkeypatch.setenv("F", "6")
                    env = {**os.environ, "G": "7"}
                    env["H"] = "8"
                    assert os.environ.get("I") is None
            """,
        },
    )
    assert [p.split(":")[1] for p in environment_writes(root)] == ["6", "7", "8", "9", "10"]


def test_a_helper_named_like_tests_is_found(tmp_path: Path) -> None:
    root = _suite(
        tmp_path,
        {
            "test_support.py": "def build_image():\n    pass\n",
            "support.py": "def build_image():\n    pass\n",
            "test_real.py": "class TestThing:\n    def test_it(self):\n        pass\n",
        },
    )
    assert helpers_named_as_tests(root) == [
        "test_support.py: a test_*.py module without tests; name the helper module otherwise"
    ]


def test_a_runner_of_its_own_is_found_and_the_one_runner_is_not(tmp_path: Path) -> None:
    root = _suite(
        tmp_path,
        {
            "cli_run.py": """
                import subprocess
                import sys

                from releasekit.cli import main


                def run_cli(*args):
                    return subprocess.run([sys.executable, "-m", "releasekit", *args])
            """,
            "test_own.py": """
                import subprocess
                import sys

                from releasekit import cli
                from releasekit.cli import main


                def _cli(*args):
                    return subprocess.run(
                        [
                            sys.executable,
                            "-m",
                            "releasekit",
                            *args,
                        ]
                    )


                def test_inline():
                    subprocess.Popen((sys.executable, "-m", "releasekit", "--version"))
                    cli.main(["--version"])
                    subprocess.run([sys.executable, "-m", "pytest"])
            """,
        },
    )
    assert own_cli_runners(root) == [
        "test_own.py:6: runs releasekit.cli.main itself; use cli_run.invoke",
        "test_own.py:11: spawns python -m releasekit; use cli_run",
        "test_own.py:21: spawns python -m releasekit; use cli_run",
        "test_own.py:22: runs releasekit.cli.main itself; use cli_run.invoke",
    ]
