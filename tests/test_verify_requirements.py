"""verify-provenance's ``requirements`` check on a fake site-packages tree (issue 44: complete as well as genuine).

The image's filesystem is a real tar read by the verifier's own reader; its interpreter is Python 3.12
on arm64, so markers are judged for that image and not for the host running the test (3.11 here
and in CI): a requirement only 3.12 needs is flagged, one only older Pythons need is not. The
rehearsal tests compare the same check with ``pip check`` run in the real images.
"""

from __future__ import annotations

import io
import tarfile
from types import SimpleNamespace

from releasekit.checks import AllOf
from releasekit.docker_engine import ImageFacts
from releasekit.findings import Findings
from releasekit.manifest.models import AcceptedRequirement, Policy
from releasekit.provenance.checks import all_checks
from releasekit.provenance.checks.requirements import marker_environment
from releasekit.provenance.context import VerifyContext
from releasekit.provenance.image import ProbeRun
from releasekit.provenance.installed import installed_distributions
from releasekit.provenance.inventory import ReadPlan, inventory_from_tar
from releasekit.records.lock import Lock, LockedBaseImage, LockedManifest, LockedToolchain

SP = "/usr/local/lib/python3.12/site-packages"
LATER = "/usr/lib/python3/dist-packages"

APP = """\
Metadata-Version: 2.1
Name: app
Version: 1.0
Provides-Extra: test
Requires-Dist: missing-pkg>=1
Requires-Dist: needed==2.0
Requires-Dist: ok-pkg>=1,<2
Requires-Dist: Ok_Pkg[fast]
Requires-Dist: pre-pkg>=1.0
Requires-Dist: windows-only; sys_platform == "win32"
Requires-Dist: only-old-pythons; python_version < "3.12"
Requires-Dist: new-python-backport; python_version >= "3.12"
Requires-Dist: x86-only; platform_machine == "x86_64"
Requires-Dist: test-runner; extra == "test"
Requires-Dist: gpu-kernels; extra == "gpu"
Requires-Dist: egg-dir>=1
Requires-Dist: egg-file==0.9
"""


def metadata(name: str, version: str, *requires: str) -> bytes:
    lines = [f"Name: {name}", f"Version: {version}", *(f"Requires-Dist: {r}" for r in requires)]
    return ("\n".join(lines) + "\n\nA description. Requires-Dist: not-a-header\n").encode()


def files() -> dict[str, bytes]:
    return {
        f"{SP}/app-1.0.dist-info/METADATA": APP.encode(),
        f"{SP}/needed-1.5.dist-info/METADATA": metadata("needed", "1.5"),
        f"{SP}/ok_pkg-1.4.dist-info/METADATA": metadata(
            "ok-pkg", "1.4", 'fast-extension>=3; extra == "fast"', 'never-asked; extra == "slow"'
        ),
        f"{SP}/pre_pkg-2.0rc1.dist-info/METADATA": metadata("pre-pkg", "2.0rc1"),
        # .egg-info distributions (a directory with PKG-INFO and requires.txt; a file that is PKG-INFO).
        f"{SP}/egg_dir-1.2-py3.12.egg-info/PKG-INFO": b"Metadata-Version: 1.2\nName: egg-dir\nVersion: 1.2\n",
        f"{SP}/egg_dir-1.2-py3.12.egg-info/requires.txt": (
            b"egg-needs-this\n\n[:python_version < '3']\nonly-python-two\n\n[docs]\nsphinx\n"
        ),
        f"{SP}/egg_file-0.9.egg-info": b"Metadata-Version: 1.1\nName: egg-file\nVersion: 0.9\n",
        # A later site holds another needed, at the version app wants: Python imports the first.
        f"{LATER}/needed-2.0.dist-info/METADATA": metadata("needed", "2.0"),
    }


def image_tar(tree: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        dirs = sorted({p.rsplit("/", i)[0] for p in tree for i in range(1, p.count("/"))} - {""})
        for d in dirs:
            info = tarfile.TarInfo(d.lstrip("/"))
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for path, data in tree.items():
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def context(manifest: object = None, tree: dict[str, bytes] | None = None) -> VerifyContext:
    inv = inventory_from_tar(
        iter([image_tar(files() if tree is None else tree)]), ReadPlan(python_roots=[SP, LATER])
    )
    lock = Lock(
        name="t",
        manifest=LockedManifest(path="m.yaml", sha256="0" * 64, name="t"),
        components={},
        toolchain=LockedToolchain(base_image=LockedBaseImage(name="b")),
    )
    return VerifyContext(
        image=ImageFacts(id="sha256:" + "1" * 64),
        lock=lock,
        lock_sha256="2" * 64,
        manifest=manifest,
        record=None,
        components={},
        wheels={},
        wheel_errors={},
        probe=ProbeRun(ok=True, report={"probe": "releasekit.probe/v1", "python": "3.12.7"}),
        inventory=inv,
        sites=[SP, LATER],
        sys_path=["/usr/local/lib/python312.zip", "/usr/local/lib/python3.12", SP, LATER],
        stdlib=["/usr/local/lib/python3.12"],
        dists=installed_distributions(inv, [SP, LATER]),
        architecture="arm64",
    )


def requirement_findings(ctx: VerifyContext) -> Findings:
    """What every verify-provenance check says about requirements (none did before issue 44)."""
    report = AllOf(*all_checks()).report(ctx)
    found = Findings()
    for _check, findings in report.ran:
        found.extend(f for f in findings if f.code.startswith("REQUIREMENT_"))
    return found


def test_unmet_and_conflicting_requirements_are_named_with_the_image_s_markers() -> None:
    ctx = context()
    assert marker_environment(ctx)["python_version"] == "3.12"
    assert marker_environment(ctx)["platform_machine"] == "aarch64"
    found = requirement_findings(ctx)
    said = sorted((f.code, f.message) for f in found)
    assert said == [
        ("REQUIREMENT_CONFLICT", "app 1.0 requires needed==2.0 (installed: needed 1.5)"),
        (
            "REQUIREMENT_NOT_INSTALLED",
            "app 1.0 requires missing-pkg>=1 (not installed)",
        ),
        (
            "REQUIREMENT_NOT_INSTALLED",
            'app 1.0 requires new-python-backport; python_version >= "3.12" (not installed)',
        ),
        ("REQUIREMENT_NOT_INSTALLED", "egg-dir 1.2 requires egg-needs-this (not installed)"),
        (
            "REQUIREMENT_NOT_INSTALLED",
            'ok-pkg 1.4 requires fast-extension>=3; extra == "fast" '
            "(not installed; through extra [fast], asked for by app)",
        ),
    ], said
    assert all(f.severity == "error" for f in found)
    assert {f.location.path for f in found} == {
        f"{SP}/app-1.0.dist-info",
        f"{SP}/ok_pkg-1.4.dist-info",
        f"{SP}/egg_dir-1.2-py3.12.egg-info",
    }
    # Marker-excluded (Windows, older Pythons, x86_64, an extra nobody asked for), a pre-release that a
    # bare >= accepts, and a name spelled Ok_Pkg: none is a finding.
    text = " ".join(said_message for _, said_message in said)
    skipped = ("windows-only", "only-old-pythons", "x86-only", "test-runner", "gpu-kernels", "pre-pkg")
    for name in (*skipped, "only-python-two", "sphinx", "egg-file"):
        assert name not in text


def test_an_accepted_requirement_is_shown_not_failed_and_an_unused_acceptance_warned() -> None:
    policy = Policy(
        accepted_requirements=[
            AcceptedRequirement(
                requirements=["Missing_Pkg"], required_by="app", reason="GPU-only on a CPU image"
            ),
            AcceptedRequirement(requirements=["needed"], required_by="someone-else", reason="not app's"),
        ]
    )
    found = requirement_findings(context(SimpleNamespace(policy=policy)))
    by_code = {f.code: f for f in found}
    accepted = by_code["REQUIREMENT_ACCEPTED"]
    assert accepted.severity == "info"
    assert accepted.message == (
        "app 1.0 requires missing-pkg>=1 (not installed); accepted by the manifest: GPU-only on a CPU image"
    )
    assert "REQUIREMENT_CONFLICT" in by_code  # the acceptance names another requirer
    assert by_code["REQUIREMENT_ACCEPTANCE_UNUSED"].severity == "warning"
    assert sorted(f.code for f in found if f.severity == "error") == [
        "REQUIREMENT_CONFLICT",
        "REQUIREMENT_NOT_INSTALLED",
        "REQUIREMENT_NOT_INSTALLED",
        "REQUIREMENT_NOT_INSTALLED",
    ]


def test_release_notes_show_the_accepted_requirements_and_the_switches() -> None:
    from pathlib import Path

    from records_support import notes_build_record

    from releasekit.builder.release_notes import ReleaseNotesPlan, render_release_notes, with_manifest
    from releasekit.manifest import load_manifest
    from releasekit.manifest.models import RuntimeSwitch

    manifest = load_manifest(Path(__file__).parent.parent / "manifests" / "ff-next.yaml").manifest
    policy = manifest.policy.model_copy(
        update={
            "accepted_requirements": [
                AcceptedRequirement(requirements=["cuda-python"], required_by="b12x", reason="GPU only")
            ],
            "runtime_switches": [RuntimeSwitch(name="NCCL_P2P_LEVEL", value="SYS", reason="PCIe box")],
        }
    )
    cells = [c.model_copy(update={"env": {"VLLM_B": "0"}}) for c in manifest.validation.cells[:1]]
    validation = manifest.validation.model_copy(update={"cells": cells})
    manifest = manifest.model_copy(update={"policy": policy, "validation": validation})
    text = render_release_notes(notes_build_record("r"), with_manifest(ReleaseNotesPlan(), manifest))
    assert "## Requirements accepted unmet" in text
    assert "- `cuda-python` required by `b12x`: GPU only" in text
    assert "- `NCCL_P2P_LEVEL=SYS`: PCIe box" in text
    assert f"- cell `{cells[0].id}`: `VLLM_B=0`" in text
    assert "Requirements accepted" not in render_release_notes(notes_build_record("r"))


def test_hostile_metadata_is_read_within_bounds_and_said() -> None:
    """A METADATA with more Requires-Dist lines than the bound, an overlong line and one that is no
    requirement: warnings naming the distribution, the first lines judged, nothing raised."""
    from releasekit.provenance.checks.requirements import MAX_REQUIREMENT_CHARS, MAX_REQUIREMENTS

    lines = [f"dep-{i}" for i in range(MAX_REQUIREMENTS + 10)]
    lines[0] = "pip (>=1"  # no requirement
    lines[1] = "x" * (MAX_REQUIREMENT_CHARS + 1)
    tree = {f"{SP}/evil-1.dist-info/METADATA": metadata("evil", "1", *lines), **files()}
    found = requirement_findings(context(tree=tree))
    unreadable = sorted(f.message for f in found if f.code == "REQUIREMENT_UNREADABLE")
    assert len(unreadable) == 3 and all(m.startswith("evil 1: ") for m in unreadable)
    assert f"{MAX_REQUIREMENTS + 10} Requires-Dist lines; the first {MAX_REQUIREMENTS} read" in unreadable[0]
    assert unreadable[1].startswith("evil 1: Requires-Dist 'pip (>=1' is not a requirement")
    assert unreadable[2].startswith("evil 1: Requires-Dist 'xxx") and "longer than 4096" in unreadable[2]
    evil = [f for f in found if f.code == "REQUIREMENT_NOT_INSTALLED" and f.message.startswith("evil ")]
    assert len(evil) == MAX_REQUIREMENTS - 2
