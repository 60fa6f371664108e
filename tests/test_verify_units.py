"""The pieces of verify-provenance that need no Docker Engine: fatbin reader, tar inventory, RECORD paths."""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from verify_support import toolchain_context

from releasekit.fatbin import arch_to_sm, parse_fatbin_section, read_fatbin
from releasekit.provenance.accounting import table
from releasekit.provenance.checks.toolchain import version_agrees
from releasekit.provenance.checks.version import LOCAL_COMMIT, commit_agrees
from releasekit.provenance.installed import parse_record, record_target
from releasekit.provenance.inventory import (
    ExportAborted,
    ReadPlan,
    inventory_from_directory,
    inventory_from_tar,
    safe_member_path,
)

KERNEL = "__global__ void scale(float *a, float b) { a[threadIdx.x] *= b; }\n"


@pytest.fixture(scope="module")
def kernels(tmp_path_factory) -> dict[str, Path]:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed: the fatbin reader is tested on real nvcc output only")
    root = tmp_path_factory.mktemp("fatbin")
    (root / "k.cu").write_text(KERNEL)
    builds = {
        "120a": ["-gencode", "arch=compute_120a,code=sm_120a"],
        "90a+ptx": ["-gencode", "arch=compute_90a,code=[sm_90a,compute_90a]"],
        "120f": ["-gencode", "arch=compute_120f,code=sm_120f"],
        "120+90a": ["-gencode", "arch=compute_120,code=sm_120", "-gencode", "arch=compute_90a,code=sm_90a"],
    }
    out = {}
    for name, flags in builds.items():
        target = root / f"k{name.replace('+', '_')}.so"
        subprocess.run(
            [
                "nvcc",
                "-shared",
                "-Xcompiler",
                "-fPIC",
                "-cudart",
                "none",
                *flags,
                "-o",
                str(target),
                str(root / "k.cu"),
            ],
            check=True,
            capture_output=True,
        )
        out[name] = target
    return out


def _fatbin(path: Path):
    with path.open("rb") as handle:
        return read_fatbin(handle)


def test_fatbin_lists_machine_code_and_ptx(kernels):
    assert _fatbin(kernels["120a"]).cubin_targets() == ["sm_120a"]
    report = _fatbin(kernels["90a+ptx"])
    assert report.cubin_targets() == ["sm_90a"] and report.ptx_targets() == ["compute_90a"]
    assert _fatbin(kernels["120f"]).cubin_targets() == ["sm_120f"]
    assert _fatbin(kernels["120+90a"]).cubin_targets() == ["sm_120", "sm_90a"]


def test_fatbin_arch_requirements(kernels):
    sm120a, sm120f, mixed = _fatbin(kernels["120a"]), _fatbin(kernels["120f"]), _fatbin(kernels["120+90a"])
    assert sm120a.has_machine_code_for("12.0a") and sm120a.has_machine_code_for("12.0")
    assert not sm120a.has_machine_code_for("9.0a")
    assert sm120f.has_machine_code_for("12.0f") and not sm120f.has_machine_code_for("12.0a")
    # A plain sm_120 cubin lacks the arch-specific features 12.0a asks for.
    assert mixed.has_machine_code_for("12.0") and not mixed.has_machine_code_for("12.0a")
    # PTX alone is not machine code.
    assert not _fatbin(kernels["90a+ptx"]).has_machine_code_for("12.0")


def test_fatbin_absent_or_not_elf(tmp_path):
    text = tmp_path / "x.so"
    text.write_bytes(b"not an elf at all")
    assert _fatbin(text) is None
    assert _fatbin(Path(sys.executable).resolve()) is None  # ELF without .nv_fatbin
    broken = tmp_path / "broken.so"
    broken.write_bytes(b"\x7fELF" + b"\x00" * 60)
    assert _fatbin(broken).malformed


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=512))
def test_fatbin_parser_never_raises_on_junk(data):
    header = bytes.fromhex("50ed55ba01001000") + len(data).to_bytes(8, "little")
    parse_fatbin_section(header + data)
    parse_fatbin_section(data)


def test_arch_names():
    assert arch_to_sm("12.0a") == (120, "a")
    assert arch_to_sm("9.0") == (90, "")
    assert arch_to_sm("sm_100f") == (100, "f")


# --- the tar inventory ---------------------------------------------------------------------


def _tar(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def _file(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), data


def _link(name: str, target: str, kind=tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info, None


def _chunks(data: bytes, size: int = 7000):
    for i in range(0, len(data), size):
        yield data[i : i + size]


SITE = "/venv/lib/python3.11/site-packages"


def test_inventory_hashes_and_blob_ids_agree_with_git(tmp_path):
    source = b"print('hi')\n" * 1000
    stream = _tar(
        [
            _file(f"{SITE[1:]}/pkg/mod.py", source),
            _file("etc/other", b"x" * 10),
            _link(f"{SITE[1:]}/pkg/same.py", f"{SITE[1:]}/pkg/mod.py", tarfile.LNKTYPE),
        ]
    )
    inv = inventory_from_tar(_chunks(stream), ReadPlan(python_roots=[SITE]))
    entry = inv.files[f"{SITE}/pkg/mod.py"]
    assert entry.sha256 == hashlib.sha256(source).digest()
    (tmp_path / "mod.py").write_bytes(source)
    git_id = subprocess.run(
        ["git", "hash-object", str(tmp_path / "mod.py")], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert entry.blob == git_id
    assert inv.files[f"{SITE}/pkg/same.py"].sha256 == entry.sha256  # hard link: same bytes
    assert inv.files["/etc/other"].sha256 is None  # outside the Python roots: listed, not hashed
    assert inv.hashed_bytes == len(source)


def test_accounting_reads_carry_sha256_only_and_the_same_table():
    """The base and release-layer reads skip git blob ids and dpkg md5s; their sha256 and table are unchanged."""
    source = b"x = 1\n" * 5000
    stdlib = b"import os\n" * 3000
    stream = _tar(
        [
            _file(f"{SITE[1:]}/pkg/mod.py", source),
            _file("usr/lib/python3.11/os2.py", stdlib),
            _link(f"{SITE[1:]}/pkg/same.py", f"{SITE[1:]}/pkg/mod.py", tarfile.LNKTYPE),
        ]
    )
    full = inventory_from_tar(
        _chunks(stream), ReadPlan(python_roots=[SITE, "/usr/lib/python3.11"], hash_all=True)
    )
    lean = inventory_from_tar(_chunks(stream), ReadPlan(python_roots=[], hash_all=True, extra_digests=False))
    assert full.files[f"{SITE}/pkg/mod.py"].blob is not None and full.files["/usr/lib/python3.11/os2.py"].md5
    for path in (f"{SITE}/pkg/mod.py", f"{SITE}/pkg/same.py", "/usr/lib/python3.11/os2.py"):
        assert lean.files[path].blob is None and lean.files[path].md5 is None
        assert lean.files[path].sha256 == full.files[path].sha256 is not None
    assert table(lean) == table(full)


def test_inventory_refuses_unsafe_names_and_never_follows_links_out():
    stream = _tar(
        [
            _file("../escape.py", b"x"),
            _file("/abs/path.py", b"x"),
            _file(f"{SITE[1:]}/a/../../b.py", b"x"),
            _link(f"{SITE[1:]}/out", "/etc"),
            _link(f"{SITE[1:]}/up", "../../../../../../../../../../root/.ssh/id_rsa"),
            _link(f"{SITE[1:]}/loop1", f"{SITE}/loop2"),
            _link(f"{SITE[1:]}/loop2", f"{SITE}/loop1"),
            _link(f"{SITE[1:]}/hard", "../../outside", tarfile.LNKTYPE),
        ]
    )
    inv = inventory_from_tar(_chunks(stream), ReadPlan(python_roots=[SITE]))
    assert len(inv.refused) == 4
    assert all(p.startswith("/") and ".." not in p.split("/") for p in inv.files)
    # Links resolve inside the image's own tree: "/etc" and "../../.." stop at the image root.
    assert inv.resolve(f"{SITE}/out/passwd") == "/etc/passwd"
    assert inv.resolve(f"{SITE}/up") == "/root/.ssh/id_rsa"
    assert inv.resolve(f"{SITE}/loop1") is None
    assert safe_member_path("./usr/lib/x") == "/usr/lib/x"


def test_inventory_limits_abort_instead_of_hanging():
    stream = _tar([_file(f"{SITE[1:]}/big.bin", b"\0" * 200_000)])
    with pytest.raises(ExportAborted, match="exceeds"):
        inventory_from_tar(_chunks(stream), ReadPlan(python_roots=[SITE], max_total_bytes=100_000))

    def slow():
        for chunk in _chunks(stream, 10_000):
            time.sleep(0.05)
            yield chunk

    started = time.monotonic()
    with pytest.raises(ExportAborted, match="time limit"):
        inventory_from_tar(slow(), ReadPlan(python_roots=[SITE], deadline=time.monotonic() + 0.2))
    assert time.monotonic() - started < 5
    inv = inventory_from_tar(_chunks(stream), ReadPlan(python_roots=[SITE], max_file_bytes=1000))
    assert inv.too_large == [f"{SITE}/big.bin"] and inv.files[f"{SITE}/big.bin"].sha256 is None


def test_inventory_rejects_a_stream_that_is_not_tar():
    with pytest.raises(ExportAborted):
        inventory_from_tar([b"\x01" * 2048], ReadPlan(python_roots=[SITE]))


def test_directory_and_tar_inventories_agree(tmp_path):
    root = tmp_path / "env"
    (root / SITE[1:] / "pkg").mkdir(parents=True)
    (root / SITE[1:] / "pkg" / "a.py").write_bytes(b"a = 1\n")
    (root / SITE[1:] / "pkg" / "link").symlink_to("/etc")
    plan = ReadPlan(python_roots=[SITE])
    from_dir = inventory_from_directory(str(root), plan)
    stream = _tar([_file(f"{SITE[1:]}/pkg/a.py", b"a = 1\n"), _link(f"{SITE[1:]}/pkg/link", "/etc")])
    from_tar = inventory_from_tar(_chunks(stream), plan)
    for path in (f"{SITE}/pkg/a.py", f"{SITE}/pkg/link"):
        a, b = from_dir.files[path], from_tar.files[path]
        assert (a.kind, a.sha256, a.blob, a.link) == (b.kind, b.sha256, b.blob, b.link)


# --- RECORD paths, commits, versions --------------------------------------------------------


def test_record_paths_may_climb_to_bin_but_not_out_of_root():
    site = "/opt/venv/lib/python3.11/site-packages"
    assert record_target(site, "pkg/mod.py") == f"{site}/pkg/mod.py"
    assert record_target(site, "../../../bin/tool") == "/opt/venv/bin/tool"
    assert record_target(site, "../" * 6 + "etc/passwd") is None
    assert record_target(site, "/etc/passwd") is None
    assert record_target(site, "pkg/" + "../" * 7 + "etc/passwd") is None  # down, then out
    assert record_target(site, "pkg/./a//b.py") == f"{site}/pkg/a/b.py"
    rows = parse_record("pkg/a.py,sha256=AAAA,3\npkg/RECORD,,\n\n")
    assert rows[0].algorithm == "sha256" and rows[0].size == 3 and rows[1].digest is None


def test_commit_agreement():
    full = "0123456789abcdef0123456789abcdef01234567"
    assert commit_agrees("0123456", full) and commit_agrees(full, full)
    assert not commit_agrees("012345", full)  # too short to mean anything
    assert not commit_agrees("1123456", full)
    assert not commit_agrees("f" * 40, full)
    assert LOCAL_COMMIT.findall("+g0123456789ab") == ["0123456789ab"]
    assert LOCAL_COMMIT.findall("+g0123456789ab.d20240101") == ["0123456789ab"]
    assert LOCAL_COMMIT.findall("+cu128") == []


def test_toolchain_version_agreement():
    assert version_agrees("12.8", "12.8.1") and version_agrees("2.13.0+cu128", "2.13.0")
    assert not version_agrees("2.13.0+cpu", "2.13.0+cu128")
    assert not version_agrees(None, "12.8") and not version_agrees("12.6", "12.8")


# --- the probe, run for real under a local interpreter ---------------------------------------


def _run_probe(python: str, names: list[str]) -> dict:
    source = (Path(__file__).parent.parent / "releasekit" / "provenance" / "probe.py").read_text()
    import json

    proc = subprocess.run(
        [python, "-c", source, json.dumps({"import_names": names})],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(proc.stdout)


def test_probe_reports_imports_paths_and_distributions():
    report = _run_probe(sys.executable, ["json", "pydantic", "surely_not_a_module_xyz"])
    assert report["probe"] == "releasekit.probe/v1"
    specs = {s["name"]: s for s in report["specs"]}
    assert specs["json"]["found"] and specs["json"]["origin"].endswith("json/__init__.py")
    assert specs["pydantic"]["found"] and specs["surely_not_a_module_xyz"]["found"] is False
    assert any(d.get("name") == "pydantic" for d in report["distributions"])
    assert all(p.startswith("/") for p in report["sys_path"])
    assert report["toolchain"]["torch_present"] is False


def test_toolchain_check_compares_what_torch_reports():
    from releasekit.provenance.checks.toolchain import ToolchainCheck

    bench = Path.home() / ".cache" / "releasekit" / "bench" / "torch-2.13.0" / "bin" / "python3"
    if bench.exists():  # the benchmark's real torch, when this machine has made it
        toolchain = _run_probe(str(bench), ["torch"])["toolchain"]
        assert toolchain["torch_present"] and toolchain["torch"].startswith("2.13.0")
    else:
        toolchain = {"torch_present": True, "torch": "2.13.0+cpu", "cuda": None, "nccl": None, "cudnn": None}
    assert ToolchainCheck().run(toolchain_context(toolchain, "2.13.0", None)).codes() == []
    found = ToolchainCheck().run(toolchain_context(toolchain, "2.13.0", "13.0"))
    assert found.codes() == ["TOOLCHAIN_MISMATCH"] and "cuda" in found.findings[0].message
    found = ToolchainCheck().run(toolchain_context(toolchain, "2.12.0+cu132", None))
    assert found.codes() == ["TOOLCHAIN_MISMATCH"]
    absent = ToolchainCheck().run(toolchain_context({"torch_present": False}, "2.13.0", None))
    assert absent.codes() == ["TOOLCHAIN_UNCHECKED"] and absent.passed
