"""``audit pins``: every pinned package has the same version in every input that names it.

What is pinned: the manifest's ``pins`` and its wheel components' ``name==version``
(``flashinfer-python==0.6.14`` must be what the repository installs too; all scopes).

Release inputs are read from one commit's tree through git objects (``CommitTree``:
``git ls-tree`` + ``git cat-file --batch``, never a work tree), minus the manifest's
``pin_inputs.skip`` (recorded as skipped, with the reason); no input read at all is
``PINS_NOTHING_SCANNED``. Each requirement is found at its own file:line:

- requirement and constraint files: ``requirements*.txt``/``*.in``, ``*-requirements.txt``,
  ``constraints*.txt``, every ``.txt``/``.in`` in a folder named ``requirements``
  (``python/requirements/common.txt``), and any file a read file names with ``-r``/``-c``
  or that ``setup.py`` opens (``open("requirements/cuda.txt")``); ``build`` in the file
  name = build scope, else runtime. ``\\`` continuations are joined; ``#`` comments dropped;
- ``pyproject.toml`` (parsed as TOML): ``build-system.requires`` = build, project
  dependencies, optional dependencies and dependency groups = runtime, ``tool.pixi`` tables;
- ``setup.py`` (parsed with ``ast``, never run and never searched as text):
  ``setup_requires`` = build, ``install_requires``/``extras_require``/``tests_require`` =
  runtime, literal lists or module-level names bound to them;
- ``pixi.toml``: ``[dependencies]``, ``[pypi-dependencies]``, ``[host-dependencies]`` and
  ``[build-dependencies]`` (build), in features and targets too; ``name = "==0.1.11"`` or
  ``name = { version = "..." }``; a bare conda version ``0.1.12`` means ``==0.1.12``;
- Dockerfiles and GitHub workflow YAML (release scope): shell install commands
  (``pip``/``pip3``/``python -m pip``/``uv pip`` ``install``, ``uv add``) over ``\\``
  continuation lines and ``run: |`` blocks; each argument is reported on the line where it
  is written; plus ``ARG``/``ENV``/``env:`` version variables named after the package
  (``APACHE_TVM_FFI_VERSION=…``, ``TVM_FFI_VERSION: …``), and ``FROM`` image tags that name a
  pinned package's version (``FROM base:cu130-flashinfer-0.6.16``).

Versions compare by PEP 440 (``packaging``): ``==0.1.12.0`` is the pin 0.1.12. A
specifier set agrees only when it admits the pinned version and nothing else; one that
excludes it or admits others is ``PIN_MISMATCH``, no version at all ``PIN_UNPINNED``.
``git+…``, ``name @ URL`` / ``name@URL`` and pixi ``git``/``url`` tables are VCS/URL
dependencies. Other files (``.py`` modules, docs) are not read: a docstring naming an old
version is not a release input.
"""

from __future__ import annotations

import ast
import fnmatch
import posixpath
import re
import tomllib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from releasekit.errors import InputError
from releasekit.findings import Findings, Severity
from releasekit.git.runner import Git, GitFailed
from releasekit.git.tree import commit_files, read_files, resolve_commit
from releasekit.manifest.models import Manifest, Pin, PinInputSkip
from releasekit.manifest.path_patterns import PathPattern
from releasekit.records.plan_check import PinAuditResult, PinOccurrence, SkippedPinInput

Scope = Literal["build", "runtime", "release"]
# Vendored environments committed by mistake are not the project's inputs. ``build``/``dist``
# are: a commit holds no build output, and vLLM's requirements/build/cuda.txt is a real input.
_SKIP_DIRS = {
    ".git",
    ".venv",
    "venv",
    "node_modules",
    "__pycache__",
    "site-packages",
    ".tox",
}
_REQ_GLOBS = (
    "requirements*.txt",
    "requirements*.in",
    "*-requirements.txt",
    "constraints*.txt",
    "*-constraints.txt",
)
_VCS = re.compile(r"(?:git|hg|svn|bzr)\+[a-z]+://\S+")
_VAR_SPEC = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*===?\s*\$\{?[A-Za-z_][A-Za-z0-9_]*\}?$"
)
_INSTALL = re.compile(
    r"(?:\b(?:pip3?|pip3\.\d+)\s+install|\buv\s+pip\s+install|\buv\s+add|-m\s+pip\s+install)\b"
)
# pip options that take a value (the value is not a requirement).
_VALUE_OPTS = {
    "-i",
    "--index-url",
    "--extra-index-url",
    "-f",
    "--find-links",
    "-t",
    "--target",
    "--prefix",
    "--root",
    "--python",
    "--platform",
    "--python-version",
    "--implementation",
    "--abi",
    "--src",
    "--upgrade-strategy",
    "--progress-bar",
    "--cache-dir",
    "--log",
    "--trusted-host",
    "--config-settings",
    "-C",
    "--report",
    "--no-binary",
    "--only-binary",
    "--global-option",
    "--timeout",
    "--retries",
    "--group",
}
_FILE_OPTS = {"-r", "--requirement", "-c", "--constraint", "--constraints"}
_SHELL_SEPARATORS = {"&&", "||", ";", "|", "&"}


@dataclass(frozen=True)
class Found:
    """One requirement as a release input writes it."""

    file: str
    line: int
    text: str  # e.g. 'apache-tvm-ffi>=0.1.5,<=0.1.11', or a pixi 'name ==0.1.11'
    scope: Scope
    name: str | None = None  # set when the form is not PEP 508 (pixi, version variables)
    spec: str | None = None  # with ``name``: the specifier text ('' = none)
    url: str | None = None  # a URL/VCS dependency


@dataclass(frozen=True)
class Wanted:
    package: str
    version: str
    scopes: tuple[Scope, ...]
    origin: str  # "pin" or "wheel component NAME"


# --- finding the files ----------------------------------------------------------------


def _file_kind(rel: str) -> str | None:
    parts = rel.split("/")
    name = parts[-1]
    if name == "pyproject.toml":
        return "pyproject"
    if name == "pixi.toml":
        return "pixi"
    if name == "setup.py":
        return "setup"
    if any(fnmatch.fnmatch(name, g) for g in _REQ_GLOBS):
        return "requirements"
    if "requirements" in parts[:-1] and name.endswith((".txt", ".in")):
        return "requirements"
    if (
        name == "Dockerfile"
        or name.startswith("Dockerfile.")
        or name.endswith((".Dockerfile", ".dockerfile"))
        or name.endswith("Containerfile")
    ):
        return "dockerfile"
    if rel.startswith(".github/workflows/") and name.endswith((".yml", ".yaml")):
        return "workflow"
    return None


@dataclass
class CommitTree:
    """The files of one commit: their paths, and a reader of their contents (git objects)."""

    files: list[str]
    reader: Callable[[Iterable[str]], dict[str, bytes | None]]
    _cache: dict[str, bytes | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.fileset = frozenset(self.files)

    def prefetch(self, paths: Iterable[str]) -> None:
        missing = [p for p in paths if p not in self._cache]
        if missing:
            self._cache.update(self.reader(missing))

    def text(self, path: str) -> str | None:
        self.prefetch([path])
        data = self._cache.get(path)
        return None if data is None else data.decode("utf-8", errors="replace")


def release_inputs(files: Iterable[str]) -> list[tuple[str, str]]:
    """(path, kind) of every release input among ``files``, in path order."""
    found: list[tuple[str, str]] = []
    for rel in sorted(files):
        dirs = rel.split("/")[:-1]
        if any(d in _SKIP_DIRS for d in dirs):
            continue
        kind = _file_kind(rel)
        if kind:
            found.append((rel, kind))
    return found


def _resolve(files: frozenset[str], base_rel: str, ref: str) -> str | None:
    """A file named from another (``-r x.txt``, ``open("requirements/x.txt")``), relative to the repo."""
    ref = ref.strip().strip("'\"")
    if not ref or "$" in ref or "://" in ref or ref.startswith("/"):
        return None
    for candidate in (posixpath.join(posixpath.dirname(base_rel), ref), ref):
        rel = posixpath.normpath(candidate)
        if not rel.startswith("../") and rel in files:
            return rel
    return None


def _req_scope(rel: str) -> Scope:
    return "build" if "build" in rel.rsplit("/", 1)[-1] else "runtime"


# --- readers, one per kind of input -----------------------------------------------------


def _strip_comment(line: str) -> str:
    # A '#' that starts a comment follows whitespace or starts the line (URLs keep their fragments).
    match = re.search(r"(^|\s)#", line)
    return line[: match.start()] if match else line


def _logical_lines(lines: list[str], strip_comments: bool = True) -> Iterator[list[tuple[int, str]]]:
    """Physical lines joined at a trailing backslash: [(lineno, text without the backslash)]."""
    current: list[tuple[int, str]] = []
    for lineno, raw in enumerate(lines, start=1):
        text = _strip_comment(raw) if strip_comments else raw
        stripped = text.rstrip()
        if stripped.endswith("\\"):
            current.append((lineno, stripped[:-1] + " "))
            continue
        current.append((lineno, text))
        yield current
        current = []
    if current:
        yield current


def _tokens(logical: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Shell-ish words of a logical line, each with the line it starts on (quotes removed)."""
    out: list[tuple[int, str]] = []
    for lineno, text in logical:
        for m in re.finditer(r"\"[^\"]*\"|'[^']*'|[^\s\"']+(?:\"[^\"]*\"|'[^']*'|[^\s\"']*)*", text):
            word = m.group(0)
            if len(word) >= 2 and word[0] == word[-1] and word[0] in "\"'":
                word = word[1:-1]
            else:
                word = word.replace('"', "").replace("'", "")
            out.append((lineno, word))
    return out


def _read_requirements(
    root: frozenset[str], rel: str, lines: list[str], scope: Scope, queue: list[str]
) -> Iterator[Found]:
    for logical in _logical_lines(lines):
        words = _tokens(logical)
        if not words:
            continue
        first = words[0][1]
        if first in _FILE_OPTS or re.match(r"^(-r|-c|--requirement=|--constraint=)\S", first):
            ref = (
                words[1][1]
                if first in _FILE_OPTS and len(words) > 1
                else re.sub(r"^(-r|-c|--requirement=|--constraint=)", "", first)
            )
            target = _resolve(root, rel, ref)
            if target:
                queue.append(target)
            continue
        if first in ("-e", "--editable"):
            if len(words) > 1:
                yield Found(rel, words[1][0], words[1][1], scope)
            continue
        if first.startswith("-"):
            continue  # --index-url and other options
        text = " ".join(w for _, w in words)
        text = re.split(r"\s--?[a-z]", " " + text)[0].strip()  # per-requirement options (--hash=...)
        yield Found(rel, words[0][0], text, scope)


def _install_words(
    logical: list[tuple[int, str]], root: frozenset[str], rel: str, queue: list[str]
) -> Iterator[tuple[int, str]]:
    """The requirement arguments of every install command of a shell logical line."""
    joined = " ".join(text for _, text in logical)
    if not _INSTALL.search(joined):
        return
    words = _tokens(logical)
    i = 0
    while i < len(words):
        # Find the next install verb.
        w = words[i][1]
        nxt = words[i + 1][1] if i + 1 < len(words) else ""
        if (
            w in ("install", "add")
            and i > 0
            and words[i - 1][1] in ("pip", "pip3", "uv")
            or re.fullmatch(r"pip3\.\d+", words[i - 1][1] if i else "")
        ) or (w == "pip" and nxt == "install" and i > 0 and words[i - 1][1] == "-m"):
            if w == "pip":
                i += 1
            i += 1
            while i < len(words) and words[i][1] not in _SHELL_SEPARATORS:
                lineno, arg = words[i]
                if arg.endswith((";", "&&")):
                    arg = arg.rstrip(";&")
                    if arg:
                        yield lineno, arg
                    break
                if arg in _FILE_OPTS and i + 1 < len(words):
                    target = _resolve(root, rel, words[i + 1][1])
                    if target:
                        queue.append(target)
                    i += 2
                    continue
                if arg in _VALUE_OPTS:
                    i += 2
                    continue
                if (
                    arg.startswith("-")
                    or arg in (".", "..")
                    or arg.startswith(("./", "../", "/"))
                    or arg.endswith((".whl", ".tar.gz"))
                    and "@" not in arg
                ):
                    i += 1
                    continue
                yield lineno, arg
                i += 1
        i += 1


def _read_shell(
    root: frozenset[str], rel: str, kind: str, lines: list[str], queue: list[str]
) -> Iterator[Found]:
    cleaned = []
    for raw in lines:
        text = raw
        if kind == "workflow":
            text = re.sub(r"^(\s*)(?:-\s+)?run:\s*[|>]?[-+]?\s*", r"\1", text)
        cleaned.append(text)
    for logical in _logical_lines(cleaned):
        for lineno, arg in _install_words(logical, root, rel, queue):
            yield Found(rel, lineno, arg, "release")


def _quoted_line(lines: list[str], text: str, start: int = 0) -> int:
    for i in range(start, len(lines)):
        stripped = lines[i].lstrip()
        if stripped.startswith("#"):
            continue
        if f'"{text}"' in lines[i] or f"'{text}'" in lines[i]:
            return i + 1
    return 1


def _read_pyproject(rel: str, lines: list[str], data: dict[str, Any]) -> Iterator[Found]:
    groups: list[tuple[Scope, list[Any]]] = [
        ("build", list(data.get("build-system", {}).get("requires", [])))
    ]
    project = data.get("project", {})
    groups.append(("runtime", list(project.get("dependencies", []))))
    for extra in (project.get("optional-dependencies") or {}).values():
        groups.append(("runtime", list(extra)))
    for group in (data.get("dependency-groups") or {}).values():
        groups.append(("runtime", [g for g in group if isinstance(g, str)]))
    for scope, reqs in groups:
        for req in reqs:
            if isinstance(req, str):
                yield Found(rel, _quoted_line(lines, req), req, scope)
    pixi = data.get("tool", {}).get("pixi")
    if isinstance(pixi, dict):
        yield from _read_pixi(rel, lines, pixi, ("tool", "pixi"))


_PIXI_TABLES = {
    "dependencies": "runtime",
    "pypi-dependencies": "runtime",
    "host-dependencies": "build",
    "build-dependencies": "build",
}


def _pixi_tables(
    data: dict[str, Any], prefix: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], Scope, dict[str, Any]]]:
    for key, scope in _PIXI_TABLES.items():
        if isinstance(data.get(key), dict):
            yield (*prefix, key), scope, data[key]  # type: ignore[misc]
    for holder in ("feature", "target", "environments"):
        sub = data.get(holder)
        if isinstance(sub, dict):
            for name, table in sub.items():
                if isinstance(table, dict):
                    yield from _pixi_tables(table, (*prefix, holder, name))
            if holder == "feature":
                for name, table in sub.items():
                    if isinstance(table, dict) and isinstance(table.get("target"), dict):
                        for tname, ttable in table["target"].items():
                            if isinstance(ttable, dict):
                                yield from _pixi_tables(ttable, (*prefix, holder, name, "target", tname))


def _header_matches(header: str, path: tuple[str, ...]) -> bool:
    parts = [p.strip().strip("\"'") for p in re.findall(r"\"[^\"]*\"|'[^']*'|[^.]+", header)]
    return tuple(parts) == path


def _key_line(lines: list[str], path: tuple[str, ...], key: str) -> int:
    header: str | None = None
    for i, raw in enumerate(lines):
        stripped = raw.strip()
        m = re.match(r"^\[\s*([^\[\]]+?)\s*\]", stripped)
        if m:
            header = m.group(1)
            continue
        if (
            header is not None
            and _header_matches(header, path)
            and re.match(rf"^[\"']?{re.escape(key)}[\"']?\s*=", stripped)
        ):
            return i + 1
    return 1


def _read_pixi(
    rel: str, lines: list[str], data: dict[str, Any], prefix: tuple[str, ...] = ()
) -> Iterator[Found]:
    for path, scope, table in _pixi_tables(data, prefix):
        for name, value in table.items():
            line = _key_line(lines, path, name)
            if isinstance(value, dict):
                url = value.get("git") or value.get("url")
                if url:
                    yield Found(rel, line, f"{name} @ {url}", scope, name=name, spec="", url=str(url))
                    continue
                if value.get("path"):
                    continue
                spec = value.get("version", "")
            else:
                spec = str(value)
            yield Found(rel, line, f"{name} {spec}".strip(), scope, name=name, spec=_pixi_spec(str(spec)))


def _pixi_spec(spec: str) -> str:
    spec = spec.strip()
    if spec in ("", "*"):
        return ""
    parts = []
    for part in spec.split(","):
        part = part.strip()
        parts.append(f"=={part}" if re.match(r"^[0-9]", part) else part)
    return ",".join(parts)


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


def _read_setup(root: frozenset[str], rel: str, text: str, queue: list[str]) -> Iterator[Found]:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return
    names = _setup_values(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = (
            node.func.attr
            if isinstance(node.func, ast.Attribute)
            else node.func.id
            if isinstance(node.func, ast.Name)
            else ""
        )
        if func == "setup":
            for kw in node.keywords:
                scope: Scope | None = {
                    "setup_requires": "build",
                    "install_requires": "runtime",
                    "extras_require": "runtime",
                    "tests_require": "runtime",
                }.get(kw.arg or "")  # type: ignore[assignment]
                if scope:
                    for const in _string_items(kw.value, names):
                        yield Found(rel, const.lineno, str(const.value), scope)
        elif func in (
            "open",
            "read_text",
            "Path",
            "join",
            "parse_requirements",
            "read_requirements",
            "fetch_requirements",
            "get_requirements",
        ):
            receivers: list[ast.expr] = [node.func.value] if isinstance(node.func, ast.Attribute) else []
            for arg in [*node.args, *receivers]:
                ref = _path_constant(arg)
                if ref and ref.endswith((".txt", ".in")):
                    target = _resolve(root, rel, ref)
                    if target:
                        queue.append(target)


# --- judging ------------------------------------------------------------------------------


def _name_spec(found: Found) -> tuple[str, str, str | None] | None:
    """(name, specifier, url) of a requirement, or None when it names no package."""
    if found.name is not None:
        return found.name, found.spec or "", found.url
    text = found.text.strip().rstrip(",")
    if _VCS.match(text):
        egg = re.search(r"[#&]egg=([A-Za-z0-9._-]+)", text)
        return (egg.group(1) if egg else "", "", text)
    var = _VAR_SPEC.match(text)
    if var:
        return var.group("name"), "==${var}", None
    try:
        req = Requirement(text)
    except InvalidRequirement:
        return None
    return req.name, str(req.specifier), req.url


def _agrees(spec: str, version: str) -> tuple[bool, str]:
    """(agrees, why not): the specifier admits the pinned version and nothing else."""
    if spec == "==${var}":
        return True, ""  # a version variable: compared where it is set
    if not spec:
        return False, "unpinned"
    try:
        specs = SpecifierSet(spec)
        pinned = Version(version)
    except (InvalidSpecifier, InvalidVersion):
        return spec.replace(" ", "") in (f"=={version}", f"==={version}"), "other version"
    if not specs.contains(pinned, prereleases=True):
        return False, "excludes the pinned version"
    for s in specs:
        if s.operator == "===" and s.version == version:
            return True, ""
        if s.operator == "==" and "*" not in s.version:
            try:
                if Version(s.version) == pinned:
                    return True, ""
            except InvalidVersion:
                pass
    return False, "admits other versions"


def _var_names(package: str) -> set[str]:
    words = [w.upper() for w in re.split(r"[-_.]+", package) if w]
    names = set()
    for start in range(len(words)):
        stem = "_".join(words[start:])
        if start and len(words) - start < 2 and len(stem) < 4:
            continue  # "FFI_VERSION" alone is too generic to be this package
        names.update({f"{stem}_VERSION", f"{stem}_VER"})
    return names


def _wanted(manifest: Manifest) -> list[Wanted]:
    out = [Wanted(p.package, p.version, tuple(p.scopes), "pin") for p in manifest.pins]
    pinned = {canonicalize_name(p.package) for p in manifest.pins}
    for name, comp in manifest.wheel_components().items():
        try:
            req = Requirement(comp.requirement)
        except InvalidRequirement:
            continue
        exact = [s.version for s in req.specifier if s.operator in ("==", "===")]
        if exact and canonicalize_name(req.name) not in pinned:
            out.append(Wanted(req.name, exact[0], ("build", "runtime", "release"), f"wheel component {name}"))
    return out


def _skip_reason(rel: str, skips: list[tuple[PathPattern, str]]) -> tuple[str, str] | None:
    for pattern, reason in skips:
        if pattern.matches(rel):
            return pattern.pattern, reason
    return None


def audit_pins(
    manifest: Manifest,
    tree: CommitTree,
    *,
    repo: str,
    commit: str,
    component: str | None = None,
    skip: list[PinInputSkip] | None = None,
) -> PinAuditResult:
    """Audit the pins in the release inputs of one commit's tree (``CommitTree``), minus ``skip``."""
    findings = Findings()
    occurrences: list[PinOccurrence] = []
    wanted = _wanted(manifest)
    skips = [(PathPattern(p), s.reason) for s in skip or [] for p in s.paths]
    where = {"component": component} if component else {}
    skipped, pending = _partition(tree, skips)
    tree.prefetch(rel for rel, _ in pending)  # one cat-file for every input found by name
    done, requirements = _read_inputs(tree, pending, skips, skipped, wanted, findings, occurrences, where)
    _check_requirements(manifest, requirements, wanted, findings, occurrences)
    _report_coverage(tree, commit, wanted, done, skipped, findings, occurrences, where)
    if component:
        for finding in findings:
            finding.location.component = component
    occurrences.sort(key=lambda o: (o.file, o.line, o.package))
    return PinAuditResult(
        repo=repo,
        component=component,
        commit=commit,
        files_scanned=len(done),
        files=sorted(done),
        skipped=sorted(skipped.values(), key=lambda s: s.file),
        occurrences=occurrences,
        passed=findings.passed,
        findings=findings,
    )


def _partition(
    tree: CommitTree, skips: list[tuple[PathPattern, str]]
) -> tuple[dict[str, SkippedPinInput], list[tuple[str, str]]]:
    """(skipped, pending): the skip list is applied before any blob is read, so a skipped input costs nothing."""
    skipped: dict[str, SkippedPinInput] = {}
    pending: list[tuple[str, str]] = []
    for rel, kind in release_inputs(tree.files):
        out_of_scope = _skip_reason(rel, skips)
        if out_of_scope:
            skipped[rel] = SkippedPinInput(file=rel, pattern=out_of_scope[0], reason=out_of_scope[1])
        else:
            pending.append((rel, kind))
    return skipped, pending


def _read_inputs(
    tree: CommitTree,
    pending: list[tuple[str, str]],
    skips: list[tuple[PathPattern, str]],
    skipped: dict[str, SkippedPinInput],
    wanted: list[Wanted],
    findings: Findings,
    occurrences: list[PinOccurrence],
    where: dict[str, str],
) -> tuple[set[str], list[Found]]:
    """(files read, requirements found): inputs found by name first, then the files they name (-r, open())."""
    queue: list[str] = []
    done: set[str] = set()
    requirements: list[Found] = []
    while pending or queue:
        if pending:
            rel, kind = pending.pop(0)
        else:
            rel, kind = queue.pop(0), "requirements"
        if rel in done or rel in skipped:
            continue
        out_of_scope = _skip_reason(rel, skips)
        if out_of_scope:  # named by another input (-r, open()), but out of scope
            skipped[rel] = SkippedPinInput(file=rel, pattern=out_of_scope[0], reason=out_of_scope[1])
            continue
        done.add(rel)
        text = tree.text(rel)
        if text is None:
            findings.add(
                "PIN_INPUT_UNREADABLE",
                f"{rel}: its blob is not in the repository; its pins were not checked",
                file=rel,
                **where,
            )
            continue
        requirements.extend(
            _read_input(tree.fileset, rel, kind, text, queue, wanted, findings, occurrences, where)
        )
    return done, requirements


def _read_input(
    files: frozenset[str],
    rel: str,
    kind: str,
    text: str,
    queue: list[str],
    wanted: list[Wanted],
    findings: Findings,
    occurrences: list[PinOccurrence],
    where: dict[str, str],
) -> list[Found]:
    """One input's requirements by its kind; shell inputs also record their version variables and FROM tags."""
    lines = text.splitlines()
    if kind == "requirements":
        return list(_read_requirements(files, rel, lines, _req_scope(rel), queue))
    if kind in ("pyproject", "pixi"):
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            findings.add(
                "PIN_INPUT_UNREADABLE",
                f"{rel} is not valid TOML ({exc}); its pins were not checked",
                file=rel,
                **where,
            )
            return []
        return list(
            _read_pyproject(rel, lines, data) if kind == "pyproject" else _read_pixi(rel, lines, data)
        )
    if kind == "setup":
        return list(_read_setup(files, rel, text, queue))
    found = list(_read_shell(files, rel, kind, lines, queue))
    _version_variables(rel, kind, lines, wanted, findings, occurrences)
    if kind == "dockerfile":
        _from_tags(rel, lines, wanted, findings, occurrences)
    return found


def _check_requirements(
    manifest: Manifest,
    requirements: list[Found],
    wanted: list[Wanted],
    findings: Findings,
    occurrences: list[PinOccurrence],
) -> None:
    """Compare each requirement with its pin; a URL/VCS one is a finding only when the policy forbids them."""
    by_name = {canonicalize_name(w.package): w for w in wanted}
    for found in requirements:
        parsed = _name_spec(found)
        if parsed is None:
            continue
        name, spec, url = parsed
        if url is not None:
            if manifest.policy.forbid_vcs_dependencies:
                findings.add(
                    "VCS_DEPENDENCY",
                    f"VCS/URL dependency in a release input: {found.text[:120]}",
                    file=found.file,
                    line=found.line,
                )
            continue
        want = by_name.get(canonicalize_name(name)) if name else None
        if want is None or found.scope not in want.scopes:
            continue
        ok, why = _agrees(spec, want.version)
        _record(findings, occurrences, found, want, spec, ok, why)


def _report_coverage(
    tree: CommitTree,
    commit: str,
    wanted: list[Wanted],
    done: set[str],
    skipped: dict[str, SkippedPinInput],
    findings: Findings,
    occurrences: list[PinOccurrence],
    where: dict[str, str],
) -> None:
    """An audit that read nothing fails, and a pin no input names is said (info): silence is not agreement."""
    if not done:
        findings.add(
            "PINS_NOTHING_SCANNED",
            f"no release input was read at {commit[:12]} ({len(tree.files)} files in the tree, "
            f"{len(skipped)} inputs skipped as out of scope): the pins were checked nowhere",
            commit=commit,
            **where,
        )
    seen = {canonicalize_name(o.package) for o in occurrences}
    for want in wanted:
        if canonicalize_name(want.package) not in seen:
            origin = "" if want.origin == "pin" else f" ({want.origin})"
            findings.add(
                "PIN_NOT_FOUND",
                f"{want.package}=={want.version}{origin} is not named in any release input "
                f"at {commit[:12]} ({len(done)} read)",
                severity=Severity.info,
                commit=commit,
                **where,
            )


# A tag's version: release segments, then pre/post/dev parts (0.6.16, 2.5.0.post20260810, 1.0rc1).
_TAG_VERSION = r"v?(?P<version>[0-9]+(?:\.[0-9]+)+(?:[.]?(?:a|b|rc|post|dev)[0-9]+)*)"


def _tag_aliases(package: str) -> list[str]:
    """How an image tag may name a package: its name, without a trailing python/py, its last words."""
    words = [w for w in re.split(r"[-_.]+", canonicalize_name(package)) if w]
    aliases = {"-".join(words)}
    if len(words) > 1 and words[-1] in ("python", "py"):
        aliases.add("-".join(words[:-1]))
    for start in range(1, len(words) - 1):
        aliases.add("-".join(words[start:]))
    return sorted(aliases, key=len, reverse=True)


def _from_tags(
    rel: str,
    lines: list[str],
    wanted: list[Wanted],
    findings: Findings,
    occurrences: list[PinOccurrence],
) -> None:
    """``FROM image:flashinfer-0.6.16``: a base image tag naming a pinned package's version is a pin input."""
    for lineno, raw in enumerate(lines, start=1):
        m = re.match(r"^\s*FROM\s+(?:--\S+\s+)*(?P<image>\S+)", _strip_comment(raw), re.IGNORECASE)
        if not m:
            continue
        image = m.group("image").split("@", 1)[0]
        last = image.rsplit("/", 1)[-1]
        if ":" not in last or "$" in last:
            continue  # no tag, or a variable (checked where the variable is set)
        tag = last.split(":", 1)[1].lower()
        for want in wanted:
            if "release" not in want.scopes:
                continue
            for alias in _tag_aliases(want.package):
                name = "[-_.]".join(re.escape(w) for w in alias.split("-"))
                hit = re.search(rf"(?:^|[-_.]){name}[-_]?{_TAG_VERSION}(?=$|[-_+])", tag)
                if hit is None:
                    continue
                value = hit.group("version")
                try:
                    ok = Version(value) == Version(want.version)
                except InvalidVersion:
                    ok = value == want.version
                found = Found(rel, lineno, f"FROM {m.group('image')}", "release")
                _record(findings, occurrences, found, want, f"FROM tag {tag}", ok, "other version")
                break


def _version_variables(
    rel: str,
    kind: str,
    lines: list[str],
    wanted: list[Wanted],
    findings: Findings,
    occurrences: list[PinOccurrence],
) -> None:
    for lineno, raw in enumerate(lines, start=1):
        line = _strip_comment(raw)
        for want in wanted:
            if "release" not in want.scopes:
                continue
            for var in _var_names(want.package):
                m = re.search(rf"(?:^|\s|-\s*){var}\s*(?:=|:)\s*[\"']?([A-Za-z0-9.+!_-]+)", line)
                if m and (kind == "workflow" or re.match(r"\s*(ARG|ENV)\b", line)):
                    value = m.group(1)
                    try:
                        ok = Version(value) == Version(want.version)
                    except InvalidVersion:
                        ok = value == want.version
                    found = Found(rel, lineno, f"{var}={value}", "release")
                    _record(findings, occurrences, found, want, f"{var}={value}", ok, "other version")


def _record(
    findings: Findings,
    occurrences: list[PinOccurrence],
    found: Found,
    want: Wanted,
    spec: str,
    agrees: bool,
    why: str,
) -> None:
    expected = f"=={want.version}"
    shown = spec
    if spec == "==${var}":
        shown = found.text[len(re.split(r"[=<>!~\[]", found.text, maxsplit=1)[0]) :].strip()
    occurrences.append(
        PinOccurrence(
            file=found.file,
            line=found.line,
            package=want.package,
            found=shown,
            expected=expected,
            agrees=agrees,
            scope=found.scope,
        )
    )
    if agrees:
        return
    source = "" if want.origin == "pin" else f" ({want.origin})"
    if not spec:
        findings.add(
            "PIN_UNPINNED",
            f"{want.package} is named without a version; the release pins {want.package}{expected}{source}",
            file=found.file,
            line=found.line,
        )
    else:
        findings.add(
            "PIN_MISMATCH",
            f"{want.package} {shown} {why}: the release pins {want.package}{expected}{source}",
            file=found.file,
            line=found.line,
        )


def commit_tree(git: Git, commit: str) -> CommitTree:
    """The files of ``commit`` in ``git``'s repository, read through git objects on demand."""
    return CommitTree(commit_files(git, commit), lambda paths: read_files(git, commit, paths))


def _local_repository(directory: Path) -> Git:
    """A repository on disk named by the user (a work tree's top or a bare repository), read in place."""
    if not directory.is_dir():
        raise InputError(f"--repo {directory} is not a directory")
    git = Git(directory)
    top = directory.resolve()
    for question in ("--show-toplevel", "--absolute-git-dir"):
        try:
            answer = git.run("rev-parse", question).strip()
        except GitFailed:
            continue
        if answer and Path(answer).resolve() == top:
            return git
    raise InputError(
        f"--repo {directory} is not a git repository (pins are read from a commit's tree through git objects)"
    )


def pins_service(
    manifest: Manifest,
    repo: Path,
    *,
    rev: str | None = None,
    component: str | None = None,
    locked_commit: str | None = None,
) -> PinAuditResult:
    """``audit pins``: the pins in ``rev`` (default HEAD, or the lock's commit) of a local repository."""
    skip: list[PinInputSkip] = []
    if component is not None:
        comp = manifest.git_components().get(component)
        if comp is None:
            raise InputError(f"--component {component!r} is not a git component of the manifest")
        skip = comp.pin_inputs.skip if comp.pin_inputs else []
    git = _local_repository(repo)
    commit = resolve_commit(git, rev or locked_commit or "HEAD", f"--repo {repo}")
    if locked_commit and commit != locked_commit:
        raise InputError(f"--commit {rev} is {commit[:12]}, not the locked commit {locked_commit[:12]}")
    return audit_pins(
        manifest, commit_tree(git, commit), repo=str(repo), commit=commit, component=component, skip=skip
    )


__all__ = ["CommitTree", "Pin", "audit_pins", "commit_tree", "pins_service", "release_inputs"]
