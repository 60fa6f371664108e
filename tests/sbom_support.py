"""An image's files, lock and verify context made by hand, and a signed release directory, for the SBOM
tests (test_sbom.py, test_publish_signed.py)."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
from pathlib import Path

from releasekit.docker_engine import ImageFacts
from releasekit.provenance.context import VerifyContext
from releasekit.provenance.expected import expected_components
from releasekit.provenance.image import ProbeRun
from releasekit.provenance.installed import installed_distributions
from releasekit.provenance.inventory import ReadPlan, inventory_from_tar
from releasekit.provenance.reproduce import Reproduction
from releasekit.provenance.sbom import make_bom, sbom_text
from releasekit.records.build import BaseImageRecord, ComponentRecord
from releasekit.records.lock import (
    Lock,
    LockedBaseImage,
    LockedGitComponent,
    LockedManifest,
    LockedPR,
    LockedToolchain,
    LockedWheelComponent,
    LockedWheelSource,
)
from releasekit.records.sbom import SBOM_FILE

SP = "/usr/lib/python3/dist-packages"
IMAGE = "sha256:" + "ab" * 32
WHEEL = "c" * 64
PINNED = "d" * 64
COMMIT = "1" * 40
TREE = "2" * 40


def record_b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def image_files() -> dict[str, bytes | tuple[str, str]]:
    runtime = b"def answer():\n    return 42\n"
    pinned = b"x = 1\n"
    return {
        f"{SP}/rk_runtime/__init__.py": runtime,
        f"{SP}/rk_runtime/__pycache__/__init__.cpython-311.pyc": b"\x00pyc",
        f"{SP}/rk_runtime-0.1.0.dist-info/METADATA": b"Name: rk-runtime\nVersion: 0.1.0\n",
        f"{SP}/rk_runtime-0.1.0.dist-info/RECORD": (
            f"rk_runtime/__init__.py,sha256={record_b64(runtime)},{len(runtime)}\n"
            "rk_runtime-0.1.0.dist-info/METADATA,,\nrk_runtime-0.1.0.dist-info/RECORD,,\n"
        ).encode(),
        f"{SP}/six.py": pinned,
        f"{SP}/six-1.16.0.dist-info/METADATA": b"Name: six\nVersion: 1.16.0\n",
        f"{SP}/six-1.16.0.dist-info/RECORD": f"six.py,sha256={record_b64(pinned)},{len(pinned)}\n".encode(),
        f"{SP}/Plain_Dist-2.0.dist-info/METADATA": b"Name: Plain_Dist\nVersion: 2.0\n",
        "/var/lib/dpkg/status": (
            b"Package: libc6\nStatus: install ok installed\nArchitecture: amd64\nMulti-Arch: same\n"
            b"Version: 2.36-9\n\nPackage: bash\nStatus: install ok installed\nArchitecture: amd64\n"
            b"Version: 5.2.15-2\n\nPackage: gone\nStatus: deinstall ok config-files\nVersion: 1\n"
        ),
        "/var/lib/dpkg/info/libc6:amd64.list": b"/.\n/lib\n/lib/libc.so.6\n",
        "/var/lib/dpkg/info/bash.list": b"/bin\n/bin/bash\n",
        "/lib/libc.so.6": b"\x7fELF libc",
        "/bin/bash": b"\x7fELF bash",
        "/etc/hostname.local": b"not in any package\n",
        "/usr/bin/sh": ("symlink", "../../bin/bash"),
    }


def image_tar() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        dirs = sorted(
            {
                p.rsplit("/", i)[0]
                for p in image_files()
                for i in range(1, p.count("/"))
                if p.rsplit("/", i)[0]
            }
        )
        for d in dirs:
            info = tarfile.TarInfo(d.lstrip("/"))
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for path, data in image_files().items():
            info = tarfile.TarInfo(path.lstrip("/"))
            if isinstance(data, tuple):
                info.type, info.linkname = tarfile.SYMTYPE, data[1]
                tar.addfile(info)
            else:
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def sbom_lock() -> Lock:
    return Lock(
        name="t",
        manifest=LockedManifest(path="m.yaml", sha256="0" * 64, name="t"),
        components={
            "runtime": LockedGitComponent(
                name="runtime",
                repo="https://example.org/rk/runtime.git",
                canonical_branch="main",
                commit=COMMIT,
                tree=TREE,
                commit_time=1_700_000_000,
                canonical_head=COMMIT,
                pull_requests=[LockedPR(number=7, ref="refs/pull/7/head", head="3" * 40, tree="4" * 40)],
            ),
            "six": LockedWheelComponent(
                name="six",
                distribution="six",
                version="1.16.0",
                filename="six-1.16.0-py2.py3-none-any.whl",
                sha256=PINNED,
                source=LockedWheelSource(repo="https://example.org/six.git", commit="5" * 40),
            ),
        },
        toolchain=LockedToolchain(base_image=LockedBaseImage(name="debian:12")),
    )


def sbom_context(image: str = IMAGE) -> VerifyContext:
    inv = inventory_from_tar(iter([image_tar()]), ReadPlan(python_roots=[SP], hash_all=True))
    lock = sbom_lock()
    comps = expected_components(lock, None, None)
    comps["runtime"].distribution, comps["runtime"].installed = "rk-runtime", True  # as build.json says
    rebuilt = ComponentRecord(name="runtime", kind="git", distribution="rk-runtime", wheel_sha256=WHEEL)
    return VerifyContext(
        image=ImageFacts(id=image, tags=["registry.example/team/app:1.0"]),
        lock=lock,
        lock_sha256="9" * 64,
        manifest=None,
        record=None,
        components=comps,
        wheels={},
        wheel_errors={},
        probe=ProbeRun(ok=True, report={}),
        inventory=inv,
        sites=[SP],
        sys_path=[SP],
        stdlib=[],
        dists=installed_distributions(inv, [SP]),
        reproduction=Reproduction(
            image_id=image,
            base=BaseImageRecord(name="debian:12", image_id="sha256:" + "ee" * 32),
            components=[rebuilt],
        ),
    )


CREATED = "2023-11-14T22:13:20.123456789Z"


def swapped_sbom(text: str) -> str:
    """The attacker's SBOM: still names the image (serial, subject), one component fewer."""
    doc = json.loads(text)
    doc["components"] = doc["components"][1:]
    return json.dumps(doc, indent=2) + "\n"


def signed_release(tmp_path: Path, image_id: str, key: Path | None):
    """A release directory as verify-provenance leaves it: the SBOM, the summary naming its sha256,
    and (with ``key``) the three envelopes and the receipts' envelopes."""
    from publish_support import Release

    from releasekit.signing import load_signer
    from releasekit.signing.statements import (
        sign_receipt_file,
        sign_sbom_file,
        sign_statement_file,
        sign_summary_file,
    )

    release = Release(tmp_path, image_id)
    text = sbom_text(make_bom(sbom_context(image_id), CREATED))
    (release.evidence / SBOM_FILE).write_text(text, encoding="utf-8")
    release.write_verification(sbom_sha256=hashlib.sha256(text.encode()).hexdigest())
    if key is not None:
        signer = load_signer(key)
        sign_statement_file(signer, release.evidence / "provenance.intoto.json")
        sign_summary_file(signer, release.evidence / "verification_summary.json", image_id)
        sign_sbom_file(signer, release.evidence / SBOM_FILE)
        for receipt in sorted(release.receipts.glob("*.json")):  # as validate --signing-key leaves them
            sign_receipt_file(signer, receipt)
    return release, text
