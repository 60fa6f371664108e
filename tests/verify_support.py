"""Verify contexts made by hand for the checks' unit tests (test_verify_units.py, test_check_evidence.py)."""

from __future__ import annotations


def toolchain_context(toolchain: dict, pytorch: str | None, cuda: str | None):
    """A verify context holding only a lock with these versions and a probe that reported ``toolchain``."""
    from releasekit.docker_engine import ImageFacts
    from releasekit.provenance.context import VerifyContext
    from releasekit.provenance.image import ProbeRun
    from releasekit.provenance.inventory import Inventory
    from releasekit.records.lock import Lock, LockedBaseImage, LockedManifest, LockedToolchain

    lock = Lock(
        name="t",
        manifest=LockedManifest(path="m.yaml", sha256="0" * 64, name="t"),
        components={},
        toolchain=LockedToolchain(base_image=LockedBaseImage(name="b"), pytorch=pytorch, cuda=cuda),
    )
    probe = ProbeRun(ok=True, report={"probe": "releasekit.probe/v1", "toolchain": toolchain})
    return VerifyContext(
        image=ImageFacts(id="sha256:" + "1" * 64),
        lock=lock,
        lock_sha256="2" * 64,
        manifest=None,
        record=None,
        components={},
        wheels={},
        wheel_errors={},
        probe=probe,
        inventory=Inventory(),
        sites=[],
        sys_path=[],
        stdlib=[],
        dists=[],
    )
