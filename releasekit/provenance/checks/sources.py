"""Installed ``.py`` sources of git-built components are byte-for-byte the blobs of the locked commit.

The comparison is by git object id (sha1 of ``blob <size>\\0<bytes>``), computed on the
host while the image's filesystem streams past, against ``git ls-tree -r`` of the locked
commit in a mirror. No checkout is needed and nothing from the image touches the disk.
Files the build generates (manifest ``build.generated_files``) are excluded. A file the
version policy ``stamp`` changed (a declared build-time modification in build.json) must
be exactly the stamped content (its recorded git blob), and is accepted only when the
manifest's policy for that component is ``stamp``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from releasekit.checks import Examined
from releasekit.errors import ReleasekitError
from releasekit.findings import Findings, Severity
from releasekit.provenance.context import NeedsImageFiles, VerifyContext
from releasekit.provenance.expected import ExpectedComponent
from releasekit.provenance.installed import InstalledDist

_LIMIT = 20


def locked_blobs(repo: str, commit: str, *, allow_local: bool, cache_dir: str | None) -> dict[str, str]:
    """repo path -> blob id of every file at ``commit``."""
    from releasekit.git import GitFailed, Mirror, ObjectMismatch, verify_commit_objects

    mirror = Mirror(repo, Path(cache_dir) if cache_dir else None, allow_local=allow_local)
    if not mirror.exists() or not mirror.has_commit(commit):
        mirror.update()
    if not mirror.has_commit(commit):
        raise LookupError(f"{mirror.url} has no commit {commit[:12]} (unpublished?)")
    try:
        # The mirror may be the build's: its commit and trees must hash to their names (the blob ids
        # listed are then the commit's own; the image's files are hashed against those ids).
        verify_commit_objects(mirror.git, commit, blobs=False)
        out = mirror.git.run("ls-tree", "-r", "-z", "--full-tree", "--end-of-options", commit)
    except (GitFailed, ObjectMismatch) as exc:
        raise LookupError(f"git ls-tree {commit[:12]} failed: {exc}") from None
    blobs: dict[str, str] = {}
    for item in out.split("\0"):
        if not item:
            continue
        meta, _, path = item.partition("\t")
        parts = meta.split()
        if len(parts) == 3 and parts[1] == "blob":
            blobs[path] = parts[2]
    return blobs


@dataclass(frozen=True)
class _Installed:
    """One installed git component: its name, what the build says of it, its installed distribution."""

    name: str
    comp: ExpectedComponent
    dist: InstalledDist


class SourceBlobCheck(NeedsImageFiles):
    name = "source-blobs"
    codes = (
        "SOURCE_BLOB_MISMATCH",
        "SOURCE_NOT_IN_COMMIT",
        "SOURCE_UNVERIFIABLE",
        "SOURCE_MODIFICATION_UNDECLARED",
    )

    def examines(self, ctx: VerifyContext) -> Examined:
        """Every installed file of each installed git component, against the locked commit's blobs."""
        comps = [
            c for c in ctx.components.values() if c.kind == "git" and c.installed and c.commit and c.repo
        ]
        if not comps:
            return Examined.of("files", (), absent="no installed component is built from a git commit")
        return Examined.of("files", (p for c in comps if (d := ctx.dist_for(c)) is not None for p in d.files))

    def run(self, ctx: VerifyContext) -> Findings:
        found = Findings()
        for name, comp in ctx.components.items():
            if comp.kind != "git" or not comp.installed or not comp.commit or not comp.repo:
                continue
            dist = ctx.dist_for(comp)
            if dist is None:
                continue
            try:
                blobs = locked_blobs(
                    comp.repo, comp.commit, allow_local=ctx.allow_local_repos, cache_dir=ctx.cache_dir
                )
            except (ReleasekitError, LookupError) as exc:
                found.add(
                    "SOURCE_UNVERIFIABLE",
                    f"cannot read the locked commit's tree: {exc}",
                    component=name,
                    commit=comp.commit,
                )
                continue
            stamped = self._declared_modifications(name, comp, blobs, found)
            self._compare(ctx, _Installed(name, comp, dist), blobs, found, stamped)
        return found

    @staticmethod
    def _declared_modifications(name: str, comp, blobs: dict[str, str], found: Findings) -> dict[str, str]:
        """repo path -> the blob a stamped file must have; a modification the policy does not declare is a finding."""
        stamped: dict[str, str] = {}
        for mod in comp.modifications:
            path, blob = mod.get("path"), mod.get("after_blob")
            if not path:
                continue  # an environment stamp changes no file
            if comp.version_policy != "stamp":
                found.add(
                    "SOURCE_MODIFICATION_UNDECLARED",
                    f"the build record declares a change of {path}, but the version policy is "
                    f"{comp.version_policy or 'scm'}, not stamp",
                    component=name,
                    commit=comp.commit,
                    path=path,
                )
            elif path not in blobs:
                found.add(
                    "SOURCE_MODIFICATION_UNDECLARED",
                    f"the build record declares a change of {path}, which the locked commit does not have",
                    component=name,
                    commit=comp.commit,
                    path=path,
                )
            elif isinstance(blob, str):
                stamped[path] = blob
        return stamped

    def _compare(
        self,
        ctx: VerifyContext,
        installed: _Installed,
        blobs: dict[str, str],
        found: Findings,
        stamped: dict[str, str] | None = None,
    ) -> None:
        name, comp, dist = installed.name, installed.comp, installed.dist
        short = (comp.commit or "")[:12]  # run() compares only components with a commit
        sub = (comp.subdirectory or "").strip("/")
        prefixes = [p for p in (f"{sub}/" if sub else "", f"{sub}/src/" if sub else "src/")]
        generated = {g.strip("/") for g in comp.generated_files}
        mismatched: list[str] = []
        missing: list[str] = []
        for path in sorted(dist.files):
            if not path.endswith(".py") or not path.startswith(dist.site + "/"):
                continue
            rel = path[len(dist.site) + 1 :]
            if rel in generated or any(f"{p}{rel}" in generated for p in prefixes):
                continue
            entry = ctx.inventory.files.get(path)
            if entry is None or entry.blob is None:
                continue  # RECORD_FILE_MISSING reports it
            repo_path = next((f"{p}{rel}" for p in prefixes if f"{p}{rel}" in blobs), None)
            if repo_path is None:
                missing.append(rel)
            elif repo_path in (stamped or {}):
                if (stamped or {})[repo_path] != entry.blob:
                    mismatched.append(rel)  # not even the declared stamped content
            elif blobs[repo_path] != entry.blob:
                mismatched.append(rel)
        for rel in mismatched[:_LIMIT]:
            found.add(
                "SOURCE_BLOB_MISMATCH",
                f"installed {rel} is not the blob at the locked commit {short}",
                component=name,
                commit=comp.commit,
                path=f"{dist.site}/{rel}",
            )
        for rel in missing[:_LIMIT]:
            found.add(
                "SOURCE_NOT_IN_COMMIT",
                f"installed {rel} is not in the locked commit {short} (declare generated files in the manifest)",
                component=name,
                commit=comp.commit,
                path=f"{dist.site}/{rel}",
            )
        extra = len(mismatched) + len(missing) - 2 * _LIMIT
        if extra > 0:
            found.add(
                "SOURCE_BLOB_MISMATCH",
                f"{extra} more source file(s) differ",
                severity=Severity.error,
                component=name,
                commit=comp.commit,
            )
