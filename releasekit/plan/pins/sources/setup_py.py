"""``setup.py``, parsed with ``ast`` (never run, never searched as text): ``setup_requires`` =
build, ``install_requires``/``extras_require``/``tests_require`` = runtime, literal lists or
module-level names bound to them; a requirement file it opens (``open("requirements/cuda.txt")``)
is read as one."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from releasekit.plan.pins.interface import Found, InputFile, Scope

_SCOPES: dict[str, Scope] = {
    "setup_requires": "build",
    "install_requires": "runtime",
    "extras_require": "runtime",
    "tests_require": "runtime",
}
# Calls whose string argument may be a requirement file's path.
_OPENERS = (
    "open",
    "read_text",
    "Path",
    "join",
    "parse_requirements",
    "read_requirements",
    "fetch_requirements",
    "get_requirements",
)


def _setup_values(tree: ast.Module) -> dict[str, ast.expr]:
    names: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names[target.id] = node.value
    return names


def _string_items(node: ast.expr, names: dict[str, ast.expr], depth: int = 0) -> Iterator[ast.Constant]:
    if depth > 5:
        return
    if isinstance(node, ast.Name) and node.id in names:
        yield from _string_items(names[node.id], names, depth + 1)
    elif isinstance(node, ast.List | ast.Tuple | ast.Set):
        for elt in node.elts:
            if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                yield elt
            elif isinstance(elt, ast.Starred):
                yield from _string_items(elt.value, names, depth + 1)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        yield from _string_items(node.left, names, depth + 1)
        yield from _string_items(node.right, names, depth + 1)
    elif isinstance(node, ast.Dict):
        for value in node.values:
            yield from _string_items(value, names, depth + 1)


def _path_constant(node: ast.AST) -> str | None:
    """'requirements/x.txt' from a literal, a join of literals, or Path(...) / literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if (
        isinstance(node, ast.Call)
        and node.args
        and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args)
    ):
        return "/".join(str(a.value) for a in node.args if isinstance(a, ast.Constant))  # os.path.join / Path
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        left, right = _path_constant(node.left), _path_constant(node.right)
        if right is not None:
            return f"{left}/{right}" if left else right
    return None


class SetupPy:
    kind = "setup"

    def claims(self, path: str) -> bool:
        return path.rsplit("/", 1)[-1] == "setup.py"

    def read(self, source: InputFile) -> Iterator[Found]:
        try:
            tree = ast.parse(source.text)
        except SyntaxError:
            return
        names = _setup_values(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if func == "setup":
                for kw in node.keywords:
                    scope = _SCOPES.get(kw.arg or "")
                    if scope:
                        for const in _string_items(kw.value, names):
                            yield Found(source.path, const.lineno, str(const.value), scope)
            elif func in _OPENERS:
                receivers: list[ast.expr] = [node.func.value] if isinstance(node.func, ast.Attribute) else []
                for arg in [*node.args, *receivers]:
                    ref = _path_constant(arg)
                    if ref and ref.endswith((".txt", ".in")):
                        source.name_file(ref)


SOURCE = SetupPy()
