"""Version metadata names the locked commit: ``+g<sha>`` local versions, direct_url.json, generated _version.py."""

from __future__ import annotations

import re

from releasekit.checks import Examined
from releasekit.findings import Findings, Severity
from releasekit.provenance.context import NeedsImageFiles, VerifyContext

LOCAL_COMMIT = re.compile(r"(?:^|[+.])g([0-9a-f]{7,40})(?=$|[.+])")
_TEXT_COMMIT = re.compile(r"(?<![0-9a-zA-Z])g?([0-9a-f]{40}|(?<=g)[0-9a-f]{7,39})(?![0-9a-f])")


def commit_agrees(named: str, locked: str) -> bool:
    """Full SHAs must be equal; an abbreviation (at least 7 hex digits) must be a prefix."""
    named = named.lower()
    return len(named) >= 7 and (named == locked if len(named) == 40 else locked.startswith(named))


class VersionCommitCheck(NeedsImageFiles):
    name = "version-commit"
    codes = (
        "VERSION_COMMIT_MISMATCH",
        "VERSION_COMMIT_MISSING",
        "DIRECT_URL_COMMIT_MISMATCH",
        "GENERATED_VERSION_MISMATCH",
    )

    def examines(self, ctx: VerifyContext) -> Examined:
        """Each installed git component's distribution (its version and version files)."""
        comps = [(n, c) for n, c in ctx.components.items() if c.kind == "git" and c.installed and c.commit]
        if not comps:
            return Examined.of(
                "distributions", (), absent="no installed component is built from a git commit"
            )
        return Examined.of("distributions", (d.name for _, c in comps if (d := ctx.dist_for(c)) is not None))

    def run(self, ctx: VerifyContext) -> Findings:
        found = Findings()
        for name, comp in ctx.components.items():
            if comp.kind != "git" or not comp.installed or not comp.commit:
                continue
            dist = ctx.dist_for(comp)
            if dist is None:
                continue
            local = dist.version.partition("+")[2]
            named = LOCAL_COMMIT.findall("+" + local) if local else []
            if not named and comp.version_policy == "static":
                # Declared: the commit is proven by the labels and the source-blob check instead.
                found.add(
                    "VERSION_COMMIT_MISSING",
                    f"{dist.name} {dist.version} does not name a commit (version policy static)",
                    severity=Severity.info,
                    component=name,
                    path=dist.dist_info,
                )
            elif not named:
                found.add(
                    "VERSION_COMMIT_MISSING",
                    f"{dist.name} {dist.version} does not name a commit (+g<sha>)",
                    severity=Severity.warning,
                    component=name,
                    path=dist.dist_info,
                )
            for sha in named:
                if not commit_agrees(sha, comp.commit):
                    found.add(
                        "VERSION_COMMIT_MISMATCH",
                        f"{dist.name} {dist.version} names commit {sha}; the lock says {comp.commit[:12]}",
                        component=name,
                        commit=comp.commit,
                        path=dist.dist_info,
                    )
            vcs = (dist.direct_url or {}).get("vcs_info") if isinstance(dist.direct_url, dict) else None
            commit_id = vcs.get("commit_id") if isinstance(vcs, dict) else None
            if isinstance(commit_id, str) and not commit_agrees(commit_id, comp.commit):
                found.add(
                    "DIRECT_URL_COMMIT_MISMATCH",
                    f"direct_url.json of {dist.name} names commit {commit_id[:12]}; the lock says {comp.commit[:12]}",
                    component=name,
                    path=dist.dist_info + "/direct_url.json",
                )
            for path in self._version_files(ctx, comp, dist):
                data = ctx.inventory.read(path)
                if data is None:
                    continue
                for sha in set(_TEXT_COMMIT.findall(data.decode("utf-8", errors="replace"))):
                    if not commit_agrees(sha, comp.commit):
                        found.add(
                            "GENERATED_VERSION_MISMATCH",
                            f"{path.rsplit('/', 1)[-1]} names commit {sha[:12]}; the lock says {comp.commit[:12]}",
                            component=name,
                            path=path,
                        )
        return found

    @staticmethod
    def _version_files(ctx: VerifyContext, comp, dist) -> list[str]:
        generated = {g.strip("/") for g in comp.generated_files}
        out = []
        for path in dist.files:
            rel = path[len(dist.site) + 1 :]
            if rel in generated or rel.rsplit("/", 1)[-1] in ("_version.py", "version.py"):
                out.append(path)
        return sorted(out)


__all__ = ["VersionCommitCheck", "commit_agrees"]
