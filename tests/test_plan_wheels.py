"""plan lock's wheel pins: fetched by the real ``pip download`` from a PEP 503 index on 127.0.0.1,
chosen for the image's Python and platform (the toolchain's), tag-checked, unverified sources said aloud."""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import struct
import subprocess
import sys
import threading
import time
import warnings
import zipfile
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest
from cli_run import invoke
from plan_world import plan_lock
from wheels import write_wheel

from releasekit.findings import Findings
from releasekit.manifest import load_manifest
from releasekit.plan.wheels import ImageInterpreter, fit_rank

CP311 = "cp311-cp311-manylinux_2_28_x86_64"
CP312 = "cp312-cp312-manylinux_2_28_x86_64"
DIST, VERSION = "tokenspeed-deepgemm", "2.5.0.post20260629"


@pytest.fixture(autouse=True)
def _cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RELEASEKIT_CACHE", str(tmp_path / "cache"))


def make_wheel(directory: Path, tag: str, dist: str = DIST, version: str = VERSION) -> Path:
    """A real (minimal) wheel: dist-info with METADATA, WHEEL and RECORD, one module."""
    return write_wheel(
        directory, dist, version, tag, files={"deep_gemm/__init__.py": f"TAG = {tag!r}\n".encode()}
    )


@pytest.fixture()
def index(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A PEP 503 simple index over a directory, served on 127.0.0.1: (index URL, project directory)."""
    root = tmp_path / "index"
    project = root / DIST
    project.mkdir(parents=True)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", project
    finally:
        server.shutdown()
        server.server_close()


def publish(project: Path, *tags: str) -> dict[str, str]:
    """Put wheels on the index; file name -> sha256."""
    wheels = [make_wheel(project, tag) for tag in tags]
    anchors = "".join(f'<a href="{w.name}">{w.name}</a>\n' for w in sorted(project.glob("*.whl")))
    (project / "index.html").write_text(f"<html><body>\n{anchors}</body></html>\n")
    return {w.name: hashlib.sha256(w.read_bytes()).hexdigest() for w in wheels}


def write_manifest(
    tmp_path: Path,
    *,
    index_url: str | None = None,
    python: str | None = "3.12",
    platform: str | None = "manylinux_2_39_x86_64",
    source: dict | None = None,
) -> Path:
    wheel: dict = {"kind": "wheel", "requirement": f"{DIST}=={VERSION}", "sha256": "to-be-locked"}
    if index_url:
        wheel["index_url"] = index_url
    if source:
        wheel["source"] = source
    toolchain: dict = {
        "base_image": {"name": "runtime", "digest": "sha256:" + "0" * 64},
        "cuda_arch_list": ["12.0a"],
    }
    if python:
        toolchain["python"] = python
    if platform:
        toolchain["platform"] = platform
    data = {
        "schema": "releasekit/v1",
        "name": "wheels",
        "components": {"deepgemm": wheel},
        "toolchain": toolchain,
    }
    path = tmp_path / "manifest.yaml"
    path.write_text(json.dumps(data, indent=1))  # JSON is YAML
    return path


def lock_cli(manifest: Path, out: Path, *args: str) -> tuple[int, dict]:
    r = invoke("plan", "lock", str(manifest), "-o", str(out), "--json", *args)
    assert "Traceback" not in r.stderr, r.stderr
    return r.returncode, json.loads(r.stdout) if r.stdout.strip() else {"stderr": r.stderr}


def test_the_image_accepts_older_glibc_and_legacy_tags_only_for_its_python() -> None:
    image = ImageInterpreter(python="3.12", platform="manylinux_2_39_x86_64")
    platforms = image.platforms()
    assert platforms[0] == "manylinux_2_39_x86_64" and platforms[-1] == "linux_x86_64"
    assert {"manylinux_2_28_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64"} <= set(platforms)
    fits = {
        f"x-1.0-{tag}.whl": fit_rank(f"x-1.0-{tag}.whl", image)
        for tag in (
            CP312,
            CP311,
            "py3-none-any",
            "cp39-abi3-manylinux2014_x86_64",
            "cp312-cp312-manylinux_2_40_x86_64",
        )
    }
    assert [name for name, rank in fits.items() if rank is None] == [
        f"x-1.0-{CP311}.whl",
        "x-1.0-cp312-cp312-manylinux_2_40_x86_64.whl",
    ]
    # pip's order of preference: the image's own ABI before abi3 before a pure wheel.
    assert (
        fits[f"x-1.0-{CP312}.whl"]
        < fits["x-1.0-cp39-abi3-manylinux2014_x86_64.whl"]
        < fits["x-1.0-py3-none-any.whl"]
    )


def test_a_wheel_in_no_wheelhouse_is_fetched_by_pip_for_the_image(
    tmp_path: Path, index: tuple[str, Path]
) -> None:
    url, project = index
    hashes = publish(project, CP311, CP312, "cp312-cp312-manylinux_2_28_aarch64")
    lock_path, kept = tmp_path / "lock.json", tmp_path / "fetched"
    rc, out = lock_cli(write_manifest(tmp_path, index_url=url), lock_path, "--download-dir", str(kept))
    assert rc == 0, out
    wheel = json.loads(lock_path.read_text())["components"]["deepgemm"]
    expected = f"tokenspeed_deepgemm-{VERSION}-{CP312}.whl"
    assert (wheel["filename"], wheel["sha256"]) == (expected, hashes[expected])
    assert [p.name for p in kept.iterdir()] == [expected]
    # The same index for a Python 3.11 image: pip picks the other wheel.
    rc, _ = lock_cli(write_manifest(tmp_path, index_url=url, python="3.11"), lock_path)
    assert rc == 0 and json.loads(lock_path.read_text())["components"]["deepgemm"]["filename"].endswith(
        f"{CP311}.whl"
    )


def test_offline_a_wheel_in_no_wheelhouse_names_the_index_not_read(
    tmp_path: Path, index: tuple[str, Path]
) -> None:
    """``--offline`` (issue 44): a pin no ``--wheelhouse`` holds is not fetched from its index (which
    is up and has it): one line, exit 2, naming the index and the way out; no lock written."""
    url, project = index
    publish(project, CP312)
    lock_path = tmp_path / "lock.json"
    for args, env in ((("--offline",), {}), ((), {"RELEASEKIT_OFFLINE": "1"})):
        r = invoke(
            "plan", "lock", str(write_manifest(tmp_path, index_url=url)), "-o", str(lock_path), *args, env=env
        )
        assert r.returncode == 2, r.stdout + r.stderr
        (line,) = r.stderr.strip().splitlines()
        assert f"offline: no wheel for {DIST}=={VERSION} in a wheelhouse, and {url} is not read" in line, line
        assert "--wheelhouse DIR" in line and not lock_path.exists()


def test_an_index_with_wheels_only_for_other_pythons_is_a_finding(
    tmp_path: Path, index: tuple[str, Path]
) -> None:
    url, project = index
    publish(project, CP311)
    lock_path = tmp_path / "lock.json"
    rc, out = lock_cli(write_manifest(tmp_path, index_url=url), lock_path)
    assert rc == 1, out
    [finding] = out["findings"]["findings"]
    assert (finding["code"], finding["location"]["component"]) == ("WHEEL_TAGS_MISMATCH", "deepgemm")
    assert f"it has {CP311}" in finding["message"] and "CPython 3.12" in finding["message"]
    assert not lock_path.exists()
    # A version the index does not have at all is unusable input: one line, exit 2.
    manifest = write_manifest(tmp_path, index_url=url)
    manifest.write_text(manifest.read_text().replace(VERSION, "9.9"))
    r = invoke("plan", "lock", str(manifest), "-o", str(lock_path))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "pip download" in r.stderr and "Traceback" not in r.stderr


def test_a_wheelhouse_wheel_for_another_python_is_a_finding(tmp_path: Path) -> None:
    house = tmp_path / "house"
    make_wheel(house, CP311)
    make_wheel(house, "cp310-cp310-manylinux_2_28_x86_64")
    findings = Findings()
    lock = plan_lock(load_manifest(write_manifest(tmp_path)), wheelhouses=[house], findings=findings)
    assert [(f.code, f.severity.value) for f in findings] == [("WHEEL_TAGS_MISMATCH", "error")]
    assert "CPython 3.12, manylinux_2_39_x86_64" in findings.findings[0].message
    # With the image's wheel beside it, the wheelhouse's fitting one is taken, as pip would.
    fitting = make_wheel(house, CP312)
    findings = Findings()
    lock = plan_lock(load_manifest(write_manifest(tmp_path)), wheelhouses=[house], findings=findings)
    assert len(findings) == 0
    assert lock.wheel_components()["deepgemm"].filename == fitting.name


def test_a_platform_wheel_without_the_image_python_is_unchecked(tmp_path: Path) -> None:
    house = tmp_path / "house"
    make_wheel(house, CP311)
    manifest = write_manifest(tmp_path, python=None, platform=None)
    findings = Findings()
    plan_lock(load_manifest(manifest), wheelhouses=[house], findings=findings)
    assert [(f.code, f.severity.value) for f in findings] == [("WHEEL_TAGS_UNCHECKED", "warning")]
    findings = Findings()
    plan_lock(load_manifest(manifest), wheelhouses=[house], findings=findings, strict=True)
    assert [(f.code, f.severity.value) for f in findings] == [("WHEEL_TAGS_UNCHECKED", "error")]
    # A pure wheel fits every image: nothing to say.
    pure = tmp_path / "pure"
    make_wheel(pure, "py3-none-any")
    findings = Findings()
    plan_lock(load_manifest(manifest), wheelhouses=[pure], findings=findings)
    assert len(findings) == 0


def test_an_unverified_source_warns_and_strict_refuses(tmp_path: Path) -> None:
    house = tmp_path / "house"
    make_wheel(house, CP312)
    source = {
        "repo": "https://127.0.0.1:9/deepseek-ai/DeepGEMM.git",
        "ref": "nv_dev",
        "commit": "a6b593d2826719dcf4892609af7b84ee23aaf32a",
    }
    manifest = write_manifest(tmp_path, source=source)
    lock_path = tmp_path / "lock.json"
    r = invoke("plan", "lock", str(manifest), "-o", str(lock_path), "--wheelhouse", str(house))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "warning WHEEL_SOURCE_UNVERIFIED" in " ".join(r.stdout.split())
    assert json.loads(lock_path.read_text())["components"]["deepgemm"]["source"]["verified"] is False
    lock_path.unlink()
    rc, out = lock_cli(manifest, lock_path, "--wheelhouse", str(house), "--strict")
    assert rc == 1
    assert [(f["code"], f["severity"]) for f in out["findings"]["findings"]] == [
        ("WHEEL_SOURCE_UNVERIFIED", "error")
    ]
    assert not lock_path.exists()


def _refusal(tmp_path: Path, house: Path) -> str:
    """plan lock on the wheelhouse: exit 2 with one line, which is returned."""
    code, out = lock_cli(write_manifest(tmp_path), tmp_path / "out", "--wheelhouse", str(house))
    assert code == 2, out
    lines = out["stderr"].strip().splitlines()
    assert len(lines) == 1, out["stderr"]
    assert not (tmp_path / "out").exists()
    return lines[0]


def test_a_text_file_named_like_the_pinned_wheel_is_refused(tmp_path: Path) -> None:
    """Issue 35: a 12-byte text file under the wheel's name was locked, sha256 and all."""
    house = tmp_path / "house"
    house.mkdir()
    (house / f"tokenspeed_deepgemm-{VERSION}-{CP312}.whl").write_text("not a wheel\n")
    line = _refusal(tmp_path, house)
    assert f"is not a wheel of {DIST}=={VERSION}" in line and "not a zip archive" in line, line


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"metadata": f"Metadata-Version: 2.1\nName: {DIST}\nVersion: 2.4.0\n"}, "METADATA says Name"),
        ({"metadata": f"Metadata-Version: 2.1\nName: deep-gemm\nVersion: {VERSION}\n"}, "METADATA says Name"),
        ({"wheel": f"Root-Is-Purelib: false\nTag: {CP312}\n"}, "no Wheel-Version"),
        ({"record": ""}, "RECORD does not list"),
        ({"files": {"deep_gemm/__init__.py": b"x = 1\n", "deep_gemm/other.py": b""}}, None),
        ({"filename": f"tokenspeed_deepgemm-{VERSION}-{CP312}.whl", "version": "2.4.0"}, ".dist-info is not"),
    ],
)
def test_a_zip_whose_dist_info_disagrees_with_its_name_is_refused(
    tmp_path: Path, change: dict, said: str | None
) -> None:
    house = tmp_path / "house"
    version = change.pop("version", VERSION)
    write_wheel(house, DIST, version, CP312, **change)
    if said is None:  # a good wheel with more files: the control
        code, out = lock_cli(write_manifest(tmp_path), tmp_path / "out", "--wheelhouse", str(house))
        assert code == 0, out
        return
    line = _refusal(tmp_path, house)
    assert f"is not a wheel of {DIST}=={VERSION}" in line and said in line, line


def test_a_record_that_lists_a_missing_file_or_a_wrong_hash_is_refused(tmp_path: Path) -> None:
    from releasekit.plan.wheels import NotAWheel, check_wheel_contents

    stem = f"tokenspeed_deepgemm-{VERSION}"
    good = write_wheel(tmp_path / "good", DIST, VERSION, CP312)
    assert check_wheel_contents(good, DIST, VERSION) == []
    with zipfile.ZipFile(good) as zf:
        record = zf.read(f"{stem}.dist-info/RECORD").decode()
    extra = write_wheel(tmp_path / "extra", DIST, VERSION, CP312, record=record + "deep_gemm/gone.py,,\n")
    with pytest.raises(NotAWheel, match="RECORD lists 1 file"):
        check_wheel_contents(extra, DIST, VERSION)
    metadata_row = next(r for r in record.splitlines() if r.startswith(f"{stem}.dist-info/METADATA,"))
    wrong = record.replace(metadata_row, f"{stem}.dist-info/METADATA,sha256=AAAA,1")
    tampered = write_wheel(tmp_path / "wrong", DIST, VERSION, CP312, record=wrong)
    assert check_wheel_contents(tampered, DIST, VERSION) == [
        ("WHEEL_RECORD_HASH_MISMATCH", f"its RECORD's hash of {stem}.dist-info/METADATA is not the file's")
    ]
    # Bounded: a METADATA over its cap is refused from the zip's directory, before it is read.
    big = write_wheel(
        tmp_path / "big",
        DIST,
        VERSION,
        CP312,
        metadata=f"Name: {DIST}\nVersion: {VERSION}\n" + "x" * (17 << 20),
    )
    with pytest.raises(NotAWheel, match="METADATA is .* over the"):
        check_wheel_contents(big, DIST, VERSION)


def test_a_wheel_built_by_pip_is_accepted(tmp_path: Path) -> None:
    """A wheel as setuptools writes it (pip wheel of a tiny project), with a normalised name."""
    project = tmp_path / "proj"
    (project / "tokenspeed_deepgemm").mkdir(parents=True)
    (project / "tokenspeed_deepgemm" / "__init__.py").write_text("X = 1\n")
    (project / "setup.py").write_text(
        f"from setuptools import setup\nsetup(name='Tokenspeed.DeepGemm', version='{VERSION}', "
        "packages=['tokenspeed_deepgemm'])\n"
    )
    house = tmp_path / "house"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--isolated",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(house),
            str(project),
        ],
        check=True,
        capture_output=True,
    )
    [built] = list(house.glob("*.whl"))
    code, out = lock_cli(write_manifest(tmp_path), tmp_path / "out", "--wheelhouse", str(house))
    assert code == 0, out
    lock = json.loads((tmp_path / "out").read_text())
    assert lock["components"]["deepgemm"]["filename"] == built.name


def test_a_wheel_whose_wheel_file_lists_other_tags_is_locked_with_a_warning(tmp_path: Path) -> None:
    """As ray, mysql-connector-python and playwright as published: renamed to a manylinux tag after the
    build wrote ``linux_x86_64``; pip goes by the file name, so the lock says so and goes on."""
    house = tmp_path / "house"
    renamed = "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp312-cp312-linux_x86_64\n"
    wheel = write_wheel(house, DIST, VERSION, CP312, wheel=renamed)
    code, out = lock_cli(write_manifest(tmp_path), tmp_path / "out", "--wheelhouse", str(house))
    assert code == 0, out
    found = [(f["code"], f["severity"], f["message"]) for f in out["findings"]["findings"]]
    assert found == [
        (
            "WHEEL_TAGS_UNDECLARED",
            "warning",
            f"{wheel.name}: its WHEEL lists cp312-cp312-linux_x86_64, not the file name's {CP312}",
        )
    ]


def _claiming(wheel: Path, entries: int) -> None:
    """A zip64 end record and locator put before the end record, claiming ``entries``: ``zipfile``
    takes the directory's (real) size and offset from it and never looks at the count."""
    data = wheel.read_bytes()
    at = data.rfind(b"PK\x05\x06")
    size, offset = struct.unpack_from("<2L", data, at + 12)
    end64 = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, entries, entries, size, offset)
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, at, 1)
    wheel.write_bytes(data[:at] + end64 + locator + data[at:])


def _directory_of(wheel: Path, entries: int) -> None:
    """Replace the wheel by a bare zip directory of ``entries`` headers (13 MB for 250,001), whose
    end record says 1: what ``zipfile`` would build a ZipInfo for, one by one."""
    header = struct.Struct("<4s4B4HL2L5H2L")
    rows = [header.pack(b"PK\x01\x02", 20, 3, 20, 0, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0) + b"%06d" % i
            for i in range(entries)]  # fmt: skip
    directory = b"".join(rows)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1, 1, len(directory), 0, 0)
    wheel.write_bytes(directory + end)


@pytest.mark.parametrize("attack", ["claims-3-million", "holds-250-thousand"])
def test_a_zip_directory_over_its_limits_is_refused_before_zipfile_reads_it(
    tmp_path: Path, attack: str
) -> None:
    """Issue 43: a wheel whose directory claims 3 million entries took 1.5 GB and 46 s to refuse."""
    from releasekit.plan.wheels import NotAWheel, check_wheel_contents

    wheel = write_wheel(tmp_path, DIST, VERSION, CP312)
    if attack == "claims-3-million":
        _claiming(wheel, 3_000_000)
        said = "claims 3000000 entries"
    else:
        _directory_of(wheel, 250_001)
        said = "over 200000 entries"
    started = time.monotonic()
    with (
        mock.patch.object(zipfile.ZipFile, "_RealGetContents", side_effect=AssertionError("read")),
        pytest.raises(NotAWheel, match=said),
    ):
        check_wheel_contents(wheel, DIST, VERSION)
    assert time.monotonic() - started < 5


def test_a_wheel_with_two_entries_of_one_name_is_not_a_wheel(tmp_path: Path) -> None:
    """Issue 43: RECORD lists the module once, the zip holds it twice; pip installs the second."""
    house = tmp_path / "house"
    wheel = make_wheel(house, CP312)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile's "Duplicate name" warning: the attack
        with zipfile.ZipFile(wheel, "a") as zf:
            zf.writestr("deep_gemm/__init__.py", b"import os; os.system('id')\n")
    line = _refusal(tmp_path, house)
    assert (
        f"is not a wheel of {DIST}=={VERSION}" in line and "two entries named 'deep_gemm/__init__.py'" in line
    )
