"""No module imports a private name from another module (docs/architecture.md, rule 10).

``from X import _name`` reaches into X's internals: what another module needs is public
there (or moves to where both can use it). Dunders (``__version__``) and ``from __future__``
are no private names. The scan covers the library, the tests and the benchmarks.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCANNED = ("releasekit", "tests", "benchmarks")


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_imports(root: Path, folders: tuple[str, ...] = SCANNED) -> dict[str, int]:
    """``path: module.name`` -> line, for every ``from module import _name`` under ``root``'s folders."""
    found: dict[str, int] = {}
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
                if not isinstance(node, ast.ImportFrom) or node.module == "__future__":
                    continue
                module = "." * node.level + (node.module or "")
                for alias in node.names:
                    if _is_private(alias.name):
                        found.setdefault(f"{rel}: {module}.{alias.name}", node.lineno)
    return found


def test_no_module_imports_a_private_name_from_another():
    found = private_imports(REPO)
    left = sorted(f"{k} (line {line})" for k, line in found.items())
    assert not left, "give these a public name where they are defined, or test through one:\n" + "\n".join(
        left
    )


def test_a_private_import_is_found(tmp_path):
    pkg = tmp_path / "releasekit"
    pkg.mkdir()
    (pkg / "a.py").write_text(
        "from __future__ import annotations\n"
        "from releasekit import __version__\n"
        "from releasekit.b import public, _helper\n"
        "from .c import _CONSTANT as C\n"
        "def f():\n    from releasekit.d import __all__, _late\n",
        encoding="utf-8",
    )
    assert private_imports(tmp_path, ("releasekit",)) == {
        "releasekit/a.py: releasekit.b._helper": 3,
        "releasekit/a.py: .c._CONSTANT": 4,
        "releasekit/a.py: releasekit.d._late": 6,
    }
