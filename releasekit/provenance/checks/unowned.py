"""Files on the import path that no RECORD (and no dpkg package) owns: copied trees, stray modules, injection.

Ownership is what installers recorded: every installed distribution's RECORD plus, on a
Debian base, dpkg's file lists. Anything else under a directory Python imports from is
an overlay, however it got there.
"""

from __future__ import annotations

import posixpath
from collections import defaultdict

from releasekit.checks import Examined
from releasekit.findings import Findings, Severity
from releasekit.provenance.context import NeedsImageFiles, VerifyContext

_CUSTOMIZE = ("sitecustomize", "usercustomize")


def scan_roots(ctx: VerifyContext) -> list[str]:
    """Directories whose every file must be owned: site dirs, sys.path entries, PYTHONPATH dirs."""
    roots: list[str] = []
    dpkg = bool(ctx.dpkg_owned)
    pythonpath = [p for p in ctx.image.env.get("PYTHONPATH", "").split(":") if p.startswith("/")]
    for path in [*ctx.sites, *ctx.sys_path, *pythonpath]:
        real = ctx.inventory.resolve(path) or path
        if real == "/" or real in roots:
            continue
        entry = ctx.inventory.files.get(real)
        if entry is None or entry.kind != "dir":
            continue
        # The interpreter's own library is owned by dpkg; without a dpkg database it cannot be judged.
        if real in ctx.stdlib and not dpkg:
            continue
        roots.append(real)
    return roots


def _top(path: str, root: str) -> str:
    return root.rstrip("/") + "/" + path[len(root.rstrip("/")) + 1 :].split("/", 1)[0]


class UnownedFilesCheck(NeedsImageFiles):
    name = "unowned-files"
    codes = (
        "UNOWNED_FILE",
        "PTH_INJECTION",
        "SITECUSTOMIZE",
        "DPKG_FILE_MODIFIED",
        "UNSAFE_ARCHIVE_MEMBER",
        "FILE_TOO_LARGE",
    )

    def examines(self, ctx: VerifyContext) -> Examined:
        """Every file under the Python roots (site directories, sys.path, PYTHONPATH)."""
        roots = scan_roots(ctx)
        return Examined.of(
            "files",
            (
                p
                for p, e in ctx.inventory.files.items()
                if e.kind != "dir" and any(p.startswith(r.rstrip("/") + "/") for r in roots)
            ),
        )

    def run(self, ctx: VerifyContext) -> Findings:
        found = Findings()
        inv = ctx.inventory
        self._unread(ctx, found)
        # Longest first, so nested roots (lib-dynload inside the stdlib dir) claim their own files.
        roots = sorted(scan_roots(ctx), key=len, reverse=True)
        groups: dict[str, list[str]] = defaultdict(list)
        modified: list[str] = []
        for path, entry in inv.files.items():
            if entry.kind == "dir":
                continue
            root = next((r for r in roots if path.startswith(r.rstrip("/") + "/")), None)
            if root is None:
                continue
            if ctx.owned(path):
                if path in ctx.dpkg_owned and ctx.dpkg_intact(path) is False:
                    modified.append(path)
                continue
            name = posixpath.basename(path)
            stem = name.split(".", 1)[0]
            if name.endswith(".pth") and posixpath.dirname(path) == root:
                found.add(
                    "PTH_INJECTION",
                    "a .pth file no distribution installed: Python runs its import lines at start-up",
                    path=path,
                )
            elif stem in _CUSTOMIZE or posixpath.basename(posixpath.dirname(path)) in _CUSTOMIZE:
                found.add(
                    "SITECUSTOMIZE",
                    f"{stem} module no distribution installed: it runs at every start-up",
                    path=path,
                )
            else:
                groups[_top(path, root)].append(path)
        for top, paths in sorted(groups.items()):
            sample = ", ".join(posixpath.relpath(p, posixpath.dirname(top)) for p in sorted(paths)[:3])
            more = f" and {len(paths) - 3} more" if len(paths) > 3 else ""
            found.add(
                "UNOWNED_FILE",
                f"{len(paths)} file(s) on the import path owned by no RECORD or package: {sample}{more}",
                path=top,
            )
        for path in sorted(modified)[:20]:
            found.add(
                "DPKG_FILE_MODIFIED",
                "differs from the bytes its Debian package installed (dpkg md5sums)",
                path=path,
            )
        if len(modified) > 20:
            found.add("DPKG_FILE_MODIFIED", f"{len(modified) - 20} more modified package file(s)")
        self._customize(ctx, found)
        return found

    def _unread(self, ctx: VerifyContext, found: Findings) -> None:
        """Members the reader refused (unsafe names) or did not hash (over the per-file limit)."""
        for name in ctx.inventory.refused[:20]:
            found.add(
                "UNSAFE_ARCHIVE_MEMBER",
                f"the image's filesystem has an unsafe member name {name!r}",
                path=name,
            )
        for path in ctx.inventory.too_large[:20]:
            found.add(
                "FILE_TOO_LARGE", "file is larger than the verifier's per-file limit; not hashed", path=path
            )

    def _customize(self, ctx: VerifyContext, found: Findings) -> None:
        """sitecustomize/usercustomize that a package owns must still be the package's bytes."""
        reported = {f.location.path for f in found if f.code == "SITECUSTOMIZE"}
        candidates: set[str] = set()
        for directory in ctx.sys_path:
            for stem in _CUSTOMIZE:
                candidates.add(f"{directory.rstrip('/')}/{stem}.py")
        report = ctx.probe.report or {}
        for path in (report.get("customize") or {}).values():
            if isinstance(path, str):
                candidates.add(path)
        for path in sorted(candidates):
            if path in reported:
                continue
            entry = ctx.inventory.get(path)
            if entry is None:
                continue
            real = ctx.inventory.resolve(path) or path
            if not (ctx.owned(path) or ctx.owned(real)):
                found.add("SITECUSTOMIZE", "start-up customisation module owned by no package", path=path)
                continue
            intact = ctx.dpkg_intact(real)
            if intact is False:
                found.add(
                    "SITECUSTOMIZE", f"{real} differs from the bytes its Debian package installed", path=path
                )
            elif intact is None and ctx.owner_of(real) is None:
                found.add(
                    "SITECUSTOMIZE",
                    f"{real} has no package checksum to verify it against",
                    severity=Severity.info,
                    path=path,
                )
