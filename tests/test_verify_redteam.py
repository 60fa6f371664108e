"""verify-provenance against an attacker who controls the build, and so writes build.json too.

One clean release per run (``releasekit demo``'s pipeline up to ``releasekit build``, shared with
test_verify_tamper.py; the module works on its own copy, ``demo_release`` in tests/conftest.py). Every attack derives an image from it (a container with a few shell
steps, committed) and then rewrites the release directory's ``build.json`` to describe the
derived image, as a build the attacker runs would. Each must still be an error: the
verifier rebuilds the image from the lock and the manifest, compares layers and config by
digest and key, and accounts for every file of the export against the locked base's export
plus the reproduced layer. The host-resource cases must finish within their caps.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import py_compile
import shutil
import subprocess
import time
import zipfile

import pytest
from cli_run import invoke, run_cli

from releasekit.clock import SystemClock
from releasekit.docker_engine import LazyEngine
from releasekit.provenance.verify import VerifyOptions, VerifyResult, verify_provenance

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SP = "/usr/local/lib/python3.11/dist-packages"
RUNTIME = f"{SP}/rkdemo_runtime"
KERNELS = f"{SP}/rkdemo_kernels"
KERNEL = "__global__ void scale(float *a, float b) { a[threadIdx.x] *= b; }\n"


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _errors(result: VerifyResult) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in result.findings.errors:
        out.setdefault(f.code, []).append(f.location.path or f.location.field or f.message)
    return out


def _caught(result: VerifyResult, **expected: str) -> None:
    """Not verified (exit 1), not reproduced, and each CODE=path-or-field fragment reported."""
    errors = _errors(result)
    shown = "\n".join(f.render() for f in result.findings)
    assert not result.passed, shown
    assert "IMAGE_NOT_REPRODUCED" in errors, shown
    for code, fragment in expected.items():
        code = code.rstrip("_0123456789")  # several fragments of one code: FILE_MODIFIED_1=...
        assert any(fragment in where for where in errors.get(code, [])), f"{code} {fragment}:\n{shown}"


def test_clean_image_verifies_with_zero_warnings_and_no_manifest_option(demo_release):
    opts = VerifyOptions(
        image=demo_release.image_id,
        lock=demo_release.lock,
        artifacts=demo_release.artifacts,
        allow_local_repos=True,
        cache_dir=str(demo_release.root / "git-cache"),
        summary=demo_release.root / "clean-summary.json",
    )
    result = verify_provenance(
        opts, engine=LazyEngine(timeout=120), clock=SystemClock()
    )  # no --manifest: found from the demo's layout by its sha256
    assert result.passed, "\n".join(f.render() for f in result.findings)
    assert list(result.findings) == [], "\n".join(f.render() for f in result.findings)
    assert {"reproduction", "image-config", "file-accounting"} <= {c.name for c in result.checks}


def test_cli_rebuilt_image_is_the_candidate(demo_release):
    env = {"RELEASEKIT_ALLOW_LOCAL_REPOS": "1"}
    out = invoke(
        "verify-provenance",
        demo_release.image_id,
        "--lock",
        str(demo_release.lock),
        "--summary",
        str(demo_release.root / "cli.json"),
        "--json",
        env=env,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr
    assert json.loads(out.stdout)["passed"] is True


# --- one test per class of the issue, each with a forged build.json ---------------------------


def test_bytecode_poisoning(demo_release, tmp_path):
    src = tmp_path / "scale.py"
    src.write_text("def scale(x, k=2):\n    return x * 3\n")
    pyc = tmp_path / "scale.pyc"
    py_compile.compile(str(src), cfile=str(pyc))
    result = demo_release.attack(
        tmp_path,
        f"mkdir -p {RUNTIME}/__pycache__ && cp /p.pyc {RUNTIME}/__pycache__/scale.cpython-311.pyc && "
        "cp /p.pyc /usr/lib/python3.11/__pycache__/os.cpython-311.pyc && "
        "mkdir -p /var/cache/pyc && ln -s /var/cache/pyc /opt/pycache && rm /p.pyc",
        files={"/p.pyc": pyc.read_bytes()},
        changes=["ENV PYTHONPYCACHEPREFIX=/opt/pycache"],
    )
    _caught(
        result,
        FILE_UNACCOUNTED=f"{RUNTIME}/__pycache__/scale.cpython-311.pyc",
        FILE_MODIFIED="/usr/lib/python3.11/__pycache__/os.cpython-311.pyc",
        FILE_UNACCOUNTED_1="/opt/pycache",
        CONFIG_MISMATCH="Env.PYTHONPYCACHEPREFIX",
    )


def test_trust_anchors_from_the_candidate(demo_release, tmp_path):
    # A fake dist-info RECORD owning a .pth, a dpkg list owning another, and a stdlib edit with its md5 fixed.
    pth = b"import os; os.system('id')\n"
    script = (
        f"mkdir -p {SP}/fake-1.0.dist-info && printf 'Metadata-Version: 2.1\\nName: fake\\nVersion: 1.0\\n' "
        f"> {SP}/fake-1.0.dist-info/METADATA && cp /x.pth {SP}/fake.pth && "
        f"echo 'fake.pth,{_record_hash(pth)},{len(pth)}' > {SP}/fake-1.0.dist-info/RECORD && "
        "cp /x.pth /usr/lib/python3/dist-packages/zz-dpkg.pth && "
        "echo /usr/lib/python3/dist-packages/zz-dpkg.pth > /var/lib/dpkg/info/fakepkg.list && "
        "echo '# edited' >> /usr/lib/python3.11/json/__init__.py && "
        "m=$(md5sum /usr/lib/python3.11/json/__init__.py | cut -d' ' -f1) && "
        "f=$(grep -l 'usr/lib/python3.11/json/__init__.py' /var/lib/dpkg/info/*.md5sums) && "
        'sed -i "s#^[0-9a-f]*  usr/lib/python3.11/json/__init__.py#$m  usr/lib/python3.11/json/__init__.py#" $f '
        "&& rm /x.pth"
    )
    result = demo_release.attack(tmp_path, script, files={"/x.pth": pth})
    _caught(
        result,
        FILE_UNACCOUNTED=f"{SP}/fake.pth",
        FILE_UNACCOUNTED_1="/var/lib/dpkg/info/fakepkg.list",
        FILE_UNACCOUNTED_2="/usr/lib/python3/dist-packages/zz-dpkg.pth",
        FILE_MODIFIED="/usr/lib/python3.11/json/__init__.py",
        FILE_MODIFIED_1=".md5sums",
    )


@pytest.mark.parametrize("kind", ["ld-so-preload", "extension-lib", "usr-bin-env", "python3-wrapper"])
def test_code_outside_the_python_roots(demo_release, tmp_path, kind):
    wrapper = b'#!/bin/sh\nexec /usr/bin/python3.11 "$@"\n'
    attacks = {
        "ld-so-preload": (
            "cp /bin/true /usr/lib/libtrojan.so && echo /usr/lib/libtrojan.so > /etc/ld.so.preload",
            {"FILE_UNACCOUNTED": "/etc/ld.so.preload", "FILE_UNACCOUNTED_1": "/usr/lib/libtrojan.so"},
        ),
        "extension-lib": (
            f"cp /bin/true /usr/local/lib/libiomp5.so && d=$(ls -d {SP}/rkdemo_runtime-*.dist-info) && "
            "echo '../../libiomp5.so,,' >> $d/RECORD",
            {"FILE_UNACCOUNTED": "/usr/local/lib/libiomp5.so", "FILE_MODIFIED": "/RECORD"},
        ),
        "usr-bin-env": ("cp /w /usr/bin/env && rm /w", {"FILE_MODIFIED": "/usr/bin/env"}),
        "python3-wrapper": (
            "cp /w /usr/local/bin/python3 && rm /w",
            {"FILE_UNACCOUNTED": "/usr/local/bin/python3"},
        ),
    }
    script, expected = attacks[kind]
    _caught(demo_release.attack(tmp_path, script, files={"/w": wrapper}), **expected)


def test_record_exemptions(demo_release, tmp_path):
    evil = b"#!/usr/bin/python3\nimport os\n"
    script = (
        f"d=$(ls -d {SP}/rkdemo_runtime-*.dist-info) && cp /e /usr/local/bin/rkdemo-evil && "
        "echo '../../../bin/rkdemo-evil,,' >> $d/RECORD && "
        f"echo 'import os' > {SP}/zz-hashless.pth && echo 'zz-hashless.pth,,' >> $d/RECORD && rm /e"
    )
    _caught(
        demo_release.attack(tmp_path, script, files={"/e": evil}),
        FILE_UNACCOUNTED="/usr/local/bin/rkdemo-evil",
        FILE_UNACCOUNTED_1=f"{SP}/zz-hashless.pth",
        FILE_MODIFIED="/RECORD",
    )


@pytest.mark.parametrize("kind", ["ld-audit", "ld-library-path", "entrypoint-wrapper", "sh-c-export"])
def test_image_config_by_allowlist(demo_release, tmp_path, kind):
    attacks = {
        "ld-audit": ("cp /bin/true /usr/lib/audit.so", ["ENV LD_AUDIT=/usr/lib/audit.so"], "Env.LD_AUDIT"),
        "ld-library-path": (
            "mkdir -p /opt/tl && cp /bin/true /opt/tl/libexpat.so.1",
            ["ENV LD_LIBRARY_PATH=/opt/tl"],
            "Env.LD_LIBRARY_PATH",
        ),
        "entrypoint-wrapper": (
            "printf '#!/bin/sh\\nexec \"$@\"\\n' > /entry.sh && chmod +x /entry.sh",
            ['ENTRYPOINT ["/entry.sh"]'],
            "Entrypoint",
        ),
        "sh-c-export": (
            "true",
            ['ENTRYPOINT ["sh", "-c", "export PYTHONINSPECT=1; exec python3"]'],
            "Entrypoint",
        ),
    }
    script, changes, field = attacks[kind]
    _caught(demo_release.attack(tmp_path, script, changes=changes), CONFIG_MISMATCH=field)


def test_sys_path_zip_and_root_cwd(demo_release, tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr("sitecustomize.py", "import os\n")
    script = "cp /z /usr/lib/python311.zip && echo 'import os' > /rkdemo_runtime.py && rm /z"
    _caught(
        demo_release.attack(tmp_path, script, files={"/z": buf.getvalue()}, changes=["WORKDIR /"]),
        FILE_UNACCOUNTED="/usr/lib/python311.zip",
        FILE_UNACCOUNTED_1="/rkdemo_runtime.py",
    )


def test_native_code_tied_to_its_commit(demo_release, tmp_path):
    if shutil.which("nvcc") is None or shutil.which("cc") is None:
        pytest.skip("nvcc and a C compiler are needed to make a real extension with an extra DT_NEEDED")
    lock = json.loads(demo_release.lock.read_text())
    if "kernels" not in lock["components"]:
        pytest.skip("the demo has no CUDA component")
    (tmp_path / "t.c").write_text("int trojan(void) { return 1; }\n")
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-o", str(tmp_path / "libtrojan.so"), str(tmp_path / "t.c")], check=True
    )
    (tmp_path / "k.cu").write_text(KERNEL)
    so = tmp_path / "librkdemo_kernels.so"
    subprocess.run(
        [
            "nvcc",
            "-shared",
            "-Xcompiler",
            "-fPIC",
            "-cudart",
            "none",
            "-gencode",
            "arch=compute_120a,code=sm_120a",
            "-o",
            str(so),
            str(tmp_path / "k.cu"),
            "-Xlinker",
            "--no-as-needed",
            f"-L{tmp_path}",
            "-ltrojan",
        ],
        check=True,
        capture_output=True,
    )
    needed = subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True).stdout
    assert "libtrojan.so" in needed
    # The attacker's wheel: the same files with the new .so and a matching RECORD; build.json names it.
    original = next((demo_release.artifacts / "wheels").glob("rkdemo_kernels-*.whl"))
    forged_wheel = tmp_path / "wheel" / original.name
    forged_wheel.parent.mkdir()
    with zipfile.ZipFile(original) as src, zipfile.ZipFile(forged_wheel, "w") as out:
        for item in src.infolist():
            data = so.read_bytes() if item.filename.endswith("librkdemo_kernels.so") else src.read(item)
            if item.filename.endswith(".dist-info/RECORD"):
                rows = []
                for line in data.decode().splitlines():
                    if line.startswith("rkdemo_kernels/librkdemo_kernels.so,"):
                        line = f"rkdemo_kernels/librkdemo_kernels.so,{_record_hash(so.read_bytes())},{so.stat().st_size}"
                    rows.append(line)
                data = ("\n".join(rows) + "\n").encode()
            out.writestr(item, data)
    script = "cp /so " + KERNELS + "/librkdemo_kernels.so && cp /t /usr/lib/libtrojan.so && rm /so /t"
    result = demo_release.attack(
        tmp_path,
        script,
        files={"/so": so.read_bytes(), "/t": (tmp_path / "libtrojan.so").read_bytes()},
        wheel=("kernels", forged_wheel),
    )
    _caught(
        result,
        FILE_MODIFIED=f"{KERNELS}/librkdemo_kernels.so",
        FILE_UNACCOUNTED="/usr/lib/libtrojan.so",
        BUILD_CLAIM_MISMATCH="wheel_sha256",
    )


@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
def test_links_from_owned_paths(demo_release, tmp_path, kind):
    if kind == "symlink":
        script = f"echo 'import os' > /opt/evil.py && rm {RUNTIME}/scale.py && ln -s /opt/evil.py {RUNTIME}/scale.py"
    else:
        script = (
            f"echo 'import os' > /opt/evil.py && rm {RUNTIME}/scale.py && ln /opt/evil.py {RUNTIME}/scale.py"
        )
    _caught(
        demo_release.attack(tmp_path, script),
        FILE_MODIFIED=f"{RUNTIME}/scale.py",
        FILE_UNACCOUNTED="/opt/evil.py",
    )


# --- the verifier's host --------------------------------------------------------------------


def test_many_site_packages_directories_are_bounded(demo_release, tmp_path):
    script = "python3 -c \"import os\nfor i in range(20000): os.makedirs(f'/srv/t/{i}/site-packages')\""
    image = demo_release.derive(script)
    started = time.monotonic()
    result = demo_release.verify_forged(image, demo_release.forge(image, tmp_path), max_roots=64)
    seconds = time.monotonic() - started
    assert seconds < 150, seconds
    errors = _errors(result)
    assert "VERIFY_LIMIT_REACHED" in errors and "FILE_UNACCOUNTED" in errors, list(errors)


def test_big_sitecustomize_files_are_bounded(demo_release, tmp_path):
    script = (
        f"for i in 1 2 3 4 5 6 7 8; do mkdir -p /srv/s$i && head -c 16000000 /dev/zero > /srv/s$i/sitecustomize.py; done"
        f" && head -c 16000000 /dev/zero > {SP}/sitecustomize.py"
    )
    image = demo_release.derive(script)
    result = demo_release.verify_forged(
        image, demo_release.forge(image, tmp_path), max_kept_bytes=8 * 1024 * 1024
    )
    assert result.stats.kept_bytes <= 8 * 1024 * 1024
    errors = _errors(result)
    assert "VERIFY_LIMIT_REACHED" in errors and "FILE_UNACCOUNTED" in errors, list(errors)


def test_one_deadline_over_the_whole_run(demo_release, tmp_path):
    image = demo_release.derive("true")
    started = time.monotonic()
    result = demo_release.verify_forged(image, demo_release.forge(image, tmp_path), deadline=0.5)
    assert time.monotonic() - started < 120
    assert not result.passed
    assert {"VERIFY_LIMIT_REACHED", "EXPORT_ABORTED"} & set(_errors(result))


def test_a_huge_sparse_file_stops_the_read_at_its_header(demo_release, tmp_path):
    # 1 GiB of holes: no disk for the attacker, but before the fix every byte went through the
    # export stream (time in proportion to the apparent size) to end as FILE_TOO_LARGE. Now the
    # read stops at the file's header and the image is not verified.
    image = demo_release.derive("truncate -s 1G /srv/huge.bin")
    started = time.monotonic()
    result = demo_release.verify_forged(
        image, demo_release.forge(image, tmp_path), max_file_bytes=64 * 1024 * 1024
    )
    assert not result.passed
    [message] = _errors(result)["EXPORT_ABORTED"]
    assert "/srv/huge.bin is 1073741824 bytes, over the per-file limit of 67108864 bytes" in message
    assert "reading stopped at its header" in message
    assert time.monotonic() - started < 120


def test_the_deadline_bounds_the_whole_command_even_a_silent_engine(demo_release, tmp_path):
    """``--deadline`` bounds the command, not only the readers that check it: a Docker Engine that
    accepts the connection and never answers (the SDK would wait its 600 s) stops the run at the
    deadline plus its grace, one line, exit 1, no summary written (issue 34, item 5)."""
    import socket
    import threading

    from releasekit.deadline import grace_for

    path = tmp_path / "silent.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(8)
    held: list[socket.socket] = []

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                held.append(server.accept()[0])  # read nothing, answer nothing

    threading.Thread(target=accept, daemon=True).start()
    summary = tmp_path / "summary.json"
    env = {"DOCKER_HOST": f"unix://{path}"}
    started = time.monotonic()
    # A child process: the --deadline's alarm ends the whole command, blocked on a silent engine.
    run = run_cli(
        "verify-provenance",
        demo_release.image_id,
        "--lock",
        str(demo_release.lock),
        "--artifacts",
        str(demo_release.artifacts),
        "--summary",
        str(summary),
        "--allow-local-repos",
        "--deadline",
        "3",
        env=env,
        timeout=120,
    )
    elapsed = time.monotonic() - started
    server.close()
    for conn in held:
        conn.close()
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stderr.count("\n") == 1 and "--deadline of 3 s passed" in run.stderr, run.stderr
    assert held, "the verifier never reached the engine"
    assert elapsed < 3 + grace_for(3) + 20, elapsed
    assert not summary.exists()
