"""``audit pins``: every pinned package has the same version in every input that names it.

Release inputs scanned (relative to ``--repo``): ``pyproject.toml`` (build-system
requires = build scope; everything else = runtime), ``requirements*.txt``/``*.in`` and
``constraints*.txt`` (``build`` in the name = build scope, else runtime), Dockerfiles
(``ARG``/``ENV`` version variables and ``pip install`` lines; release scope) and
GitHub workflow YAML (release scope). A pin is checked only in the scopes it lists.

Recognised forms: ``name==1.2``, ``name>=1`` (disagrees: not exactly the pin),
``name`` without a version (disagrees: unpinned) and version variables whose name is
the package's (or its last words'): ``APACHE_TVM_FFI_VERSION=…``, ``TVM_FFI_VERSION: …``.
VCS/URL requirements (``git+…``, ``name @ https://…``) in these files are findings.
"""

from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path
from typing import Literal

from packaging.utils import canonicalize_name

from releasekit.errors import InputError
from releasekit.findings import Findings, Severity
from releasekit.manifest.models import Manifest, Pin
from releasekit.records.plan_check import PinAuditResult, PinOccurrence

Scope = Literal["build", "runtime", "release"]
_SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", "site-packages", ".tox", "build", "dist"}
_REQ_GLOBS = ("requirements*.txt", "requirements*.in", "*-requirements.txt", "constraints*.txt")
# A version may be a shell/Docker variable (``==${TVM_FFI_VERSION}``): the variable's own
# definition is what gets compared, where it is set.
_SPEC = r"(?:===|==|>=|<=|~=|!=|>|<)\s*(?:\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|[A-Za-z0-9.*+!_-]+)"
_VCS = re.compile(r"(?:git|hg|svn|bzr)\+[a-z]+://\S+|(?<![A-Za-z0-9_.-])[A-Za-z0-9][A-Za-z0-9._-]*(?:\[[^\]]*\])?\s+@\s+(?:https?|file|ssh)://\S+")


def _file_kind(rel: str) -> str | None:
    name = rel.rsplit("/", 1)[-1]
    if name == "pyproject.toml":
        return "pyproject"
    if any(fnmatch.fnmatch(name, g) for g in _REQ_GLOBS):
        return "requirements"
    if name == "Dockerfile" or name.startswith("Dockerfile.") or name.endswith((".Dockerfile", ".dockerfile")) or name.endswith("Containerfile"):
        return "dockerfile"
    if rel.startswith(".github/workflows/") and name.endswith((".yml", ".yaml")):
        return "workflow"
    return None


def release_inputs(root: Path) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS or d == ".github")
        for filename in sorted(filenames):
            rel = os.path.relpath(os.path.join(dirpath, filename), root).replace(os.sep, "/")
            kind = _file_kind(rel)
            if kind:
                found.append((rel, kind))
    return found


def _name_pattern(package: str) -> str:
    words = re.split(r"[-_.]+", package)
    return r"[-_.]+".join(re.escape(w) for w in words)


def _var_names(package: str) -> set[str]:
    words = [w.upper() for w in re.split(r"[-_.]+", package) if w]
    names = set()
    for start in range(len(words)):
        stem = "_".join(words[start:])
        if start and len(words) - start < 2 and len(stem) < 4:
            continue  # "FFI_VERSION" alone is too generic to be this package
        names.update({f"{stem}_VERSION", f"{stem}_VER"})
    return names


def _strip_comment(line: str, kind: str) -> str:
    if kind in ("requirements", "dockerfile", "workflow", "pyproject"):
        # A '#' that starts a comment follows whitespace or starts the line (URLs keep their fragments).
        match = re.search(r"(^|\s)#", line)
        if match:
            return line[: match.start()]
    return line


def _scope_of(kind: str, rel: str, in_build_system: bool) -> Scope:
    if kind == "pyproject":
        return "build" if in_build_system else "runtime"
    if kind == "requirements":
        return "build" if "build" in rel.rsplit("/", 1)[-1] else "runtime"
    return "release"


def _requirement_hits(line: str, pin: Pin) -> list[str]:
    """Version specs written next to the package name on this line ('' = no version)."""
    name = _name_pattern(pin.package)
    pattern = re.compile(
        rf"(?<![A-Za-z0-9_./-]){name}(?:\[[^\]]*\])?(?![A-Za-z0-9_-])\s*(?P<spec>{_SPEC}(?:\s*,\s*{_SPEC})*)?",
        re.IGNORECASE,
    )
    hits = []
    for match in pattern.finditer(line):
        rest = line[match.end():]
        if rest.lstrip().startswith("@"):
            continue  # a URL requirement: reported as VCS/URL dependency instead
        if match.start() > 0 and line[match.start() - 1] in "/=":
            continue
        hits.append((match.group("spec") or "").replace(" ", ""))
    return hits


def audit_pins(manifest: Manifest, root: Path) -> PinAuditResult:
    if not root.is_dir():
        raise InputError(f"--repo {root} is not a directory")
    findings = Findings()
    occurrences: list[PinOccurrence] = []
    files = release_inputs(root)
    seen_pins: set[str] = set()
    for rel, kind in files:
        try:
            lines = (root / rel).read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError as exc:
            raise InputError(f"cannot read {rel}: {exc.strerror}") from None
        in_build_system = False
        for lineno, raw in enumerate(lines, start=1):
            stripped = raw.strip()
            if kind == "pyproject" and stripped.startswith("["):
                in_build_system = stripped.startswith("[build-system")
            line = _strip_comment(raw, kind)
            if not line.strip():
                continue
            scope = _scope_of(kind, rel, in_build_system)
            if manifest.policy.forbid_vcs_dependencies:
                for match in _VCS.finditer(line):
                    findings.add(
                        "VCS_DEPENDENCY",
                        f"VCS/URL dependency in a release input: {match.group(0)[:120]}",
                        file=rel,
                        line=lineno,
                    )
            for pin in manifest.pins:
                if scope not in pin.scopes:
                    continue
                expected = f"=={pin.version}"
                found: list[str] = []
                if kind == "pyproject" and not re.search(r"[\"']", line):
                    pass  # requirement strings in pyproject are always quoted
                elif kind in ("dockerfile", "workflow") and not re.search(r"\b(pip|uv)\b.*\binstall\b|--requirement|-r\s", line):
                    pass  # only install commands name packages as requirements there
                else:
                    found = _requirement_hits(line, pin)
                for spec in found:
                    agrees = spec in (expected, f"==={pin.version}") or bool(re.fullmatch(r"===?\$\{?\w+\}?", spec))
                    _record(findings, occurrences, rel, lineno, pin, spec, expected, agrees, scope)
                if kind in ("dockerfile", "workflow"):
                    for var in _var_names(pin.package):
                        m = re.search(rf"(?:^|\s|-\s*){var}\s*(?:=|:)\s*[\"']?([A-Za-z0-9.+!_-]+)", line)
                        if m and (kind == "workflow" or re.match(r"\s*(ARG|ENV)\b", line)):
                            value = m.group(1)
                            _record(findings, occurrences, rel, lineno, pin, f"{var}={value}", expected, value == pin.version, scope)
                if found:
                    seen_pins.add(pin.package)
    for occ in occurrences:
        seen_pins.add(occ.package)
    for pin in manifest.pins:
        if canonicalize_name(pin.package) not in {canonicalize_name(p) for p in seen_pins}:
            findings.add("PIN_NOT_FOUND", f"{pin.package}=={pin.version} is not named in any release input", severity=Severity.info)
    return PinAuditResult(root=str(root), files_scanned=len(files), occurrences=occurrences, passed=findings.passed, findings=findings)


def _record(findings: Findings, occurrences: list[PinOccurrence], rel: str, lineno: int, pin: Pin, found: str, expected: str, agrees: bool, scope: Scope) -> None:
    occurrences.append(PinOccurrence(file=rel, line=lineno, package=pin.package, found=found, expected=expected, agrees=agrees, scope=scope))
    if agrees:
        return
    if found == "":
        findings.add("PIN_UNPINNED", f"{pin.package} is named without a version; the release pins {pin.package}{expected}", file=rel, line=lineno)
    else:
        findings.add("PIN_MISMATCH", f"{pin.package} {found} disagrees with the release pin {pin.package}{expected}", file=rel, line=lineno)
