"""verify-provenance: prove that what an image imports is exactly what the locked commits produce.

Order of work: read the lock (and the manifest and release directory when available),
inspect the image, run the probe in a locked-down container, stream the image's
filesystem once through the hasher, then run every check over what was gathered.
The Docker engine and the clock are the command's (``provenance/commands.py`` makes them).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from releasekit.atomic import abandon_run, begin_run, check_writable, commit_run, failpoint
from releasekit.bounded_read import UnsafeFileError, check_regular
from releasekit.checks import AllOf, Deadline, Outcome, Report
from releasekit.clock import Clock
from releasekit.docker_engine import Engine
from releasekit.errors import InputError
from releasekit.findings import Findings, Severity
from releasekit.provenance.accounting import Expected, layer_table, overlay, table
from releasekit.provenance.checks import all_checks
from releasekit.provenance.context import VerifyContext
from releasekit.provenance.expected import ExpectedComponent, expected_components
from releasekit.provenance.image import ImageAdapter, ImageFacts, ProbeRun
from releasekit.provenance.installed import (
    InstalledDist,
    WheelRecord,
    canonical_name,
    installed_distributions,
    read_wheel_record,
)
from releasekit.provenance.inventory import Inventory, ReadPlan, inventory_from_tar
from releasekit.provenance.reproduce import ReproduceOptions, Reproduction, reproduce
from releasekit.provenance.sbom import write_sbom
from releasekit.provenance.summary import make_summary, write_summary
from releasekit.provenance.tarstream import ExportAborted
from releasekit.provenance.vcache import VerifierCache, verifier_cache
from releasekit.records.build import BUILD_FILE, BuildRecord, read_build_record
from releasekit.records.lock import Lock, lock_file_sha256, read_lock
from releasekit.records.provenance import PROVENANCE_FILE, Statement
from releasekit.records.release_dir import replaced_by
from releasekit.records.sbom import SBOM_FILE
from releasekit.records.verification import (
    MAX_EXAMINED_LISTED,
    VERIFICATION_SUMMARY_FILE,
    CheckOutcome,
    ReleasekitBlock,
)
from releasekit.signing.statements import envelope_path, sign_sbom_file, sign_summary_file

SUMMARY_NAME = VERIFICATION_SUMMARY_FILE
_PREFIX = re.compile(r"^(/.*?)/lib/python3[^/]*/(?:site|dist)-packages$")


class VerifyOptions(BaseModel):
    image: str
    lock: Path
    artifacts: Path | None = None
    manifest: Path | None = None
    summary: Path | None = None  # default: ARTIFACTS/verification_summary.json
    sbom: Path | None = None  # default: ARTIFACTS/sbom.cdx.json (written only when the image verifies)
    allow_local_repos: bool = False
    cache_dir: str | None = None
    probe_timeout: float = 120.0
    export_timeout: float = 1800.0
    # Reproduction: into the verifier's own cache, never the build's (provenance/vcache.py);
    # --no-cache: an empty one for this run, even within a process that verified before.
    no_cache: bool = False
    template: Path | None = None
    # Bounds on the verifier itself: one deadline over the whole run, what is kept, how many roots.
    deadline: float = 3600.0
    max_kept_bytes: int = 128 * 1024 * 1024
    max_file_bytes: int = 4 * 1024**3  # a candidate's file above it stops the read (EXPORT_ABORTED)
    max_roots: int = 256
    max_entries: int = 5_000_000


class ProbeSummary(BaseModel):
    ok: bool
    error: str | None = None
    python: str | None = None
    executable: str | None = None
    sys_path: list[str] = Field(default_factory=list)
    pth_files: list[str] = Field(default_factory=list)
    customize: dict[str, str | None] = Field(default_factory=dict)
    toolchain: dict[str, Any] = Field(default_factory=dict)
    specs: list[dict[str, Any]] = Field(default_factory=list)
    seconds: float = 0.0


class VerifyStats(BaseModel):
    files: int = 0
    bytes_total: int = 0
    bytes_hashed: int = 0
    kept_bytes: int = 0
    distributions: int = 0
    seconds_probe: float = 0.0
    seconds_export: float = 0.0
    seconds_total: float = 0.0


class VerifyResult(BaseModel):
    image_id: str
    image_tags: list[str] = Field(default_factory=list)
    entrypoint: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    lock_sha256: str
    manifest_sha256: str
    passed: bool
    checks: list[CheckOutcome] = Field(default_factory=list)
    findings: Findings = Field(default_factory=Findings)
    probe: ProbeSummary
    stats: VerifyStats = Field(default_factory=VerifyStats)
    summary_path: str | None = None
    sbom_path: str | None = None


def _manifest_candidates(opts: VerifyOptions, lock: Lock) -> list[Path]:
    """Where the lock's manifest may be: beside the lock, the working directory, the release directory,
    and one directory below the lock's and the release directory's parents (the demo's layout). Only a
    file with the lock's sha256 is taken, so looking around is safe."""
    given = Path(lock.manifest.path)
    if given.is_absolute():
        return [given]
    dirs = [opts.lock.parent, Path.cwd()]
    if opts.artifacts is not None:
        dirs += [opts.artifacts, opts.artifacts.parent]
    out = [d / given for d in dirs]
    for d in dict.fromkeys(dirs[:1] + dirs[2:]):
        try:
            out += sorted(p / given for p in d.iterdir() if p.is_dir() and not p.name.startswith("."))[:64]
        except OSError:
            continue
    return list(dict.fromkeys(out))


def _file_sha256_or_none(path: Path) -> str | None:
    try:
        return lock_file_sha256(path)
    except (UnsafeFileError, OSError):
        return None


def _load_manifest(opts: VerifyOptions, lock: Lock, findings: Findings) -> Any | None:
    from releasekit.manifest import load_manifest

    candidates = [opts.manifest] if opts.manifest is not None else _manifest_candidates(opts, lock)
    for path in candidates:
        if not path.is_file():
            continue
        if opts.manifest is None and _file_sha256_or_none(path) != lock.manifest.sha256:
            continue  # another file of that name (or one not safe to read): not the lock's manifest
        loaded = load_manifest(path)
        if loaded.sha256 != lock.manifest.sha256:
            if opts.manifest is not None:
                raise InputError(
                    f"{path} is not the manifest the lock was made from (sha256 {loaded.sha256[:12]}, lock says "
                    f"{lock.manifest.sha256[:12]})"
                )
            continue
        return loaded
    findings.add(
        "MANIFEST_UNAVAILABLE",
        "the lock's manifest was not found (pass --manifest): policy, generated files and arch lists "
        "come from the lock and build record only",
        severity=Severity.warning,
    )
    return None


def _wheel_path(directory: Path, comp: ExpectedComponent) -> Path | None:
    """The component's wheel in ``wheels/``: the recorded name, else the one ``*.whl`` of its distribution.
    Only looked at by name (``lexists``): whether it is a regular file is ``read_wheel_record``'s to refuse."""
    if (
        comp.wheel_filename
        and "/" not in comp.wheel_filename
        and os.path.lexists(directory / comp.wheel_filename)
    ):
        return directory / comp.wheel_filename
    if comp.distribution:
        stem = canonical_name(comp.distribution).replace("-", "_")
        matches = sorted(
            p
            for p in directory.glob("*.whl")
            if canonical_name(p.name.split("-", 1)[0]).replace("-", "_") == stem
        )
        return matches[0] if len(matches) == 1 else None
    return None


def _wheels(
    artifacts: Path | None, comps: dict[str, ExpectedComponent]
) -> tuple[dict[str, WheelRecord], dict[str, str]]:
    wheels: dict[str, WheelRecord] = {}
    errors: dict[str, str] = {}
    if artifacts is None:
        return wheels, {n: "no release directory given (--artifacts)" for n in comps}
    directory = artifacts / "wheels"
    for name, comp in comps.items():
        if not comp.installed:
            continue
        path = _wheel_path(directory, comp)
        if path is None:
            errors[name] = f"no wheel of {comp.distribution or name} in {directory.name}/"
            continue
        try:
            # A FIFO, device or link out of the directory, or a wheel over the limit: exit 2 (bounded_read).
            wheels[name] = read_wheel_record(path, within=artifacts)
        except InputError:
            raise
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            errors[name] = f"cannot read {path.name}: {exc}"
        except Exception as exc:  # noqa: BLE001 - zipfile raises several unrelated types on damage
            errors[name] = f"cannot read {path.name}: {type(exc).__name__}: {exc}"
    return wheels, errors


def _python_roots(probe: ProbeRun, facts: ImageFacts) -> tuple[list[str], list[str], list[str]]:
    """(sys.path dirs, site dirs, stdlib dirs) — from the probe, plus what the image config says."""
    report = probe.report or {}
    sys_path = [p for p in report.get("sys_path") or [] if isinstance(p, str) and p.startswith("/")]
    for entry in facts.env.get("PYTHONPATH", "").split(":"):
        if entry.startswith("/") and entry not in sys_path:
            sys_path.append(entry)
    sys_path = [posixpath.normpath(p) for p in sys_path if not p.endswith(".zip")]
    sites = [p for p in report.get("site_packages") or [] if isinstance(p, str) and p.startswith("/")]
    sites += [p for p in sys_path if p.endswith(("site-packages", "dist-packages"))]
    stdlib = [
        posixpath.normpath(p) for p in report.get("stdlib") or [] if isinstance(p, str) and p.startswith("/")
    ]
    return list(dict.fromkeys(sys_path)), list(dict.fromkeys(posixpath.normpath(s) for s in sites)), stdlib


def _dpkg(inv: Inventory) -> tuple[set[str], dict[str, str]]:
    owned: set[str] = set()
    md5: dict[str, str] = {}
    for path, data in inv.contents.items():
        if not path.startswith("/var/lib/dpkg/info/"):
            continue
        text = data.decode("utf-8", errors="replace")
        if path.endswith(".list"):
            for line in text.splitlines():
                if line.startswith("/"):
                    owned.add(inv.resolve(line, follow_last=False) or line)
        elif path.endswith(".md5sums"):
            for line in text.splitlines():
                digest, _, name = line.partition("  ")
                if name:
                    md5[inv.resolve("/" + name, follow_last=False) or "/" + name] = digest
    status = inv.contents.get("/var/lib/dpkg/status")
    if status:
        in_conffiles = False
        for line in status.decode("utf-8", errors="replace").splitlines():
            if line.startswith("Conffiles:"):
                in_conffiles = True
            elif in_conffiles and line.startswith(" /"):
                parts = line.split()
                if len(parts) >= 2:
                    md5[parts[0]] = parts[1]
            else:
                in_conffiles = False
    return owned, md5


@dataclass(frozen=True)
class _Verification:
    """What every step of one verification reads: its options, the lock, the bounds, the engine, the cache."""

    opts: VerifyOptions
    lock: Lock
    lock_sha: str
    deadline: float  # time.monotonic() after which no further work starts
    limits: list[str]  # the bounds the verifier hit, in the order it hit them (appended to)
    engine: Engine
    cache: VerifierCache


def _reproduce(v: _Verification, loaded: Any | None) -> Reproduction:
    opts = v.opts
    if loaded is None:
        return Reproduction(
            error="the lock's manifest is needed to rebuild (its build recipes); pass --manifest"
        )
    with tempfile.TemporaryDirectory(prefix="releasekit-reproduce-") as tmp:
        wheelhouses = [opts.artifacts / "wheels"] if opts.artifacts is not None else []
        return reproduce(
            v.engine,
            loaded,
            v.lock,
            ReproduceOptions(
                lock_path=opts.lock,
                lock_sha256=v.lock_sha,
                workdir=Path(tmp),
                cache=v.cache,
                wheelhouses=wheelhouses,
                git_cache_dir=Path(opts.cache_dir) if opts.cache_dir else None,
                allow_local_repos=opts.allow_local_repos,
                template=opts.template,
            ),
        )


def _reference_files(v: _Verification, rep: Reproduction) -> dict[str, Expected] | None:
    """The locked base's own export (read from the engine, kept in memory by image ID) overlaid with the
    reproduced release layer."""
    from releasekit.docker_engine import EngineError

    assert rep.base is not None and rep.layer is not None
    cache, deadline = v.cache, v.deadline
    base = cache.base_tables.get(rep.base.image_id)
    try:
        if base is None:
            plan = ReadPlan(
                python_roots=[],
                hash_all=True,
                extra_digests=False,
                deadline=deadline,
                max_kept_bytes=0,
                max_entries=v.opts.max_entries,
            )
            stream = v.engine.export_stream(
                rep.base.image_id,
                deadline=deadline,
                labels={"io.releasekit.verify-provenance": "export-base"},
            )
            base = table(inventory_from_tar(stream, plan))
            cache.base_tables[rep.base.image_id] = base
        return overlay(base, layer_table(rep.layer, deadline))
    except (ExportAborted, EngineError, OSError) as exc:
        v.limits.append(f"reference: the locked base's filesystem could not be read: {exc}")
        return None


@dataclass(frozen=True)
class _Release:
    """What the lock, the manifest and the release directory say the image must hold."""

    loaded: Any | None  # releasekit.manifest.LoadedManifest
    record: BuildRecord | None
    provenance: Path | None
    components: dict[str, ExpectedComponent]
    wheels: dict[str, WheelRecord]
    wheel_errors: dict[str, str]

    @property
    def manifest(self) -> Any | None:
        return self.loaded.manifest if self.loaded is not None else None


@dataclass(frozen=True)
class _Roots:
    """Where Python looks in the image (from the probe and the image config), and the read plan for it."""

    sys_path: list[str]
    sites: list[str]
    stdlib: list[str]
    plan: ReadPlan


@dataclass(frozen=True)
class _Filesystem:
    """The image's filesystem as read once through the hasher, and what it says is installed."""

    inventory: Inventory
    read: bool  # False: the export aborted and nothing was read
    seconds: float
    sites: list[str]  # every site directory, resolved
    dists: list[InstalledDist]
    dpkg_owned: set[str]
    dpkg_md5: dict[str, str]


def _read_release(opts: VerifyOptions, lock: Lock, notes: Findings) -> _Release:
    loaded = _load_manifest(opts, lock, notes)
    record: BuildRecord | None = None
    provenance: Path | None = None
    if opts.artifacts is not None:
        if not opts.artifacts.is_dir():
            raise InputError(f"release directory {opts.artifacts} does not exist")
        if os.path.lexists(opts.artifacts / BUILD_FILE):  # not a regular file, or too large: exit 2
            record = read_build_record(opts.artifacts / BUILD_FILE)
        else:
            notes.add(
                "BUILD_RECORD_UNAVAILABLE",
                f"{opts.artifacts}/build.json is missing",
                severity=Severity.warning,
            )
        provenance = opts.artifacts / PROVENANCE_FILE
        if os.path.lexists(provenance):  # hashed into the summary at the end: refuse a bad one now
            check_regular(provenance, limit=Statement.max_bytes, within=opts.artifacts)
    comps = expected_components(lock, record, loaded.manifest if loaded is not None else None)
    wheels, wheel_errors = _wheels(opts.artifacts, comps)
    return _Release(loaded, record, provenance, comps, wheels, wheel_errors)


def _roots(
    v: _Verification, probe: ProbeRun, facts: ImageFacts, comps: dict[str, ExpectedComponent]
) -> _Roots:
    opts, limits = v.opts, v.limits
    sys_path, sites, stdlib = _python_roots(probe, facts)
    if len(sys_path) > opts.max_roots:
        limits.append(
            f"roots: the probe reported {len(sys_path)} sys.path entries; only the first "
            f"{opts.max_roots} are scanned (--max-roots)"
        )
        sys_path = sys_path[: opts.max_roots]
    native = {n for c in comps.values() if c.native_arches for n in c.import_names}
    # Console scripts live in the prefix's bin/: hash them too, so RECORD can vouch for them.
    bins = sorted({m.group(1) + "/bin" for s in sites if (m := _PREFIX.match(s))})
    plan = ReadPlan(
        python_roots=[p for p in [*sys_path, *bins[: opts.max_roots]] if p != "/"],
        native_names=native,
        deadline=min(time.monotonic() + opts.export_timeout, v.deadline),
        hash_all=True,
        max_kept_bytes=opts.max_kept_bytes,
        max_entries=opts.max_entries,
        max_file_bytes=opts.max_file_bytes,
        stop_at_too_large=True,
    )
    return _Roots(sys_path, sites, stdlib, plan)


def _read_filesystem(
    opts: VerifyOptions, adapter: ImageAdapter, roots: _Roots, notes: Findings, limits: list[str]
) -> _Filesystem:
    export_started = time.monotonic()
    try:
        inventory = inventory_from_tar(adapter.export_stream(deadline=roots.plan.deadline or 0.0), roots.plan)
        read = True
    except ExportAborted as exc:
        notes.add("EXPORT_ABORTED", f"the image's filesystem could not be read: {exc}")
        inventory, read = Inventory(), False
    seconds = time.monotonic() - export_started
    # Site directories that exist in the image but the probe did not mention (a lying probe).
    static_sites = sorted(
        p
        for p, e in inventory.files.items()
        if e.kind == "dir" and p.rsplit("/", 1)[-1] in ("site-packages", "dist-packages")
    )
    if len(static_sites) > opts.max_roots:
        limits.append(
            f"roots: the image has {len(static_sites)} directories named site-packages/dist-packages; "
            f"only {opts.max_roots} are examined (--max-roots)"
        )
        static_sites = [s for s in static_sites if s in roots.sites][: opts.max_roots] or static_sites[
            : opts.max_roots
        ]
    real_sites = list(dict.fromkeys(inventory.resolve(s) or s for s in [*roots.sites, *static_sites]))
    dists = installed_distributions(inventory, real_sites)
    owned, md5 = _dpkg(inventory) if read else (set(), {})
    return _Filesystem(inventory, read, seconds, real_sites, dists, owned, md5)


def _probe_summary(probe: ProbeRun) -> ProbeSummary:
    report = probe.report or {}
    return ProbeSummary(
        ok=probe.ok,
        error=probe.error,
        python=report.get("python"),
        executable=report.get("executable"),
        sys_path=report.get("sys_path") or [],
        pth_files=report.get("pth_files") or [],
        customize=report.get("customize") or {},
        toolchain=report.get("toolchain") or {},
        specs=report.get("specs") or [],
        seconds=probe.seconds,
    )


def _summary_path(opts: VerifyOptions) -> Path | None:
    return opts.summary or (opts.artifacts / SUMMARY_NAME if opts.artifacts else None)


def _sbom_path(opts: VerifyOptions) -> Path | None:
    return opts.sbom or (opts.artifacts / SBOM_FILE if opts.artifacts else None)


def _check_outputs(opts: VerifyOptions) -> None:
    """Refuse now, before the image is read, to write through a planted link or special file."""
    summary_path = _summary_path(opts)
    if summary_path is not None:
        check_writable(summary_path)
        check_writable(envelope_path(summary_path))
    sbom_path = _sbom_path(opts)
    if sbom_path is not None:
        check_writable(sbom_path)
        check_writable(envelope_path(sbom_path))


def _write_summary(
    summary_path: Path | None,
    result: VerifyResult,
    provenance: Path | None,
    facts: ImageFacts,
    sbom_sha256: str | None,
    *,
    clock: Clock,
) -> str | None:
    """verification_summary.json, unsigned (`releasekit sign` signs it, in a process that runs no git or
    Docker); its path, or None."""
    if summary_path is None:
        return None
    block = ReleasekitBlock(
        lock_sha256=result.lock_sha256,
        manifest_sha256=result.manifest_sha256,
        image_tags=facts.tags,
        checks=result.checks,
        findings=list(result.findings),
        sbom_sha256=sbom_sha256,
    )
    write_summary(
        make_summary(
            image_id=facts.id, passed=result.passed, block=block, provenance=provenance, clock=clock
        ),
        summary_path,
    )
    # An envelope an earlier run left signs other bytes: removed (a planted link too, never followed).
    sign_summary_file(None, summary_path, facts.id)
    return str(summary_path)


def _write_sbom(
    path: Path | None, passed: bool, ctx: VerifyContext, created: str | None
) -> tuple[str, str] | None:
    """sbom.cdx.json from the verified inventory, unsigned (`releasekit sign` signs it): its path and
    sha256 (for the summary to name), or None. An image that did not verify gets none, and an SBOM
    (or envelope) an earlier run left at that path is removed (it would describe unverified files)."""
    if path is None:
        return None
    if not (passed and ctx.filesystem_read):
        path.unlink(missing_ok=True)
        sign_sbom_file(None, path)
        return None
    text = write_sbom(ctx, created, path)
    sign_sbom_file(None, path)  # a stale envelope removed
    return str(path), hashlib.sha256(text.encode("utf-8")).hexdigest()


def run_checks(ctx: VerifyContext, deadline: float, deadline_s: float) -> Report[VerifyContext]:
    """Every check that applies, in order; none starts after ``deadline`` (``time.monotonic()``)."""
    return AllOf(*all_checks(), name="verify-provenance").report(
        ctx,
        deadline=Deadline(
            at=deadline,
            code="VERIFY_LIMIT_REACHED",
            message=f"deadline: the run passed its {deadline_s:.0f} s deadline (--deadline) before the {{check}} check",
        ),
    )


@dataclass(frozen=True)
class _Gathered:
    """What the engine, the probe, the export and the reproduction gave, before any check runs."""

    facts: ImageFacts
    attrs: dict[str, Any]
    reproduction: Reproduction
    probe: ProbeRun
    roots: _Roots
    fs: _Filesystem
    expected_files: dict[str, Expected] | None


def _gather(v: _Verification, release: _Release, notes: Findings) -> _Gathered:
    opts = v.opts
    adapter = ImageAdapter(v.engine, opts.image)
    facts = adapter.facts
    attrs = v.engine.image_attrs(facts.id)
    reproduction = _reproduce(v, release.loaded)
    import_names = sorted({n for c in release.components.values() if c.installed for n in c.import_names})
    probe = adapter.run_probe(
        import_names, timeout=max(1.0, min(opts.probe_timeout, v.deadline - time.monotonic()))
    )
    roots = _roots(v, probe, facts, release.components)
    fs = _read_filesystem(opts, adapter, roots, notes, v.limits)
    expected_files = None
    if fs.read and reproduction.ok and reproduction.image_id != facts.id:
        expected_files = _reference_files(v, reproduction)
    return _Gathered(facts, attrs, reproduction, probe, roots, fs, expected_files)


def _context(v: _Verification, release: _Release, got: _Gathered) -> VerifyContext:
    """The one context every check reads, built once from what was gathered."""
    opts, inventory = v.opts, got.fs.inventory
    return VerifyContext(
        image=got.facts,
        lock=v.lock,
        lock_sha256=v.lock_sha,
        manifest=release.manifest,
        record=release.record,
        components=release.components,
        wheels=release.wheels,
        wheel_errors=release.wheel_errors,
        probe=got.probe,
        inventory=inventory,
        sites=got.fs.sites,
        sys_path=[inventory.resolve(p) or p for p in got.roots.sys_path],
        stdlib=[inventory.resolve(p) or p for p in got.roots.stdlib],
        dists=got.fs.dists,
        dpkg_owned=got.fs.dpkg_owned,
        dpkg_md5=got.fs.dpkg_md5,
        allow_local_repos=opts.allow_local_repos,
        cache_dir=opts.cache_dir,
        reproduction=got.reproduction,
        image_config=dict(got.attrs.get("Config") or {}),
        layers=[str(d) for d in (got.attrs.get("RootFS") or {}).get("Layers") or []],
        expected_files=got.expected_files,
        limits=v.limits,
        filesystem_read=got.fs.read,
        architecture=str(got.attrs.get("Architecture") or ""),
    )


def outcome_record(outcome: Outcome[VerifyContext]) -> CheckOutcome:
    """One check as the summary records it: status, findings, what it examined and how many."""
    found, examined = outcome.findings, outcome.examined
    return CheckOutcome(
        name=outcome.check.name,
        status=outcome.status,
        passed=outcome.status == "passed",
        findings=len(found),
        codes=sorted(set(found.codes())),
        examined=examined.kind if examined else None,
        count=examined.count if examined else 0,
        items=list(examined.items[:MAX_EXAMINED_LISTED]) if examined else [],
        reason=outcome.reason,
    )


def _result(
    v: _Verification, got: _Gathered, findings: Findings, report: Report[VerifyContext], started: float
) -> VerifyResult:
    facts, fs = got.facts, got.fs
    return VerifyResult(
        image_id=facts.id,
        image_tags=facts.tags,
        entrypoint=[*facts.entrypoint, *facts.cmd],
        env=facts.env,
        lock_sha256=v.lock_sha,
        manifest_sha256=v.lock.manifest.sha256,
        passed=findings.passed,
        checks=[outcome_record(o) for o in report.outcomes],
        findings=findings,
        probe=_probe_summary(got.probe),
        stats=VerifyStats(
            files=len(fs.inventory.files),
            bytes_total=fs.inventory.total_bytes,
            bytes_hashed=fs.inventory.hashed_bytes,
            kept_bytes=fs.inventory.kept_bytes,
            distributions=len(fs.dists),
            seconds_probe=got.probe.seconds,
            seconds_export=fs.seconds,
            seconds_total=time.monotonic() - started,
        ),
    )


def verify_provenance(opts: VerifyOptions, *, engine: Engine, clock: Clock) -> VerifyResult:
    """Gather once (release directory, image, probe, filesystem, reproduction), then run every check.

    ``engine``: the command's Docker engine (the image, the probe, the export, the rebuild);
    ``clock``: the summary's ``timeVerified``."""
    started = time.monotonic()
    _check_outputs(opts)
    lock = read_lock(opts.lock)
    lock_sha = lock_file_sha256(opts.lock)
    deadline = started + opts.deadline
    notes = Findings()
    limits: list[str] = []  # bounds the verifier hit, in the order it hit them
    release = _read_release(opts, lock, notes)
    with verifier_cache(fresh=opts.no_cache) as cache:
        v = _Verification(opts, lock, lock_sha, deadline, limits, engine, cache)
        got = _gather(v, release, notes)
        ctx = _context(v, release, got)
        report = run_checks(ctx, deadline, opts.deadline)
    findings = Findings()
    findings.extend(notes)
    findings.extend(report.findings)
    result = _result(v, got, findings, report, started)
    _check_outputs(opts)  # again: the directory may have changed while the image was read
    failpoint("verify-checked")
    _write_outputs(_Outputs(opts, result, ctx, got, release.provenance), clock)
    return result


@dataclass(frozen=True)
class _Outputs:
    """What the SBOM and the summary are written from, once every check ran."""

    opts: VerifyOptions
    result: VerifyResult
    ctx: VerifyContext
    got: _Gathered
    provenance: Path | None


def _write_files(out: _Outputs, summary_path: Path | None, sbom_path: Path | None, clock: Clock) -> None:
    # The SBOM first: the summary names its sha256, so the signed summary vouches for that document.
    sbom = _write_sbom(sbom_path, out.result.passed, out.ctx, out.got.attrs.get("Created"))
    out.result.sbom_path = sbom[0] if sbom else None
    out.result.summary_path = _write_summary(
        summary_path, out.result, out.provenance, out.got.facts, sbom[1] if sbom else None, clock=clock
    )


def _write_outputs(out: _Outputs, clock: Clock) -> None:
    """One run per release directory (docs/verify.md): the SBOM and the summary are written into a work
    directory beside the summary and committed together, the summary last; the earlier run's files
    and the later stages' records of the chain (``staging.json``, ``published/``) go in the same step."""
    summary_path, sbom_path = _summary_path(out.opts), _sbom_path(out.opts)
    if summary_path is None:
        _write_files(out, None, sbom_path, clock)
        return
    directory = summary_path.parent
    together = sbom_path is not None and sbom_path.parent.resolve() == directory.resolve()
    work = begin_run(directory, "verify-provenance")
    try:
        sbom_at = work / sbom_path.name if together and sbom_path is not None else sbom_path
        _write_files(out, work / summary_path.name, sbom_at, clock)
    except BaseException:
        abandon_run(work)
        raise
    remove = [envelope_path(summary_path).name]
    if together and sbom_path is not None:
        remove += [sbom_path.name, envelope_path(sbom_path).name]
    if out.opts.artifacts is not None and directory.resolve() == out.opts.artifacts.resolve():
        remove += replaced_by("verify-provenance", own=False)
    commit_run(work, directory, remove=remove, last=summary_path.name)
    out.result.summary_path = str(summary_path)
    if out.result.sbom_path is not None and together and sbom_path is not None:
        out.result.sbom_path = str(sbom_path)
