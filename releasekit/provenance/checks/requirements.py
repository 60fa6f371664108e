"""Every installed distribution's requirements are met by what the image holds (``pip check``, done on the host).

An image can be genuine (every file the locked commits' and wheels' own) and still incomplete: a
distribution whose ``Requires-Dist`` names something that is not installed, or installed at a version
the requirement excludes, fails at import or at first use. This check reads each distribution's
``METADATA`` from the image's exported filesystem (the inventory keeps it, bounded), never runs the
image's Python for it, and judges with ``packaging``:

- the distributions are those on the image's ``sys.path`` (the first of a name wins, as Python
  imports it; pip check does the same), or every site directory when the probe gave no path;
- a requirement's marker is evaluated in the *image's* environment: its Python version from its
  site and standard-library directories (``lib/python3.X``), its machine from the image config's
  architecture, Linux/CPython otherwise; never the host's;
- a requirement's extras (``b[x]``) bring in ``b``'s requirements of extra ``x``, for that requirer,
  as an installer would; ``pip check`` itself ignores them, so findings through an extra say so;
- versions compare by PEP 440 with pre-releases allowed, as ``pip check`` compares.

The manifest's ``policy.accepted_requirements`` names requirements the release accepts (a GPU-only
package on a CPU rehearsal), each with a reason: they are ``REQUIREMENT_ACCEPTED`` (info), shown in
the verification summary and RELEASE.md, and an acceptance that nothing matches is a warning.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from email.parser import HeaderParser
from typing import Any

from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from releasekit.checks import Examined
from releasekit.findings import Findings, Severity
from releasekit.provenance.context import NeedsImageFiles, VerifyContext
from releasekit.provenance.installed import InstalledDist

MAX_REQUIREMENTS = 4096  # Requires-Dist lines read per distribution
MAX_REQUIREMENT_CHARS = 4096  # one line longer than this is not parsed
MAX_EXTRA_ROUNDS = 64  # extras that ask for more extras, followed this deep

_PYTHON_DIR = re.compile(r"/lib/python(3\.\d{1,3})(?:/|$)")
# OCI architectures as Python's platform.machine() names them on Linux.
_MACHINES = {
    "amd64": "x86_64",
    "arm64": "aarch64",
    "386": "i686",
    "arm": "armv7l",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
    "riscv64": "riscv64",
}


def marker_environment(ctx: VerifyContext) -> dict[str, str]:
    """The marker environment of the image's interpreter, from the image's own facts."""
    paths = [*ctx.sys_path, *ctx.stdlib, *ctx.sites]
    found = next((m.group(1) for p in paths if (m := _PYTHON_DIR.search(p))), None)
    report = ctx.probe.report or {}
    said = report.get("python") if isinstance(report.get("python"), str) else None
    version = found or (".".join(said.split(".")[:2]) if said else "3")
    full = said if said and (said == version or said.startswith(version + ".")) else version
    return {
        "implementation_name": "cpython",
        "implementation_version": full,
        "os_name": "posix",
        "platform_machine": _MACHINES.get(ctx.architecture, ctx.architecture or "x86_64"),
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_system": "Linux",
        "platform_version": "",
        "python_full_version": full,
        "python_version": version,
        "sys_platform": "linux",
    }


@dataclass(frozen=True)
class Unmet:
    """One requirement the image does not meet."""

    dist: InstalledDist
    requirement: str  # as written in METADATA
    name: str  # the required distribution, canonical
    code: str  # REQUIREMENT_NOT_INSTALLED | REQUIREMENT_CONFLICT
    why: str  # "not installed" / "installed: 1.2"
    extra: tuple[str, str] | None = None  # (extra, the distribution that asked for it)

    @property
    def message(self) -> str:
        via = f"; through extra [{self.extra[0]}], asked for by {self.extra[1]}" if self.extra else ""
        return f"{self.dist.name} {self.dist.version} requires {self.requirement} ({self.why}{via})"


def _requires_txt(text: str) -> list[str]:
    """An .egg-info's ``requires.txt`` as requirement lines: ``[extra]``, ``[:marker]`` and
    ``[extra:marker]`` sections become markers, as ``importlib.metadata`` reads them."""
    out: list[str] = []
    marker = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            extra, _, condition = line[1:-1].partition(":")
            parts = [f'extra == "{extra.strip()}"'] if extra.strip() else []
            parts += [f"({condition.strip()})"] if condition.strip() else []
            marker = " and ".join(parts)
            continue
        out.append(f"{line}; {marker}" if marker else line)
    return out


def requirement_lines(ctx: VerifyContext, dist: InstalledDist) -> tuple[list[str], str | None]:
    """The ``Requires-Dist`` lines of ``dist``'s METADATA as the inventory kept it (an .egg-info's
    ``requires.txt``), and a problem or None."""
    if dist.dist_info.endswith(".egg-info"):
        entry = ctx.inventory.files.get(dist.dist_info)
        raw = ctx.inventory.read(f"{dist.dist_info}/requires.txt") if entry and entry.kind == "dir" else None
        lines = _requires_txt(raw.decode("utf-8", errors="replace")) if raw is not None else []
    else:
        data = ctx.inventory.read(f"{dist.dist_info}/METADATA")
        if data is None:
            return [], "its METADATA was not kept"
        headers = HeaderParser().parsestr(data.decode("utf-8", errors="replace"), headersonly=True)
        lines = [str(v) for v in headers.get_all("Requires-Dist") or []]
    if len(lines) > MAX_REQUIREMENTS:
        return lines[
            :MAX_REQUIREMENTS
        ], f"{len(lines)} Requires-Dist lines; the first {MAX_REQUIREMENTS} read"
    return lines, None


def _applies(req: Requirement, env: dict[str, str], extra: str) -> bool:
    if req.marker is None:
        return not extra  # a requirement without a marker belongs to the distribution, not an extra
    try:
        here = req.marker.evaluate({**env, "extra": extra})
        if not extra:
            return here
        return here and not req.marker.evaluate({**env, "extra": ""})
    except (UndefinedComparison, UndefinedEnvironmentName, InvalidMarker):
        return False


def _version_ok(req: Requirement, version: str) -> bool:
    if not req.specifier:
        return True
    try:
        return req.specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


@dataclass
class _Walk:
    """One pass over the installed distributions: what is installed, the environment, what was found."""

    installed: dict[str, InstalledDist]
    env: dict[str, str]
    parsed: dict[str, list[Requirement]]
    unmet: list[Unmet]
    problems: list[tuple[InstalledDist, str]]

    def requirements(self, ctx: VerifyContext, dist: InstalledDist) -> list[Requirement]:
        if dist.key not in self.parsed:
            lines, problem = requirement_lines(ctx, dist)
            if problem:
                self.problems.append((dist, problem))
            out: list[Requirement] = []
            for line in lines:
                try:
                    if len(line) > MAX_REQUIREMENT_CHARS:
                        raise InvalidRequirement(f"longer than {MAX_REQUIREMENT_CHARS} characters")
                    out.append(Requirement(line))
                except InvalidRequirement as exc:
                    self.problems.append((dist, f"Requires-Dist {line[:200]!r} is not a requirement: {exc}"))
            self.parsed[dist.key] = out
        return self.parsed[dist.key]

    def judge(
        self, ctx: VerifyContext, dist: InstalledDist, extra: tuple[str, str] | None
    ) -> Iterator[tuple[str, str, str]]:
        """Judge ``dist``'s requirements (of ``extra``, when given); yield the extras they ask for:
        (distribution, extra, requirer)."""
        for req in self.requirements(ctx, dist):
            if not _applies(req, self.env, extra[0] if extra else ""):
                continue
            name = canonicalize_name(req.name)
            target = self.installed.get(name)
            if target is None:
                self.unmet.append(
                    Unmet(dist, str(req), name, "REQUIREMENT_NOT_INSTALLED", "not installed", extra)
                )
                continue
            if not _version_ok(req, target.version):
                why = f"installed: {target.name} {target.version}"
                self.unmet.append(Unmet(dist, str(req), name, "REQUIREMENT_CONFLICT", why, extra))
            for wanted in sorted(req.extras):
                yield name, canonicalize_name(wanted), dist.name


def egg_infos(ctx: VerifyContext, sites: list[str]) -> list[InstalledDist]:
    """The .egg-info distributions of ``sites`` (a directory with ``PKG-INFO``, or a file that is one)."""
    found: list[InstalledDist] = []
    for site in sites:
        for name in ctx.inventory.listdir(site):
            if not name.endswith(".egg-info"):
                continue
            path = f"{site}/{name}"
            entry = ctx.inventory.files.get(path)
            data = ctx.inventory.read(f"{path}/PKG-INFO" if entry and entry.kind == "dir" else path)
            if data is None:
                continue
            headers = HeaderParser().parsestr(data.decode("utf-8", errors="replace"), headersonly=True)
            stem = name[: -len(".egg-info")].split("-")
            dist_name = headers.get("Name") or stem[0]
            version = headers.get("Version") or (stem[1] if len(stem) > 1 else "")
            found.append(InstalledDist(str(dist_name), str(version), site, path, record=None))
    return found


def installed_on_path(ctx: VerifyContext) -> dict[str, InstalledDist]:
    """Canonical name -> the distribution Python finds first on the image's ``sys.path`` (.dist-info
    or .egg-info, as ``importlib.metadata`` and ``pip check`` find them)."""
    order = ctx.sys_path or ctx.sites
    rank = {site: i for i, site in reversed(list(enumerate(order)))}
    dists = [*ctx.dists, *egg_infos(ctx, [s for s in ctx.sites if s in rank])]
    out: dict[str, InstalledDist] = {}
    for dist in sorted((d for d in dists if d.site in rank), key=lambda d: rank[d.site]):
        out.setdefault(dist.key, dist)
    return out


def unmet_requirements(ctx: VerifyContext) -> tuple[list[Unmet], list[tuple[InstalledDist, str]]]:
    """Every requirement the image does not meet, and the METADATA that could not be read as such."""
    walk = _Walk(installed_on_path(ctx), marker_environment(ctx), {}, [], [])
    asked: list[tuple[str, str, str]] = []
    for dist in sorted(walk.installed.values(), key=lambda d: d.key):
        asked.extend(walk.judge(ctx, dist, None))
    done: set[tuple[str, str]] = set()
    for _ in range(MAX_EXTRA_ROUNDS):
        todo = sorted({(n, e): r for n, e, r in asked if (n, e) not in done}.items())
        if not todo:
            break
        asked = []
        for (name, extra), requirer in todo:
            done.add((name, extra))
            asked.extend(walk.judge(ctx, walk.installed[name], (extra, requirer)))
    return walk.unmet, walk.problems


def acceptance_for(policy: Any, unmet: Unmet) -> Any | None:
    """The manifest's ``accepted_requirements`` entry that accepts ``unmet``, or None."""
    for entry in getattr(policy, "accepted_requirements", None) or []:
        names = {canonicalize_name(n) for n in entry.requirements}
        by = entry.required_by
        if unmet.name in names and (by is None or canonicalize_name(by) == unmet.dist.key):
            return entry
    return None


class RequirementsCheck(NeedsImageFiles):
    name = "requirements"
    codes = (
        "REQUIREMENT_NOT_INSTALLED",
        "REQUIREMENT_CONFLICT",
        "REQUIREMENT_ACCEPTED",
        "REQUIREMENT_ACCEPTANCE_UNUSED",
        "REQUIREMENT_UNREADABLE",
    )

    def examines(self, ctx: VerifyContext) -> Examined:
        """Every distribution on the image's sys.path (its Requires-Dist)."""
        return Examined.of(
            "distributions", (f"{d.name} {d.version}" for d in installed_on_path(ctx).values())
        )

    def run(self, ctx: VerifyContext) -> Findings:
        found = Findings()
        policy = getattr(ctx.manifest, "policy", None)
        unmet, problems = unmet_requirements(ctx)
        used: set[int] = set()
        for item in unmet:
            entry = acceptance_for(policy, item)
            if entry is not None:
                used.add(id(entry))
                found.add(
                    "REQUIREMENT_ACCEPTED",
                    f"{item.message}; accepted by the manifest: {entry.reason}",
                    severity=Severity.info,
                    path=item.dist.dist_info,
                    field=item.name,
                )
            else:
                found.add(item.code, item.message, path=item.dist.dist_info, field=item.name)
        for dist, problem in problems:
            found.add(
                "REQUIREMENT_UNREADABLE",
                f"{dist.name} {dist.version}: {problem}",
                severity=Severity.warning,
                path=dist.dist_info,
            )
        for entry in getattr(policy, "accepted_requirements", None) or []:
            if id(entry) not in used:
                by = f" of {entry.required_by}" if entry.required_by else ""
                found.add(
                    "REQUIREMENT_ACCEPTANCE_UNUSED",
                    f"policy.accepted_requirements accepts {', '.join(entry.requirements)}{by}, "
                    "but the image meets every such requirement (or does not hold the distribution)",
                    severity=Severity.warning,
                    field="policy.accepted_requirements",
                )
        return found


__all__ = ["RequirementsCheck", "Unmet", "marker_environment", "unmet_requirements"]
