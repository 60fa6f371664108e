"""The image is the one the lock and manifest reproduce: same layers by digest, same config, same ID.

Equal image IDs prove every byte (the ID is the sha256 of the config, which names every
layer's digest). Otherwise the layers say where the difference lies: another base, another
release layer, or layers added on top. ``build.json`` is only a claim here: where it
names another image, layer or wheel than the reproduction, that is reported too.
"""

from __future__ import annotations

from releasekit.checks import Examined
from releasekit.findings import Findings
from releasekit.provenance.context import VerifyContext
from releasekit.provenance.reproduce import Reproduction
from releasekit.records.build import BUILD_FILE, BuildRecord


class ReproductionCheck:
    name = "reproduction"
    codes = (
        "REPRODUCTION_FAILED",
        "IMAGE_NOT_REPRODUCED",
        "BASE_LAYERS_MISMATCH",
        "RELEASE_LAYER_MISMATCH",
        "EXTRA_LAYERS",
        "BUILD_CLAIM_MISMATCH",
    )

    def examines(self, ctx: VerifyContext) -> Examined:
        """The image's layers, each judged against the reproduction (or all unproven when it failed)."""
        return Examined.of("layers", ctx.layers)

    def run(self, ctx: VerifyContext) -> Findings:
        found = Findings()
        rep = ctx.reproduction
        if rep is None or not rep.ok:
            why = rep.error if rep is not None else "not attempted"
            found.add(
                "REPRODUCTION_FAILED",
                f"the release could not be rebuilt from the lock: {why}; nothing proves the image's bytes",
            )
            return found
        if ctx.image.id != rep.image_id:
            found.add(
                "IMAGE_NOT_REPRODUCED",
                f"image {ctx.image.id} is not the image the lock reproduces ({rep.image_id})",
                image=ctx.image.id,
            )
            self._layers(ctx, rep, found)
        if ctx.record is not None:
            self._build_claims(ctx.record, rep, found)
        return found

    def _layers(self, ctx: VerifyContext, rep: Reproduction, found: Findings) -> None:
        """Which of the image's layers differ from the reproduction: the base's, the release layer, extra ones."""
        have = list(ctx.layers)
        base = rep.base_diff_ids
        if have[: len(base)] != base:
            differ = sum(1 for i, d in enumerate(base) if i >= len(have) or have[i] != d)
            found.add(
                "BASE_LAYERS_MISMATCH",
                f"the image's first {len(base)} layer(s) are not the locked base's ({differ} differ)",
            )
        elif len(have) == len(base):
            found.add("RELEASE_LAYER_MISMATCH", "the image has the base's layers only, no release layer")
        else:
            if have[len(base)] != rep.layer_diff_id:
                found.add(
                    "RELEASE_LAYER_MISMATCH",
                    f"the release layer is {have[len(base)]}, the reproduced one {rep.layer_diff_id}",
                )
            extra = have[len(base) + 1 :]
            if extra:
                found.add(
                    "EXTRA_LAYERS",
                    f"{len(extra)} layer(s) on top of the release layer: "
                    + ", ".join(d[:19] for d in extra[:5]),
                )

    def _build_claims(self, record: BuildRecord, rep: Reproduction, found: Findings) -> None:
        """What build.json claims (image, release layer, wheels) against what the lock reproduces."""
        if record.image_id != rep.image_id:
            found.add(
                "BUILD_CLAIM_MISMATCH",
                f"build.json claims image {record.image_id}; the lock reproduces {rep.image_id}",
                file=BUILD_FILE,
                field="image_id",
            )
        if record.image.wheels_layer_digest != rep.layer_diff_id:
            found.add(
                "BUILD_CLAIM_MISMATCH",
                f"build.json claims release layer {record.image.wheels_layer_digest}; "
                f"reproduced {rep.layer_diff_id}",
                file=BUILD_FILE,
                field="image.wheels_layer_digest",
            )
        rebuilt = {c.name: c for c in rep.components}
        for claimed in record.components:
            mine = rebuilt.get(claimed.name)
            if mine is None or claimed.wheel_sha256 != mine.wheel_sha256:
                found.add(
                    "BUILD_CLAIM_MISMATCH",
                    f"build.json claims wheel sha256 {claimed.wheel_sha256} for {claimed.name}; "
                    f"reproduced {mine.wheel_sha256 if mine else 'nothing'}",
                    file=BUILD_FILE,
                    component=claimed.name,
                    field="wheel_sha256",
                )
