"""verify-provenance: prove that what an image imports is exactly what the locked commits produce.

Order of work: read the lock (and the manifest and release directory when available),
inspect the image, run the probe in a locked-down container, stream the image's
filesystem once through the hasher, then run every check over what was gathered.
"""

from __future__ import annotations

import posixpath
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from releasekit.checks import AllOf
from releasekit.errors import InputError
from releasekit.findings import Findings, Severity
from releasekit.provenance.accounting import Expected, layer_table, load_table, overlay, save_table, table
from releasekit.provenance.checks import all_checks
from releasekit.provenance.context import VerifyContext
from releasekit.provenance.expected import ExpectedComponent, expected_components
from releasekit.provenance.image import ImageAdapter, ImageFacts, ProbeRun, docker_client
from releasekit.provenance.installed import (
    WheelRecord,
    canonical_name,
    installed_distributions,
    read_wheel_record,
)
from releasekit.provenance.inventory import ExportAborted, Inventory, ReadPlan, inventory_from_tar
from releasekit.provenance.reproduce import ReproduceOptions, Reproduction, reproduce
from releasekit.provenance.summary import make_summary, write_summary
from releasekit.records.build import BUILD_FILE, BuildRecord, read_build_record
from releasekit.records.lock import Lock, lock_file_sha256, read_lock
from releasekit.records.provenance import PROVENANCE_FILE
from releasekit.records.verification import VERIFICATION_SUMMARY_FILE, CheckOutcome, ReleasekitBlock
from releasekit.signing import load_signer
from releasekit.signing.statements import sign_summary_file

SUMMARY_NAME = VERIFICATION_SUMMARY_FILE
_PREFIX = re.compile(r"^(/.*?)/lib/python3[^/]*/(?:site|dist)-packages$")


class VerifyOptions(BaseModel):
    image: str
    lock: Path
    artifacts: Path | None = None
    manifest: Path | None = None
    summary: Path | None = None  # default: ARTIFACTS/verification_summary.json
    signing_key: Path | None = (
        None  # else $RELEASEKIT_SIGNING_KEY_FILE / $RELEASEKIT_SIGNING_KEY, else unsigned
    )
    allow_local_repos: bool = False
    cache_dir: str | None = None
    probe_timeout: float = 120.0
    export_timeout: float = 1800.0
    # Reproduction: the build cache (keyed by inputs) may answer; --no-cache rebuilds everything.
    build_cache_dir: Path | None = None
    no_cache: bool = False
    template: Path | None = None
    # Bounds on the verifier itself: one deadline over the whole run, what is kept, how many roots.
    deadline: float = 3600.0
    max_kept_bytes: int = 128 * 1024 * 1024
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


def _load_manifest(opts: VerifyOptions, lock: Lock, findings: Findings) -> Any | None:
    from releasekit.manifest import load_manifest

    candidates = [opts.manifest] if opts.manifest is not None else _manifest_candidates(opts, lock)
    for path in candidates:
        if not path.is_file():
            continue
        if opts.manifest is None and lock_file_sha256(path) != lock.manifest.sha256:
            continue  # another file of that name: not the lock's manifest
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
        path: Path | None = None
        if (
            comp.wheel_filename
            and "/" not in comp.wheel_filename
            and (directory / comp.wheel_filename).is_file()
        ):
            path = directory / comp.wheel_filename
        elif comp.distribution:
            stem = canonical_name(comp.distribution).replace("-", "_")
            matches = sorted(
                p
                for p in directory.glob("*.whl")
                if canonical_name(p.name.split("-", 1)[0]).replace("-", "_") == stem
            )
            path = matches[0] if len(matches) == 1 else None
        if path is None:
            errors[name] = f"no wheel of {comp.distribution or name} in {directory.name}/"
            continue
        try:
            wheels[name] = read_wheel_record(path)
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


def _reproduce(
    opts: VerifyOptions, engine: Any, loaded: Any | None, lock: Lock, lock_sha: str
) -> Reproduction:
    if loaded is None:
        return Reproduction(
            error="the lock's manifest is needed to rebuild (its build recipes); pass --manifest"
        )
    with tempfile.TemporaryDirectory(prefix="releasekit-reproduce-") as tmp:
        wheelhouses = [opts.artifacts / "wheels"] if opts.artifacts is not None else []
        return reproduce(
            engine,
            loaded,
            lock,
            ReproduceOptions(
                lock_path=opts.lock,
                lock_sha256=lock_sha,
                workdir=Path(tmp),
                wheelhouses=wheelhouses,
                build_cache_dir=opts.build_cache_dir,
                git_cache_dir=Path(opts.cache_dir) if opts.cache_dir else None,
                no_cache=opts.no_cache,
                allow_local_repos=opts.allow_local_repos,
                template=opts.template,
            ),
        )


def _reference_files(
    opts: VerifyOptions, engine: Any, rep: Reproduction, deadline: float, limits: list[str]
) -> dict[str, Expected] | None:
    """The locked base's own export (cached by its image ID) overlaid with the reproduced release layer."""
    from releasekit.builder.cache import BuildCache
    from releasekit.docker_engine import EngineError

    assert rep.base is not None and rep.layer is not None
    entry = (
        BuildCache(opts.build_cache_dir).root
        / "bases"
        / f"{rep.base.image_id.removeprefix('sha256:')}.files.jsonl"
    )
    base = None if opts.no_cache else load_table(entry)
    try:
        if base is None:
            plan = ReadPlan(
                python_roots=[],
                hash_all=True,
                extra_digests=False,
                deadline=deadline,
                max_kept_bytes=0,
                max_entries=opts.max_entries,
            )
            stream = engine.export_stream(
                rep.base.image_id,
                deadline=deadline,
                labels={"io.releasekit.verify-provenance": "export-base"},
            )
            base = table(inventory_from_tar(stream, plan))
            save_table(base, entry)
        return overlay(base, layer_table(rep.layer, deadline))
    except (ExportAborted, EngineError, OSError) as exc:
        limits.append(f"reference: the locked base's filesystem could not be read: {exc}")
        return None


def verify_provenance(opts: VerifyOptions) -> VerifyResult:
    started = time.monotonic()
    signer = load_signer(opts.signing_key)  # a bad key fails now, before the image is read
    lock = read_lock(opts.lock)
    lock_sha = lock_file_sha256(opts.lock)
    deadline = started + opts.deadline
    notes = Findings()
    limits: list[str] = []
    loaded = _load_manifest(opts, lock, notes)
    manifest = loaded.manifest if loaded is not None else None
    record: BuildRecord | None = None
    provenance: Path | None = None
    if opts.artifacts is not None:
        if not opts.artifacts.is_dir():
            raise InputError(f"release directory {opts.artifacts} does not exist")
        if (opts.artifacts / BUILD_FILE).is_file():
            record = read_build_record(opts.artifacts / BUILD_FILE)
        else:
            notes.add(
                "BUILD_RECORD_UNAVAILABLE",
                f"{opts.artifacts}/build.json is missing",
                severity=Severity.warning,
            )
        provenance = opts.artifacts / PROVENANCE_FILE
    comps = expected_components(lock, record, manifest)
    wheels, wheel_errors = _wheels(opts.artifacts, comps)

    client = docker_client()
    adapter = ImageAdapter(client, opts.image)
    facts = adapter.facts
    attrs = client.image_attrs(facts.id)
    image_config = dict(attrs.get("Config") or {})
    layers = [str(d) for d in (attrs.get("RootFS") or {}).get("Layers") or []]
    reproduction = _reproduce(opts, client, loaded, lock, lock_sha)
    import_names = sorted({n for c in comps.values() if c.installed for n in c.import_names})
    probe = adapter.run_probe(
        import_names, timeout=max(1.0, min(opts.probe_timeout, deadline - time.monotonic()))
    )
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
        deadline=min(time.monotonic() + opts.export_timeout, deadline),
        hash_all=True,
        max_kept_bytes=opts.max_kept_bytes,
        max_entries=opts.max_entries,
    )
    export_started = time.monotonic()
    inventory: Inventory
    try:
        inventory = inventory_from_tar(adapter.export_stream(deadline=plan.deadline or 0.0), plan)
        dpkg_status = True
    except ExportAborted as exc:
        notes.add("EXPORT_ABORTED", f"the image's filesystem could not be read: {exc}")
        inventory = Inventory()
        dpkg_status = False
    export_seconds = time.monotonic() - export_started
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
        static_sites = [s for s in static_sites if s in sites][: opts.max_roots] or static_sites[
            : opts.max_roots
        ]
    real_sites = list(dict.fromkeys(inventory.resolve(s) or s for s in [*sites, *static_sites]))
    dists = installed_distributions(inventory, real_sites)
    owned, md5 = _dpkg(inventory) if dpkg_status else (set(), {})
    ctx = VerifyContext(
        image=facts,
        lock=lock,
        lock_sha256=lock_sha,
        manifest=manifest,
        record=record,
        components=comps,
        wheels=wheels,
        wheel_errors=wheel_errors,
        probe=probe,
        inventory=inventory,
        sites=real_sites,
        sys_path=[inventory.resolve(p) or p for p in sys_path],
        stdlib=[inventory.resolve(p) or p for p in stdlib],
        dists=dists,
        dpkg_owned=owned,
        dpkg_md5=md5,
        allow_local_repos=opts.allow_local_repos,
        cache_dir=opts.cache_dir,
        reproduction=reproduction,
        image_config=image_config,
        layers=layers,
        limits=limits,
    )
    if dpkg_status and reproduction.ok and reproduction.image_id != facts.id:
        ctx.expected_files = _reference_files(opts, client, reproduction, deadline, limits)
    findings = Findings()
    findings.extend(notes)
    outcomes: list[CheckOutcome] = []
    # Nothing was read when the export aborted: only what needs no files can still be judged.
    checks = AllOf(
        *(c for c in all_checks() if dpkg_status or c.name in ("labels", "reproduction", "image-config")),
        name="verify-provenance",
    )
    for check in checks.checks:
        if time.monotonic() > deadline:
            findings.add(
                "VERIFY_LIMIT_REACHED",
                f"deadline: the run passed its {opts.deadline:.0f} s deadline "
                f"(--deadline) before the {check.name} check",
            )
            break
        got = check.run(ctx)
        findings.extend(got)
        outcomes.append(
            CheckOutcome(
                name=check.name, passed=got.passed, findings=len(got), codes=sorted(set(got.codes()))
            )
        )
    report = probe.report or {}
    result = VerifyResult(
        image_id=facts.id,
        image_tags=facts.tags,
        entrypoint=[*facts.entrypoint, *facts.cmd],
        env=facts.env,
        lock_sha256=lock_sha,
        manifest_sha256=lock.manifest.sha256,
        passed=findings.passed,
        checks=outcomes,
        findings=findings,
        probe=ProbeSummary(
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
        ),
        stats=VerifyStats(
            files=len(inventory.files),
            bytes_total=inventory.total_bytes,
            bytes_hashed=inventory.hashed_bytes,
            kept_bytes=inventory.kept_bytes,
            distributions=len(dists),
            seconds_probe=probe.seconds,
            seconds_export=export_seconds,
            seconds_total=time.monotonic() - started,
        ),
    )
    summary_path = opts.summary or (opts.artifacts / SUMMARY_NAME if opts.artifacts else None)
    if summary_path is not None:
        block = ReleasekitBlock(
            lock_sha256=lock_sha,
            manifest_sha256=lock.manifest.sha256,
            image_tags=facts.tags,
            checks=outcomes,
            findings=list(findings),
        )
        write_summary(
            make_summary(image_id=facts.id, passed=result.passed, block=block, provenance=provenance),
            summary_path,
        )
        sign_summary_file(signer, summary_path, facts.id)  # -> verification_summary.dsse.json
        result.summary_path = str(summary_path)
    return result
