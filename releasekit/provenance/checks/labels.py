"""Image labels agree with the lock (and with the build record, when the release directory is given)."""

from __future__ import annotations

from releasekit.checks import Examined
from releasekit.findings import Findings
from releasekit.provenance.context import VerifyContext


def _expected(ctx: VerifyContext) -> dict[str, tuple[str, str | None]]:
    """Label -> (component, the value the lock gives it; None: the lock has none)."""
    expected: dict[str, tuple[str, str | None]] = {
        "io.releasekit.lock.sha256": ("", ctx.lock_sha256),
        "io.releasekit.manifest.sha256": ("", ctx.lock.manifest.sha256),
        "org.opencontainers.image.base.name": ("", ctx.lock.toolchain.base_image.name),
        "org.opencontainers.image.base.digest": ("", ctx.lock.toolchain.base_image.digest),
    }
    for name, comp in ctx.components.items():
        prefix = f"io.releasekit.component.{name}."
        expected[prefix + "repo"] = (name, comp.repo)
        expected[prefix + "commit"] = (name, comp.commit)
        if comp.kind == "git":
            expected[prefix + "tree"] = (name, comp.tree)
        if comp.installed:
            expected[prefix + "version"] = (name, comp.version)
            expected[prefix + "wheel.sha256"] = (name, comp.wheel_sha256)
    for name, wheel in ctx.lock.wheel_components().items():
        if wheel.source is not None and not wheel.source.verified:  # WHEEL_SOURCE_UNVERIFIED stays said
            expected[f"io.releasekit.component.{name}.source-verification"] = (name, "unverified")
    return expected


class LabelsCheck:
    name = "labels"
    codes = ("LABEL_MISSING", "LABEL_MISMATCH", "BUILD_RECORD_MISMATCH")

    def examines(self, ctx: VerifyContext) -> Examined:
        """Each label the lock gives a value for."""
        return Examined.of(
            "labels", (label for label, (_, want) in _expected(ctx).items() if want is not None)
        )

    def run(self, ctx: VerifyContext) -> Findings:
        found = Findings()
        labels = ctx.image.labels
        expected = _expected(ctx)
        for label, (component, want) in expected.items():
            if want is None:
                continue
            have = labels.get(label)
            if have is None:
                found.add(
                    "LABEL_MISSING",
                    f"image has no label {label} (the lock says {want})",
                    component=component or None,
                    field=label,
                )
            elif have != want:
                found.add(
                    "LABEL_MISMATCH",
                    f"label {label} is {have!r}; the lock says {want!r}",
                    component=component or None,
                    field=label,
                )
        record = ctx.record
        if record is not None:
            if record.image_id and record.image_id != ctx.image.id:
                found.add(
                    "BUILD_RECORD_MISMATCH",
                    f"the build record describes image {record.image_id}, not this image {ctx.image.id}",
                )
            if record.lock_sha256 and record.lock_sha256 != ctx.lock_sha256:
                found.add(
                    "BUILD_RECORD_MISMATCH",
                    f"the build record was made from lock {record.lock_sha256[:12]}, not {ctx.lock_sha256[:12]}",
                )
        return found
