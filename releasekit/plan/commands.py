"""CLI commands of the plan stage: ``plan lock|check|compose`` and ``audit release-only|pins``.

Each command parses, calls one service function, renders the returned model.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from releasekit.cli_options import OFFLINE, allow_local_flag, json_flag, mirror_option, name_value_options
from releasekit.errors import InputError

if TYPE_CHECKING:
    from releasekit.findings import Findings
    from releasekit.records.lock import Lock
    from releasekit.records.plan_check import PlanCheckResult
    from releasekit.records.release_only import ReleaseOnlyReport

plan_app = typer.Typer(help="Lock and check the merge plan against git.", no_args_is_help=True)
audit_app = typer.Typer(
    help="Audit release inputs: release-only commits, version pins.", no_args_is_help=True
)

_JSON = json_flag("Machine-readable output on stdout.")
_LOCAL = allow_local_flag("Allow file:// and local paths as repositories (tests, demos).")
_CACHE = typer.Option(
    None, "--cache", help="Mirror cache directory (default $RELEASEKIT_CACHE/git or ~/.cache/releasekit/git)."
)
_NO_FETCH = typer.Option(
    False, "--no-fetch", help="Use the mirror cache as it is (fetch only repositories never fetched)."
)
_NO_FORGE = typer.Option(
    False, "--no-forge", help="Do not ask the forge (GitHub) about pull requests; recorded as absent."
)
_MIRROR = mirror_option(
    "URL=PATH: read the repository URL from the local copy PATH (repeatable; also RELEASEKIT_MIRRORS)."
)


def _mirrors(specs: list[str], offline: bool) -> None:
    from releasekit.git.mirrors import use_options

    use_options(specs, offline)


def _exit(findings: Findings) -> None:
    raise typer.Exit(0 if findings.passed else 1)


@plan_app.command("lock")
def lock_cmd(
    manifest: Path = typer.Argument(..., help="The release manifest (YAML)."),
    output: Path = typer.Option(..., "-o", "--output", help="Where to write lock.json."),
    wheelhouse: list[Path] = typer.Option(
        [], "--wheelhouse", help="Directory holding pinned wheels (repeatable)."
    ),
    compose: bool = typer.Option(
        False, "--compose", help="Also record the tree of canonical + planned PRs merged in order."
    ),
    strict: bool = typer.Option(
        False, "--strict", help="Warnings are errors: an unverified wheel source, unchecked wheel tags."
    ),
    download_dir: Path | None = typer.Option(
        None, "--download-dir", help="Keep the wheels fetched from an index here (a wheelhouse for build)."
    ),
    models: list[str] = typer.Option(
        [],
        "--models",
        help="Lock validation.models: a Hugging Face cache DIR, or NAME=DIR for a model directory (repeatable).",
    ),
    datasets: bool = typer.Option(
        False, "--datasets", help="Lock validation.datasets: sha256 and record count of each file."
    ),
    cache: Path | None = _CACHE,
    allow_local_repos: bool = _LOCAL,
    no_fetch: bool = _NO_FETCH,
    no_forge: bool = _NO_FORGE,
    mirror: list[str] = _MIRROR,
    offline: bool = OFFLINE,
    as_json: bool = _JSON,
) -> None:
    """Resolve every branch, PR head, commit and wheel pin of FILE to an exact SHA/sha256."""
    _mirrors(mirror, offline)
    from releasekit.docker_engine import LazyEngine
    from releasekit.findings import Findings
    from releasekit.forge import GitHubForges
    from releasekit.manifest import load_manifest
    from releasekit.plan.locking import build_lock
    from releasekit.plan.models_lock import ModelSources

    loaded = load_manifest(manifest)
    findings = Findings()
    lock = build_lock(
        loaded,
        cache_dir=cache,
        wheelhouses=wheelhouse,
        allow_local=allow_local_repos,
        fetch=not no_fetch,
        compose=compose,
        findings=findings,
        strict=strict,
        download_dir=download_dir,
        model_sources=ModelSources.parse(models) if models else None,
        datasets=datasets,
        forge=not no_forge,
        forges=GitHubForges(),
        engine=LazyEngine(timeout=60),  # reached only for a to-be-locked image
    )
    _write_lock(lock, output, findings, as_json)


def _write_lock(lock: Lock, output: Path, findings: Findings, as_json: bool) -> None:
    """Write the lock unless a finding is an error (a wheel that does not fit the image), then say
    so: JSON, or the findings and "not written", or one row per component then what else was locked."""
    from releasekit.records.lock import write_lock

    # Sorted by component, code, path: the output is a function of the inputs.
    findings.findings.sort(key=lambda f: (f.location.component or "", f.code, f.location.path or ""))
    digest = write_lock(lock, output) if findings.passed else None
    from releasekit.report import findings_table, print_json, render_findings, stdout_console

    if as_json:
        forge = {n: c.status for n, c in (lock.forge.components if lock.forge else {}).items()}
        print_json(
            {
                "lock": str(output) if digest else None,
                "sha256": digest,
                "components": sorted(lock.components),
                "forge": forge,
                "findings": findings.model_dump(mode="json"),
            }
        )
        _exit(findings)
    console = stdout_console()
    if digest is None:
        render_findings(findings, console)
        console.print(f"{output} not written")
        _exit(findings)
    rows = []
    for name, comp in lock.components.items():
        if comp.kind == "git":
            rows.append([name, comp.canonical_branch, comp.commit[:12], str(len(comp.pull_requests))])
        else:
            rows.append([name, f"{comp.distribution}=={comp.version}", comp.sha256[:12], "-"])
    console.print(
        findings_table(f"lock {output}", ["component", "branch / pin", "commit / sha256", "PRs"], rows)
    )
    for key, model in lock.models.items():
        console.print(
            f"model {key}: {model.source} {model.hub or ''}@{(model.revision or '-')[:12]}, {len(model.files)} file(s) hashed"
        )
    for key, dataset in lock.datasets.items():
        console.print(
            f"dataset {key}: {dataset.path} sha256 {dataset.sha256[:12]}, {dataset.samples} records"
        )
    if lock.toolchain.base_image.note:
        console.print(f"base image {lock.toolchain.base_image.name}: {lock.toolchain.base_image.note}")
    for name, fc in (lock.forge.components if lock.forge else {}).items():
        if fc.status == "read":
            console.print(f"forge {name}: {fc.repo}, {len(fc.pull_requests)} PRs read from {fc.api_url}")
        else:
            console.print(f"forge {name}: absent ({fc.reason})")
    if len(findings):
        render_findings(findings, console)
    console.print(f"wrote {output} (sha256 {digest})")


def landed_where(commit: str, position: int | None, how: str | None) -> str:
    """ "abc123 (squash, first-parent position 471)": a position counted from the root, never "#471" (a PR)."""
    return f"{commit[:12]} ({how}, first-parent position {position})"


def _render_check(result) -> None:  # noqa: ANN001 - PlanCheckResult
    from releasekit.report import findings_table, render_findings, stdout_console

    console = stdout_console()
    for comp in result.components:
        rows = []
        for st in comp.statuses:
            what = f"#{st.pr}" if st.pr is not None else (st.commit or "")
            where = "-"
            if st.landed_at:
                where = landed_where(st.landed_at, st.landed_position, st.how)
            rows.append([what, st.role, st.state, where, ", ".join(st.codes) or "-"])
        title = f"{comp.component}: {comp.canonical_branch} @ {comp.checked_commit[:12]}"
        console.print(findings_table(title, ["PR", "role", "state", "where it landed", "finding"], rows))
    for report in result.release_only:
        rows = [
            [c.commit[:12], c.kind, f"#{c.carried_by}" if c.carried_by else "-", c.subject]
            for c in report.release_only
        ]
        console.print(
            findings_table(
                f"release-only: {report.release} vs {report.canonical}",
                ["commit", "kind", "carried by", "subject"],
                rows,
            )
        )
    render_findings(result.findings, console, ok_message="the canonical branches hold exactly the merge plan")


@plan_app.command("check")
def check_cmd(
    manifest: Path = typer.Argument(..., help="The release manifest (YAML)."),
    lock: Path | None = typer.Option(None, "--lock", help="Check the locked commits and PR heads."),
    output: Path | None = typer.Option(
        None, "--output", help="Also write the result as JSON (for the publish gate)."
    ),
    release: list[str] = typer.Option(
        [],
        "--release",
        help="COMPONENT=REF: also audit this release branch/commit for release-only commits (repeatable).",
    ),
    pins: list[str] = typer.Option(
        [],
        "--pins",
        help="COMPONENT: also audit the pins at this component's checked commit (repeatable).",
    ),
    pins_repo: Path | None = typer.Option(
        None,
        "--pins-repo",
        help="A clean work tree at a component's checked commit: audit that component's pins.",
    ),
    cache: Path | None = _CACHE,
    allow_local_repos: bool = _LOCAL,
    no_fetch: bool = _NO_FETCH,
    no_forge: bool = typer.Option(
        False,
        "--no-forge",
        help="Judge the forge checks on the lock's forge record; do not ask the forge now.",
    ),
    require_forge: bool = typer.Option(
        False, "--require-forge", help="A forge check that cannot run (no forge data) is an error, not info."
    ),
    mirror: list[str] = _MIRROR,
    offline: bool = OFFLINE,
    as_json: bool = _JSON,
) -> None:
    """Check the canonical branches against the merge plan: merged, in order, nothing superseded or excluded."""
    _mirrors(mirror, offline)
    from releasekit.forge import GitHubForges
    from releasekit.manifest import load_manifest
    from releasekit.plan.check import PlanCheckOptions, check_plan
    from releasekit.records.lock import lock_file_sha256, read_lock

    releases = name_value_options(release, "--release", "COMPONENT=REF")
    loaded = load_manifest(manifest)
    options = PlanCheckOptions(
        lock=read_lock(lock) if lock else None,
        lock_sha256=lock_file_sha256(lock) if lock else None,
        cache_dir=cache,
        allow_local=allow_local_repos,
        fetch=not no_fetch,
        releases=releases,
        pins_repo=pins_repo,
        pins=tuple(pins),
        forge=not no_forge,
        require_forge=require_forge,
    )
    result = check_plan(loaded, options, forges=GitHubForges())
    _emit_check(result, output, as_json)
    _exit(result.findings)


def _emit_check(result: PlanCheckResult, output: Path | None, as_json: bool) -> None:
    """The record to ``--output`` (for the publish gate), then JSON or the table."""
    from releasekit.records.base import write_record
    from releasekit.report import print_json

    if output:
        write_record(result, output)
    if as_json:
        print_json(result.model_dump(mode="json", by_alias=True))
    else:
        _render_check(result)


@plan_app.command("compose")
def compose_cmd(
    manifest: Path = typer.Argument(..., help="The release manifest (YAML)."),
    lock: Path | None = typer.Option(
        None, "--lock", help="Compose from the locked base and heads; compare with the lock's tree."
    ),
    component: list[str] = typer.Option([], "--component", help="Only these components (repeatable)."),
    cache: Path | None = _CACHE,
    allow_local_repos: bool = _LOCAL,
    no_fetch: bool = _NO_FETCH,
    mirror: list[str] = _MIRROR,
    offline: bool = OFFLINE,
    as_json: bool = _JSON,
) -> None:
    """Merge the planned PRs in order onto a fresh checkout of the base; report conflicts and the tree."""
    _mirrors(mirror, offline)
    from releasekit.manifest import load_manifest
    from releasekit.plan.compose import compose_plan
    from releasekit.records.lock import lock_file_sha256, read_lock
    from releasekit.report import findings_table, print_json, render_findings, stdout_console

    loaded = load_manifest(manifest)
    unknown = [c for c in component if c not in loaded.manifest.git_components()]
    if unknown:
        raise InputError(f"no git component named {unknown[0]!r} in {manifest}")
    locked = read_lock(lock) if lock else None
    result = compose_plan(
        loaded,
        lock=locked,
        lock_sha256=lock_file_sha256(lock) if lock else None,
        components=component or None,
        cache_dir=cache,
        allow_local=allow_local_repos,
        fetch=not no_fetch,
    )
    if as_json:
        print_json(result)
    else:
        console = stdout_console()
        for comp in result.components:
            rows = [
                [f"#{s.pr}", s.head[:12], s.result, ", ".join(s.conflicts) or "-", (s.tree or "")[:12]]
                for s in comp.steps
            ]
            console.print(
                findings_table(
                    f"{comp.component}: compose onto {comp.base[:12]}",
                    ["PR", "head", "result", "conflicts", "tree"],
                    rows,
                )
            )
            verdict = (
                ""
                if comp.matches_lock is None
                else (" (matches the lock)" if comp.matches_lock else f" (lock expects {comp.expected_tree})")
            )
            console.print(f"{comp.component}: {comp.counts()}; composed tree {comp.tree}{verdict}")
        render_findings(result.findings, console, ok_message="every planned PR merges cleanly in plan order")
    _exit(result.findings)


@audit_app.command("release-only")
def release_only_cmd(
    release: str = typer.Option(
        ..., "--release", help="Release branch, tag or the commit an image was built from."
    ),
    canonical: str = typer.Option(..., "--canonical", help="Canonical branch (or commit)."),
    repo: str = typer.Option(".", "--repo", help="A local git repository, or a remote URL (mirrored)."),
    manifest: Path | None = typer.Option(
        None, "--manifest", help="Take `carries:` from this manifest's merge plan."
    ),
    component: str | None = typer.Option(
        None, "--component", help="The manifest component the repository is."
    ),
    upstream: str | None = typer.Option(
        None,
        "--upstream",
        help="The fork's upstream head as a revision of the repository (upstream/main, a commit): "
        "its commits are reported once, not as release-only (default: the component's `upstream:`).",
    ),
    cache: Path | None = _CACHE,
    allow_local_repos: bool = _LOCAL,
    no_fetch: bool = _NO_FETCH,
    mirror: list[str] = _MIRROR,
    offline: bool = OFFLINE,
    as_json: bool = _JSON,
) -> None:
    """List commits of the release side whose change is not on canonical (git cherry, across merges too)."""
    _mirrors(mirror, offline)
    from releasekit.plan.audit import release_only_audit

    report = release_only_audit(
        repo,
        release,
        canonical,
        manifest=manifest,
        component=component,
        cache_dir=cache,
        allow_local=allow_local_repos,
        fetch=not no_fetch,
        upstream=upstream,
    )
    if as_json:
        # Plain json, no rich: this command's start is timed against git cherry (docs/benchmarks.md).
        import json
        import sys

        sys.stdout.write(json.dumps(report.model_dump(mode="json"), indent=2) + "\n")
    else:
        _render_release_only(report)
    _exit(report.findings)


def _render_release_only(report: ReleaseOnlyReport) -> None:
    """What the upstream brought (not release-only) first, then the fork's own commits and resolutions."""
    from releasekit.report import findings_table, render_findings, stdout_console

    console = stdout_console()
    origin = report.upstream
    if origin is not None:
        console.print(
            findings_table(
                f"from upstream {origin.repo} {origin.ref}: {origin.commits} commits canonical lacks, "
                "not release-only",
                ["came in through", "how", "upstream commit", "commits", "subject"],
                [
                    [e.commit[:12], e.via, e.upstream_commit[:12], str(e.commits), e.subject]
                    for e in origin.brought_by
                ],
            )
        )
    for kind, title in (("commit", "fork-only commits"), ("merge-resolution", "conflict resolutions")):
        rows = [
            [c.commit[:12], f"#{c.carried_by}" if c.carried_by else "-", c.subject]
            for c in report.release_only
            if c.kind == kind
        ]
        console.print(
            findings_table(
                f"release-only {title}: {report.release} vs {report.canonical} ({report.examined} examined, "
                f"{report.equivalent} equivalent on canonical)",
                ["commit", "carried by", "subject"],
                rows,
            )
        )
    render_findings(report.findings, console, ok_message="every release change is on canonical")


@audit_app.command("pins")
def pins_cmd(
    manifest: Path = typer.Argument(..., help="The release manifest (YAML) with `pins:`."),
    repo: Path = typer.Option(
        ..., "--repo", help="A local git repository (work tree or bare); its commit is read, not its files."
    ),
    commit: str | None = typer.Option(None, "--commit", help="The commit to read (default: HEAD)."),
    component: str | None = typer.Option(
        None, "--component", help="The git component this repository is: applies its `pin_inputs.skip`."
    ),
    lock: Path | None = typer.Option(
        None, "--lock", help="Read the component's locked commit (needs --component)."
    ),
    as_json: bool = _JSON,
) -> None:
    """Every pin must appear with the same version in every build, runtime and release input of one commit."""
    from releasekit.manifest import load_manifest
    from releasekit.plan.pins import pins_service
    from releasekit.records.lock import read_lock
    from releasekit.report import findings_table, print_json, render_findings, stdout_console

    loaded = load_manifest(manifest)
    locked_commit = None
    if lock is not None:
        if component is None:
            raise InputError("--lock needs --component: which component's locked commit to read")
        locked = read_lock(lock).git_components().get(component)
        if locked is None:
            raise InputError(f"{lock} locks no git component named {component!r}")
        locked_commit = locked.commit
    result = pins_service(loaded.manifest, repo, rev=commit, component=component, locked_commit=locked_commit)
    if as_json:
        print_json(result)
    else:
        console = stdout_console()
        rows = [
            [
                f"{o.file}:{o.line}",
                o.package,
                o.found or "(unpinned)",
                o.expected,
                o.scope,
                "ok" if o.agrees else "DISAGREES",
            ]
            for o in result.occurrences
        ]
        console.print(
            findings_table(
                f"pins in {repo} @ {result.commit[:12]} ({result.files_scanned} release inputs read, "
                f"{len(result.skipped)} skipped)",
                ["where", "package", "found", "pin", "scope", ""],
                rows,
            )
        )
        render_findings(result.findings, console, ok_message="every pin agrees")
    _exit(result.findings)


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the root app."""
    app.add_typer(plan_app, name="plan")
    app.add_typer(audit_app, name="audit")
