"""The ``rpm -Vp`` check: installed files match their RECORD, and that RECORD matches the built wheel's.

Checking the installed RECORD alone proves nothing against someone who edits a file and
rewrites RECORD to match; the wheel the build wrote (its sha256 is in the lock or the
build record) is the reference the installed RECORD must agree with.
"""

from __future__ import annotations

import posixpath
import re

from releasekit.checks import Examined
from releasekit.findings import Findings, Severity
from releasekit.provenance.context import NeedsImageFiles, VerifyContext
from releasekit.provenance.installed import INSTALLER_FILES, InstalledDist, RecordRow, WheelRecord
from releasekit.provenance.inventory import Inventory

_DATA_LIB = re.compile(r"^[^/]+\.data/(purelib|platlib)/(.+)$")
_LIMIT = 20  # findings of one kind per distribution before summarising


class RecordCheck(NeedsImageFiles):
    name = "records"
    codes = (
        "COMPONENT_NOT_INSTALLED",
        "RECORD_MISSING",
        "RECORD_UNSAFE_PATH",
        "RECORD_FILE_MISSING",
        "RECORD_HASH_MISMATCH",
        "VERSION_MISMATCH",
        "WHEEL_HASH_MISMATCH",
        "WHEEL_RECORD_MISMATCH",
        "WHEEL_UNAVAILABLE",
        "RECORD_FILE_UNCHECKED",
    )

    def examines(self, ctx: VerifyContext) -> Examined:
        """Every installed distribution (its RECORD against its files) and every installed component's."""
        names = {f"{d.name} {d.version}" for d in ctx.dists}
        names |= {f"component {n}" for n, c in ctx.components.items() if c.installed}
        return Examined.of("distributions", names)

    def run(self, ctx: VerifyContext) -> Findings:
        found = Findings()
        for installed in ctx.dists:
            if f"{installed.dist_info}/RECORD" in ctx.dpkg_owned:
                # A Debian-packaged distribution: dpkg moved its scripts and owns its files;
                # its md5sums are the reference (UnownedFilesCheck verifies them).
                continue
            verify_installed_files(ctx.inventory, installed, found)
        for name, comp in ctx.components.items():
            if not comp.installed:
                continue
            dist = ctx.dist_for(comp)
            if dist is None:
                found.add(
                    "COMPONENT_NOT_INSTALLED",
                    f"distribution {comp.distribution or '?'} of component {name} is not installed",
                    component=name,
                )
                continue
            if comp.version and dist.version != comp.version:
                found.add(
                    "VERSION_MISMATCH",
                    f"{dist.name} {dist.version} is installed; the build made {comp.version}",
                    component=name,
                    path=dist.dist_info,
                )
            if dist.record is None:
                found.add(
                    "RECORD_MISSING",
                    f"{dist.dist_info} has no RECORD: its files cannot be verified",
                    component=name,
                    path=dist.dist_info,
                )
                continue
            wheel = ctx.wheels.get(name)
            if wheel is None:
                why = ctx.wheel_errors.get(name, "no wheel file in the release directory")
                found.add(
                    "WHEEL_UNAVAILABLE",
                    f"cannot compare with the built wheel: {why}",
                    severity="warning",
                    component=name,
                )
                continue
            if comp.wheel_sha256 and wheel.sha256 != comp.wheel_sha256:
                found.add(
                    "WHEEL_HASH_MISMATCH",
                    f"{wheel.filename} has sha256 {wheel.sha256[:16]}…; the lock/build record says {comp.wheel_sha256[:16]}…",
                    component=name,
                    path=wheel.filename,
                )
            self._against_wheel(dist, wheel, name, found)
        return found

    def _against_wheel(
        self, dist: InstalledDist, wheel: WheelRecord, component: str, found: Findings
    ) -> None:
        installed = {row.path: row for row in dist.record or []}
        dist_info = posixpath.basename(dist.dist_info)
        problems: list[str] = []
        for path, row in wheel.rows.items():
            match = _DATA_LIB.match(path)
            if match:
                path = match.group(2)
            elif path.split("/", 1)[0].endswith(".data"):
                continue  # scripts/headers/data: installers rewrite or relocate them
            if path.startswith(wheel.dist_info + "/") and path.split("/", 1)[1] in INSTALLER_FILES:
                continue
            path = (
                path.replace(wheel.dist_info + "/", dist_info + "/", 1)
                if path.startswith(wheel.dist_info + "/")
                else path
            )
            have = installed.get(path)
            if have is None:
                problems.append(f"{path} is in the wheel but not in the installed RECORD")
            elif (have.algorithm, have.digest) != (row.algorithm, row.digest):
                problems.append(
                    f"{path} has a different hash in the installed RECORD than in the built wheel"
                )
        wheel_paths = {(_DATA_LIB.match(p).group(2) if _DATA_LIB.match(p) else p) for p in wheel.rows}  # type: ignore[union-attr]
        wheel_paths = {p.replace(wheel.dist_info + "/", dist_info + "/", 1) for p in wheel_paths}
        for path, row in installed.items():
            if path in wheel_paths or row.digest is None:
                continue
            if path.startswith(dist_info + "/") and path.split("/", 1)[1] in INSTALLER_FILES:
                continue
            if path.startswith("../"):
                continue  # console scripts the installer generated from entry_points.txt
            problems.append(f"{path} is in the installed RECORD but not in the built wheel")
        for text in problems[:_LIMIT]:
            found.add(
                "WHEEL_RECORD_MISMATCH",
                f"{dist.name}: {text} ({wheel.filename})",
                component=component,
                path=dist.dist_info,
            )
        if len(problems) > _LIMIT:
            found.add(
                "WHEEL_RECORD_MISMATCH",
                f"{dist.name}: {len(problems) - _LIMIT} more difference(s)",
                component=component,
                path=dist.dist_info,
            )


def verify_installed_files(inventory: Inventory, dist: InstalledDist, found: Findings) -> None:
    """Every file RECORD lists exists in the image with that sha256 and size (the benchmark times this)."""
    for path in dist.unsafe_paths:
        found.add(
            "RECORD_UNSAFE_PATH",
            f"RECORD of {dist.name} names {path!r}, outside the filesystem root",
            path=dist.dist_info,
        )
    missing = mismatched = unchecked = 0
    for target, row in sorted(dist.files.items()):
        if row.digest is None:
            continue  # RECORD itself and byte-code: listed without a hash by design
        entry = inventory.files.get(target)
        if entry is None or entry.kind == "symlink":
            real = inventory.resolve(target)
            entry = inventory.files.get(real) if real else None
        if entry is None or entry.kind != "file":
            missing += 1
            if missing <= _LIMIT:
                found.add(
                    "RECORD_FILE_MISSING",
                    f"{dist.name}: {row.path} is in RECORD but not a file in the image",
                    path=target,
                )
            continue
        if row.algorithm != "sha256":
            found.add(
                "RECORD_HASH_MISMATCH",
                f"{dist.name}: {row.path} uses hash {row.algorithm!r}, not sha256",
                path=target,
            )
            continue
        if entry.sha256 is None:
            if target not in inventory.too_large:  # FILE_TOO_LARGE already says so
                unchecked += 1
                if unchecked <= _LIMIT:
                    found.add(
                        "RECORD_FILE_UNCHECKED",
                        f"{dist.name}: {row.path} lies outside the directories the verifier hashes",
                        severity=Severity.warning,
                        path=target,
                    )
            continue
        if entry.sha256 != row.digest or (row.size is not None and row.size != entry.size):
            mismatched += 1
            if mismatched <= _LIMIT:
                found.add(
                    "RECORD_HASH_MISMATCH",
                    f"{dist.name}: {row.path} differs from its RECORD hash",
                    path=target,
                )
    for code, count in (("RECORD_FILE_MISSING", missing), ("RECORD_HASH_MISMATCH", mismatched)):
        if count > _LIMIT:
            found.add(code, f"{dist.name}: {count - _LIMIT} more file(s) like the above", path=dist.dist_info)


__all__ = ["RecordCheck", "RecordRow", "verify_installed_files"]
