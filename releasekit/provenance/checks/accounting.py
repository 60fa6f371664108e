"""Every entry of the exported image is accounted for: the locked base's export plus the reproduced layer.

Used where layer equality cannot prove the image (its ID is not the reproduced one): each
path's type, mode, owner, link target and sha256 must equal the reference's. Anything else
(a ``.pyc``, a ``.zip``, ``/etc/ld.so.preload``, a ``bin/`` wrapper, a link into an
unhashed place, a file another RECORD or dpkg list claims) is an error. No RECORD, dpkg
list, md5sum or status file of the candidate is consulted.
"""

from __future__ import annotations

from releasekit.checks import Examined
from releasekit.findings import Findings
from releasekit.provenance.accounting import differences
from releasekit.provenance.context import NeedsImageFiles, VerifyContext

LIMIT = 50  # findings of one code before one summary line


class FileAccountingCheck(NeedsImageFiles):
    name = "file-accounting"
    codes = ("FILE_UNACCOUNTED", "FILE_MODIFIED", "FILE_REMOVED", "FILE_ACCOUNTING_UNAVAILABLE")

    def examines(self, ctx: VerifyContext) -> Examined:
        """Every path of the image and of the reference; none when the IDs are equal (the layers prove it)."""
        rep = ctx.reproduction
        if rep is not None and rep.ok and rep.image_id == ctx.image.id:
            return Examined.of(
                "files",
                (),
                absent="the image ID is the reproduced one: every layer is proven by the reproduction check",
            )
        return Examined.of("files", {*ctx.inventory.files, *(ctx.expected_files or {})})

    def run(self, ctx: VerifyContext) -> Findings:
        found = Findings()
        rep = ctx.reproduction
        if rep is not None and rep.ok and rep.image_id == ctx.image.id:
            return found  # equal image IDs already prove every byte
        want = ctx.expected_files
        if want is None:
            found.add(
                "FILE_ACCOUNTING_UNAVAILABLE",
                "no reference filesystem (the reproduction failed or the base "
                "could not be exported): the image's files are not accounted for",
            )
            return found
        counts = {"FILE_UNACCOUNTED": 0, "FILE_MODIFIED": 0, "FILE_REMOVED": 0}

        def add(code: str, message: str, path: str) -> None:
            counts[code] += 1
            if counts[code] <= LIMIT:
                found.add(code, message, path=path)

        have = ctx.inventory.files
        for path in sorted(have):
            entry = have[path]
            expected = want.get(path)
            if expected is None:
                what = f"symlink -> {entry.link}" if entry.kind == "symlink" else entry.kind
                add(
                    "FILE_UNACCOUNTED",
                    f"{what} that neither the locked base nor the locked wheels install",
                    path,
                )
                continue
            diff = differences(expected, entry)
            if diff:
                add("FILE_MODIFIED", "; ".join(diff), path)
        for path in sorted(set(want) - set(have)):
            add("FILE_REMOVED", f"the reference has this {want[path].kind}; the image does not", path)
        for code, n in counts.items():
            if n > LIMIT:
                found.add(code, f"{n - LIMIT} more path(s) with {code}")
        return found
