"""The one sha256-of-a-file helper, and no second copy of it in ``releasekit/``."""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

from releasekit.digests import CHUNK_BYTES, file_sha256

REPO = Path(__file__).resolve().parent.parent


def test_file_sha256_is_the_sha256_of_the_bytes_across_chunks(tmp_path):
    for size in (0, 1, CHUNK_BYTES, 2 * CHUNK_BYTES + 7):
        path = tmp_path / f"f{size}"
        path.write_bytes(bytes(i % 251 for i in range(size)))
        assert file_sha256(path) == hashlib.sha256(path.read_bytes()).hexdigest()


def file_hashers(root: Path) -> list[str]:
    """Functions that open a file for reading in binary and feed hashlib.sha256: a file-hash helper."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call)]
            sha = any(
                isinstance(c.func, ast.Attribute)
                and c.func.attr == "sha256"
                and isinstance(c.func.value, ast.Name)
                and c.func.value.id == "hashlib"
                for c in calls
            )
            opens = any(
                (isinstance(c.func, ast.Attribute) and c.func.attr == "open")
                or (isinstance(c.func, ast.Name) and c.func.id == "open")
                for c in calls
                if any(isinstance(a, ast.Constant) and a.value == "rb" for a in c.args)
            )
            if sha and opens:
                found.append(f"{path.relative_to(root).as_posix()}:{fn.name}")
    return found


def test_there_is_one_file_hash_helper():
    found = file_hashers(REPO / "releasekit")
    # demo/projects/ is the source of the demo's own components (their PEP 517 backend builds a
    # wheel's RECORD without releasekit installed), not releasekit code.
    assert [f for f in found if not f.startswith("demo/projects/")] == ["digests.py:file_sha256"]


def test_a_second_helper_is_found(tmp_path):
    (tmp_path / "copy.py").write_text(
        "import hashlib\n\ndef sha(p):\n    h = hashlib.sha256()\n"
        "    with p.open('rb') as f:\n        h.update(f.read())\n    return h.hexdigest()\n",
        encoding="utf-8",
    )
    assert file_hashers(tmp_path) == ["copy.py:sha"]
