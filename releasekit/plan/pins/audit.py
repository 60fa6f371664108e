"""The audit: every pin found in a commit's release inputs compared with the manifest.

What is pinned: the manifest's ``pins`` and its wheel components' ``name==version``
(``flashinfer-python==0.6.14`` must be what the repository installs too; all scopes). The
inputs (``registry.py``) are read minus the manifest's ``pin_inputs.skip`` (recorded as
skipped, with the reason); no input read at all is ``PINS_NOTHING_SCANNED``.

Versions compare by PEP 440 (``packaging``): ``==0.1.12.0`` is the pin 0.1.12. A specifier
set agrees only when it admits the pinned version and nothing else; one that excludes it or
admits others is ``PIN_MISMATCH``, no version at all ``PIN_UNPINNED``. ``git+…``,
``name @ URL`` / ``name@URL`` and pixi ``git``/``url`` tables are VCS/URL dependencies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from releasekit.findings import Findings, Severity
from releasekit.manifest.models import Manifest, PinInputSkip
from releasekit.manifest.path_patterns import PathPattern
from releasekit.plan.pins.interface import Found, InputFile, PinSource, Wanted
from releasekit.plan.pins.registry import NAMED_FILE_SOURCE, input_sources
from releasekit.plan.pins.tree import CommitTree
from releasekit.records.plan_check import PinAuditResult, PinOccurrence, SkippedPinInput

_VCS = re.compile(r"(?:git|hg|svn|bzr)\+[a-z]+://\S+")
_VAR_SPEC = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*===?\s*\$\{?[A-Za-z_][A-Za-z0-9_]*\}?$"
)


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


@dataclass(frozen=True)
class _Audit:
    """One audit: the commit's tree, the pins wanted, the skip list and where its findings point
    (the component), with the findings and pin occurrences it collects."""

    tree: CommitTree
    wanted: list[Wanted]
    skips: list[tuple[PathPattern, str]]
    where: dict[str, str]
    findings: Findings = field(default_factory=Findings)
    occurrences: list[PinOccurrence] = field(default_factory=list)


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
    skips = [(PathPattern(p), s.reason) for s in skip or [] for p in s.paths]
    audit = _Audit(tree, _wanted(manifest), skips, {"component": component} if component else {})
    findings, occurrences = audit.findings, audit.occurrences
    skipped, pending = _partition(tree, skips)
    tree.prefetch(rel for rel, _ in pending)  # one cat-file for every input found by name
    done, requirements = _read_inputs(audit, pending, skipped)
    _check_requirements(manifest, requirements, audit)
    _report_coverage(audit, commit, done, skipped)
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
) -> tuple[dict[str, SkippedPinInput], list[tuple[str, PinSource]]]:
    """(skipped, pending): the skip list is applied before any blob is read, so a skipped input costs nothing."""
    skipped: dict[str, SkippedPinInput] = {}
    pending: list[tuple[str, PinSource]] = []
    for rel, source in input_sources(tree.files):
        out_of_scope = _skip_reason(rel, skips)
        if out_of_scope:
            skipped[rel] = SkippedPinInput(file=rel, pattern=out_of_scope[0], reason=out_of_scope[1])
        else:
            pending.append((rel, source))
    return skipped, pending


def _read_inputs(
    audit: _Audit, pending: list[tuple[str, PinSource]], skipped: dict[str, SkippedPinInput]
) -> tuple[set[str], list[Found]]:
    """(files read, requirements found): inputs found by name first, then the files they name (-r, open())."""
    tree, skips, findings, where = audit.tree, audit.skips, audit.findings, audit.where
    queue: list[str] = []
    done: set[str] = set()
    requirements: list[Found] = []
    while pending or queue:
        rel, source = pending.pop(0) if pending else (queue.pop(0), NAMED_FILE_SOURCE)
        if rel in done or rel in skipped:
            continue
        out_of_scope = _skip_reason(rel, skips)
        if out_of_scope:  # named by another input (-r, open()), but out of scope
            skipped[rel] = SkippedPinInput(file=rel, pattern=out_of_scope[0], reason=out_of_scope[1])
            continue
        done.add(rel)
        size = tree.oversize(rel)
        if size is not None:
            findings.add(
                "PIN_INPUT_UNREADABLE",
                f"{rel}: {size} bytes, over the limit of {tree.max_bytes} bytes for a pin input; "
                "not read, its pins were not checked",
                file=rel,
                **where,
            )
            continue
        text = tree.text(rel)
        if text is None:
            findings.add(
                "PIN_INPUT_UNREADABLE",
                f"{rel}: its blob is not in the repository; its pins were not checked",
                file=rel,
                **where,
            )
            continue
        read = InputFile(tree.fileset, rel, text, audit.wanted)
        requirements.extend(source.read(read))  # read to the end: named/unreadable/stated are then complete
        queue.extend(read.named)
        for why in read.unreadable:
            findings.add("PIN_INPUT_UNREADABLE", why, file=rel, **where)
        for stated in read.stated:
            _record(audit, stated.found, stated.want, stated.shown, (stated.agrees, "other version"))
    return done, requirements


def _check_requirements(manifest: Manifest, requirements: list[Found], audit: _Audit) -> None:
    """Compare each requirement with its pin; a URL/VCS one is a finding only when the policy forbids them."""
    findings = audit.findings
    by_name = {canonicalize_name(w.package): w for w in audit.wanted}
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
        _record(audit, found, want, spec, _agrees(spec, want.version))


def _report_coverage(audit: _Audit, commit: str, done: set[str], skipped: dict[str, SkippedPinInput]) -> None:
    """An audit that read nothing fails, and a pin no input names is said (info): silence is not agreement."""
    tree, findings, where = audit.tree, audit.findings, audit.where
    if not done:
        findings.add(
            "PINS_NOTHING_SCANNED",
            f"no release input was read at {commit[:12]} ({len(tree.files)} files in the tree, "
            f"{len(skipped)} inputs skipped as out of scope): the pins were checked nowhere",
            commit=commit,
            **where,
        )
    seen = {canonicalize_name(o.package) for o in audit.occurrences}
    for want in audit.wanted:
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


def _record(audit: _Audit, found: Found, want: Wanted, spec: str, verdict: tuple[bool, str]) -> None:
    """One occurrence of a wanted pin, and its finding when it does not agree (``verdict``: agrees, why not)."""
    agrees, why = verdict
    expected = f"=={want.version}"
    shown = spec
    if spec == "==${var}":
        shown = found.text[len(re.split(r"[=<>!~\[]", found.text, maxsplit=1)[0]) :].strip()
    audit.occurrences.append(
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
        audit.findings.add(
            "PIN_UNPINNED",
            f"{want.package} is named without a version; the release pins {want.package}{expected}{source}",
            file=found.file,
            line=found.line,
        )
    else:
        audit.findings.add(
            "PIN_MISMATCH",
            f"{want.package} {shown} {why}: the release pins {want.package}{expected}{source}",
            file=found.file,
            line=found.line,
        )
