"""The artifact store behind the upload-artifact / download-artifact stand-ins (tests/act_actions/).

GitHub keeps a run's artifacts on its own servers; under ``act`` the stand-ins keep them in the
directory ``$RK_ARTIFACTS`` (one sub-directory per artifact name), with the semantics the
workflow relies on (actions/upload-artifact v4+ and download-artifact v4+):

- upload: ``path`` is one path or glob per line (``!`` excludes). The artifact's root is the
  least common ancestor of the search paths (a path up to its first glob segment); one plain
  file alone is stored under its own name. A name already uploaded in the run is an error, as
  is no file when ``if-no-files-found`` is ``error`` (``warn`` says so, ``ignore`` is silent).
- download: ``name`` extracts that artifact into ``path``; without a name, every artifact whose
  name matches ``pattern`` (a glob with ``{a,b}`` alternatives, as minimatch reads it) goes to
  ``path/<name>/``, or straight into ``path`` with ``merge-multiple``. A missing name is an error
  (the step fails, as on GitHub).
- digests: GitHub records an artifact's digest when a job uploads it, and download-artifact (v8:
  ``digest-mismatch: error`` by default) fails on bytes that differ. The upload keeps one sha256
  over the artifact's files (their paths and contents) in ``$RK_ARTIFACTS/.digests/<name>``; a
  download recomputes it and fails on a mismatch unless ``digest-mismatch`` says ``warn``/``off``.
  A test that prepares artifacts as a job of the run would upload them calls ``seal``.

Inputs come as environment variables (``INPUT_*``), set by the action.yml files. Run as
``python3 artifact_store.py upload|download``.
"""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import os
import shutil
import sys
from pathlib import Path

GLOB_CHARS = set("*?[")
DIGESTS = ".digests"


def _store() -> Path:
    root = os.environ.get("RK_ARTIFACTS", "")
    if not root:
        sys.exit("RK_ARTIFACTS is not set: the stand-in has nowhere to keep artifacts")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _search_path(pattern: str) -> Path:
    """The pattern up to its first segment with a glob character (what @actions/glob searches from)."""
    parts = Path(pattern).parts
    kept: list[str] = []
    for part in parts:
        if GLOB_CHARS & set(part):
            break
        kept.append(part)
    return Path(*kept) if kept else Path(".")


def _files_of(pattern: str) -> list[Path]:
    found: list[Path] = []
    for hit in sorted(glob.glob(pattern, recursive=True)) if GLOB_CHARS & set(pattern) else [pattern]:
        path = Path(hit)
        if path.is_dir():
            found.extend(p for p in sorted(path.rglob("*")) if p.is_file())
        elif path.is_file():
            found.append(path)
    return found


def _common_root(paths: list[Path]) -> Path:
    parts = [p.resolve().parts for p in paths]
    common: list[str] = []
    for column in zip(*parts, strict=False):
        if len(set(column)) != 1:
            break
        common.append(column[0])
    return Path(*common)


def artifact_digest(folder: Path) -> str:
    """One sha256 over an artifact's files: each one's path and content, in path order."""
    total = hashlib.sha256()
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        total.update(f.relative_to(folder).as_posix().encode() + b"\0")
        total.update(hashlib.sha256(f.read_bytes()).digest())
    return total.hexdigest()


def seal(store: Path, name: str) -> None:
    """Record the artifact ``name``'s digest as GitHub does when a job uploads it."""
    (store / DIGESTS).mkdir(parents=True, exist_ok=True)
    (store / DIGESTS / name).write_text(artifact_digest(store / name) + "\n", encoding="utf-8")


def _digest_ok(store: Path, name: str) -> bool:
    behaviour = os.environ.get("INPUT_DIGEST_MISMATCH", "") or "error"
    recorded = store / DIGESTS / name
    expected = recorded.read_text(encoding="utf-8").strip() if recorded.is_file() else ""
    if expected == artifact_digest(store / name) or behaviour == "off":
        return True
    message = f"digest of artifact {name} does not match the one recorded at its upload"
    if behaviour == "warn":
        print(f"::warning::{message}")
        return True
    print(f"::error::{message}")
    return False


def _braces(pattern: str) -> list[str]:
    """``{a,b}`` alternatives spelt out (one level, as the workflow uses them)."""
    head, brace, rest = pattern.partition("{")
    if not brace or "}" not in rest:
        return [pattern]
    inside, _, tail = rest.partition("}")
    return [alt for each in inside.split(",") for alt in _braces(head + each + tail)]


def upload() -> int:
    name = os.environ["INPUT_NAME"] or "artifact"
    patterns = _lines(os.environ["INPUT_PATH"])
    missing = os.environ.get("INPUT_IF_NO_FILES_FOUND", "warn") or "warn"
    include = [p for p in patterns if not p.startswith("!")]
    exclude = [p[1:] for p in patterns if p.startswith("!")]
    files: list[Path] = []
    for pattern in include:
        files.extend(f for f in _files_of(pattern) if f not in files)
    files = [f for f in files if not any(fnmatch.fnmatch(str(f), x) for x in exclude)]
    if not files:
        message = f"no files found at {', '.join(include)} for artifact {name}"
        if missing == "error":
            print(f"::error::{message}")
            return 1
        if missing == "warn":
            print(f"::warning::{message}")
        return 0
    searches = [_search_path(p) for p in include]
    if len(searches) > 1:
        root = _common_root(searches)
    elif len(files) == 1 and searches[0] == files[0]:
        root = files[0].resolve().parent
    else:
        root = searches[0].resolve()
    dest = _store() / name
    if dest.exists():
        print(f"::error::an artifact named {name} was already uploaded in this run")
        return 1
    for f in files:
        target = dest / f.resolve().relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, target)
    seal(_store(), name)
    print(f"uploaded {len(files)} file(s) as {name} (root {os.path.relpath(root)})")
    return 0


def _copy_tree(src: Path, dest: Path) -> int:
    count = 0
    for f in sorted(src.rglob("*")):
        if f.is_file():
            target = dest / f.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, target)
            count += 1
    return count


def download() -> int:
    store = _store()
    name = os.environ.get("INPUT_NAME", "")
    path = Path(os.environ.get("INPUT_PATH", "") or ".")
    if name:
        src = store / name
        if not src.is_dir():
            print(f"::error::Unable to download artifact(s): Artifact not found for name: {name}")
            return 1
        if not _digest_ok(store, name):
            return 1
        print(f"downloaded {_copy_tree(src, path)} file(s) of {name} into {path}")
        return 0
    pattern = os.environ.get("INPUT_PATTERN", "") or "*"
    merge = os.environ.get("INPUT_MERGE_MULTIPLE", "false").lower() == "true"
    alternatives = _braces(pattern)
    names = sorted(
        p.name
        for p in store.iterdir()
        if p.is_dir() and p.name != DIGESTS and any(fnmatch.fnmatch(p.name, alt) for alt in alternatives)
    )
    if not all(_digest_ok(store, each) for each in names):
        return 1
    for each in names:
        count = _copy_tree(store / each, path if merge else path / each)
        print(f"downloaded {count} file(s) of {each} into {path if merge else path / each}")
    if not names:
        print(f"no artifact matches {pattern}")
    return 0


if __name__ == "__main__":
    sys.exit({"upload": upload, "download": download}[sys.argv[1]]())
