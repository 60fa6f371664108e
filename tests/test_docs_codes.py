"""The docs keep up with the code: every finding code releasekit can emit is named in docs/, and
each stage page's options tables list exactly the options its commands have.

Finding codes are collected by AST over ``releasekit/``: a string constant (or a module constant
naming one) in any of the places a finding's code is made —

- the first argument of ``Findings.add(...)``, ``Finding(...)`` and the checks' own ``add``;
- the keyword ``code=`` of any call, and the default of a parameter called ``code``;
- the argument in the ``code`` position of any releasekit function or class whose parameter is
  called ``code`` (``ServerFailed("SERVER_NOT_READY", ...)``, ``SignatureError(..., code=...)``);
- the value assigned to ``code``, ``codes`` (a check's declared codes) or a ``*_CODES`` name;
- a ``(CODE, message)`` pair, as the wheel checks return their doubts.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
CODE = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*$")
ADDERS = {"add", "Finding"}


def _codes_in(node: ast.AST) -> Iterator[str]:
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and CODE.match(n.value):
            yield n.value


def _code_positions(trees: dict[Path, ast.Module]) -> dict[str, int]:
    """Function and class name -> the position of its parameter called ``code`` (after self)."""
    found: dict[str, int] = {}
    for tree in trees.values():
        for n in ast.walk(tree):
            funcs: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
                funcs.append((n.name, n))
            elif isinstance(n, ast.ClassDef):
                funcs += [
                    (n.name, f) for f in n.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"
                ]
            for name, func in funcs:
                params = [a.arg for a in func.args.posonlyargs + func.args.args]
                if params and params[0] in ("self", "cls"):
                    params = params[1:]
                if "code" in params:
                    found[name] = params.index("code")
    return found


def _code_expressions(tree: ast.Module, positions: dict[str, int]) -> Iterator[ast.AST]:
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            func = n.func
            name = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else ""
            )
            yield from (kw.value for kw in n.keywords if kw.arg == "code")
            if name in positions and len(n.args) > positions[name]:
                yield n.args[positions[name]]
            elif name in ADDERS and n.args:
                yield n.args[0]
        elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
            args = n.args
            positional = args.posonlyargs + args.args
            pairs = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True))
            pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
            yield from (default for arg, default in pairs if arg.arg == "code")
        elif isinstance(n, ast.Assign | ast.AnnAssign) and n.value is not None:
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for target in targets:
                name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", "")
                if name in ("code", "codes") or name.endswith("CODES"):
                    yield n.value
        elif isinstance(n, ast.Tuple) and len(n.elts) == 2 and isinstance(n.elts[0], ast.Constant):
            message = n.elts[1]
            if isinstance(message, ast.JoinedStr) or (
                isinstance(message, ast.Constant) and isinstance(message.value, str) and " " in message.value
            ):
                yield n.elts[0]


def _module_constants(tree: ast.Module) -> dict[str, ast.AST]:
    out: dict[str, ast.AST] = {}
    for st in tree.body:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            out[st.targets[0].id] = st.value
        elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None:
            out[st.target.id] = st.value
    return out


def emitted_codes(package: Path) -> dict[str, set[str]]:
    """Every finding code the package can emit -> the files (relative to the package) that make it."""
    trees = {p: ast.parse(p.read_text(encoding="utf-8")) for p in sorted(package.rglob("*.py"))}
    positions = _code_positions(trees)
    out: dict[str, set[str]] = {}
    for path, tree in trees.items():
        constants = _module_constants(tree)
        for expr in _code_expressions(tree, positions):
            named = [constants[n.id] for n in ast.walk(expr) if isinstance(n, ast.Name) and n.id in constants]
            for code in [*_codes_in(expr), *(c for value in named for c in _codes_in(value))]:
                out.setdefault(code, set()).add(path.relative_to(package).as_posix())
    return out


def undocumented(package: Path, docs: Path) -> list[str]:
    """The codes ``package`` can emit that no ``docs/*.md`` names."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted(docs.glob("*.md")))
    return sorted(code for code in emitted_codes(package) if not re.search(rf"\b{code}\b", text))


def test_every_finding_code_is_in_the_docs() -> None:
    missing = undocumented(REPO / "releasekit", REPO / "docs")
    assert not missing, (
        "finding codes that no docs/*.md names (add a row to the stage's findings table):\n"
        + ("\n".join(missing))
    )


def test_the_collector_finds_releasekits_codes() -> None:
    """Each way releasekit makes a code is seen: a collector that found nothing would pass the test above."""
    found = emitted_codes(REPO / "releasekit")
    assert len(found) > 200
    for code in (
        "DUPLICATE_PR",  # a manifest check's codes = (...) and out.add(...)
        "NOTHING_EXAMINED",  # a module constant
        "SERVER_NOT_READY",  # ServerFailed(code, message)
        "SIGNATURE_INVALID",  # the default of SignatureError's code parameter
        "WHEEL_TAGS_UNDECLARED",  # a (code, message) pair
        "SUPERSEDED_PR_MERGED",  # code = "..." if ... else "..."
    ):
        assert code in found, code


PLANTED = """
from typing import Final
from releasekit.findings import Finding, Findings

NAMED: Final = "PLANTED_NAMED"
ROLES = {"a": "PLANTED_FROM_DICT"}


class Failed(Exception):
    def __init__(self, code: str, message: str) -> None:
        self.code = code


class Check:
    codes = ("PLANTED_DECLARED",)

    def run(self, found: Findings, role: str) -> list[tuple[str, str]]:
        found.add("PLANTED_ADDED", "a message")
        found.add(NAMED, "a message")
        Finding(code="PLANTED_KEYWORD", message="m")
        code = "PLANTED_THEN" if role else "PLANTED_ELSE"
        code = ROLES[role]
        if not code:
            raise Failed("PLANTED_RAISED", "a message")
        return [("PLANTED_PAIR", f"a doubt about {role}")]


def fail(message: str, *, code: str = "PLANTED_DEFAULT") -> None: ...
"""


def test_a_planted_code_missing_from_the_docs_is_reported(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "check.py").write_text(PLANTED, encoding="utf-8")
    planted = {
        "PLANTED_NAMED",
        "PLANTED_FROM_DICT",
        "PLANTED_DECLARED",
        "PLANTED_ADDED",
        "PLANTED_KEYWORD",
        "PLANTED_THEN",
        "PLANTED_ELSE",
        "PLANTED_RAISED",
        "PLANTED_PAIR",
        "PLANTED_DEFAULT",
    }
    assert set(emitted_codes(package)) == planted
    docs = tmp_path / "docs"
    docs.mkdir()
    table = "\n".join(f"| `{c}` | error | planted |" for c in sorted(planted - {"PLANTED_PAIR"}))
    (docs / "stage.md").write_text(
        "| code | severity | meaning |\n|---|---|---|\n" + table + "\n", encoding="utf-8"
    )
    assert undocumented(package, docs) == ["PLANTED_PAIR"]
    # A longer code that contains the missing one does not count as naming it.
    (docs / "other.md").write_text("`PLANTED_PAIR_TWO`\n", encoding="utf-8")
    assert undocumented(package, docs) == ["PLANTED_PAIR"]


# --- options: each command's table in its stage's page lists exactly the CLI's options -------------

# The page that documents each top-level command.
PAGES = {
    "manifest": "manifest.md",
    "plan": "plan.md",
    "audit": "plan.md",
    "build": "build.md",
    "demo": "build.md",
    "verify-provenance": "verify.md",
    "sign": "publish.md",
    "keys": "publish.md",
    "stage": "publish.md",
    "publish": "publish.md",
    "promote": "publish.md",
    "summary": "publish.md",
    "test": "test.md",
    "hygiene": "test.md",
    "matrix": "validate.md",
    "validate": "validate.md",
    "reproduce": "reproduce.md",
}


def _commands() -> Iterator[tuple[str, Any]]:
    from releasekit.cli import COMMANDS, stage_commands

    seen: set[str] = set()

    def walk(path: str, command: Any) -> Iterator[tuple[str, Any]]:
        subs = getattr(command, "commands", None)
        if subs is None:
            yield path, command
            return
        for name, sub in sorted(subs.items()):
            yield from walk(f"{path} {name}", sub)

    for name, module, _help in COMMANDS:
        command = stage_commands(module).get(name)
        if command is None:
            continue
        for path, leaf in walk(name, command):
            if path not in seen:
                seen.add(path)
                yield path, leaf


def cli_options(command: Any) -> set[str]:
    """Each argument (by metavar) and option (every spelling) the command takes, bar --help."""
    names: set[str] = set()
    for param in command.params:
        if param.name == "help" or getattr(param, "hidden", False):
            continue
        if param.param_type_name == "argument":
            names.add(param.metavar or param.name.upper())
        else:
            names.update(param.opts + param.secondary_opts)
    return names


def documented_options(page: str, path: str) -> set[str] | None:
    """The first column of the table that follows the line "`releasekit PATH`" in the page."""
    lines = page.splitlines()
    try:
        start = lines.index(f"`releasekit {path}`")
    except ValueError:
        return None
    names: set[str] = set()
    for line in lines[start + 1 :]:
        if not line.strip() and not names:
            continue
        if not line.startswith("|"):
            break
        first = line.split("|")[1]
        names.update(re.findall(r"`([^`]+)`", first))
    return names - {"argument / option"}


@pytest.mark.parametrize(
    ("path", "command"), list(_commands()), ids=lambda v: v if isinstance(v, str) else ""
)
def test_each_commands_options_are_in_its_page(path: str, command: Any) -> None:
    page = REPO / "docs" / PAGES[path.split()[0]]
    listed = documented_options(page.read_text(encoding="utf-8"), path)
    assert listed is not None, f"{page.name} has no options table for `releasekit {path}`"
    have = cli_options(command)
    assert listed == have, (
        f"{page.name}, `releasekit {path}`: missing {sorted(have - listed)}, extra {sorted(listed - have)}"
    )
