"""verify-provenance and reproduce against an attacker who wrote the build's cache, the git mirror or the archive.

One clean release (``releasekit demo``'s pipeline up to ``releasekit build``, built once per run on a
``RELEASEKIT_CACHE`` of its own); the module poisons its own copy of that cache and release directory
(``nocache_world`` in tests/conftest.py). Each cache attack poisons the real directory that build
wrote (``$RELEASEKIT_CACHE/build``: a release layer, the base's config, a wheel with its
``entry.json``), runs ``releasekit build`` again on it, as the attacker's build would, and
verifies the image that build made, with its own release directory and the same cache: the
verifier's reproduction must not take any of it. The replace-ref attack writes a
``refs/replace/*`` ref with ``git replace`` into the git mirror the build filled, which the
verifier reads. The reproduce attacks add a ref to a bundle and a wheel to the archive.
Each test fails on the code before issue 27 (docs/design/verify.md says how that was shown).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import zipfile
from functools import partial
from pathlib import Path

import pytest
from cli_run import invoke
from demo_release import CacheWorld

from releasekit.builder.service import run_build
from releasekit.clock import SystemClock
from releasekit.docker_engine import Engine
from releasekit.provenance.verify import VerifyResult

pytestmark = [pytest.mark.docker, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
SP = "/usr/local/lib/python3.11/dist-packages"
MD5SUMS = "/var/lib/dpkg/info/libpython3.11-minimal:amd64.md5sums"


@contextlib.contextmanager
def _restored(*paths: Path):
    """Put the cache files back as the build wrote them, whatever the test did to them."""
    saved = {p: p.read_bytes() for p in paths}
    try:
        yield
    finally:
        for p, data in saved.items():
            p.write_bytes(data)


def _errors(result: VerifyResult) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in result.findings.errors:
        out.setdefault(f.code, []).append(f"{f.location.path or f.location.field or ''}: {f.message}")
    return out


def _caught(result: VerifyResult, *expected: tuple[str, str]) -> None:
    errors = _errors(result)
    shown = "\n".join(f.render() for f in result.findings)
    assert not result.passed, shown
    assert "IMAGE_NOT_REPRODUCED" in errors, shown
    for code, fragment in expected:
        assert any(fragment in where for where in errors.get(code, [])), f"{code} {fragment}:\n{shown}"


def _tar_add(
    tar: tarfile.TarFile, name: str, data: bytes | None = None, mode: int = 0o755, uid: int = 0
) -> None:
    info = tarfile.TarInfo(name)
    info.mode = mode
    info.uid = info.gid = uid
    info.mtime = 1767225600
    if data is None:
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
    else:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def test_poisoned_cached_release_layer(nocache_world):
    """layers/<key>/layer.tar rewritten: a stdlib edit with matching md5sums, /etc/ld.so.preload, a setuid
    root python3.11 and a /usr/bin/env owned by uid 1000 (both the base's bytes), and an opaque whiteout over
    /etc/ssl/certs with an attacker CA."""
    layer = nocache_world.entry("layers", "layer.tar")
    os_py = nocache_world.base_file("/usr/lib/python3.11/os.py") + b"\nimport sys as _s; _s.argv\n"
    md5 = hashlib.md5(os_py).hexdigest()
    md5sums = b"".join(
        (
            f"{md5}  usr/lib/python3.11/os.py\n".encode()
            if line.endswith(b"  usr/lib/python3.11/os.py")
            else line + b"\n"
        )
        for line in nocache_world.base_file(MD5SUMS).splitlines()
    )
    python = nocache_world.base_file("/usr/bin/python3.11")
    env = nocache_world.base_file("/usr/bin/env")
    with _restored(layer):
        buf = io.BytesIO()
        with (
            tarfile.open(layer) as tin,
            tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as out,
        ):
            for member in tin.getmembers():
                out.addfile(member, tin.extractfile(member) if member.isfile() else None)
            for d in (
                "etc",
                "etc/ssl",
                "etc/ssl/certs",
                "usr/bin",
                "usr/lib",
                "usr/lib/python3.11",
                "var",
                "var/lib",
            ):
                _tar_add(out, d)
            _tar_add(out, "var/lib/dpkg", mode=0o755)
            _tar_add(out, "var/lib/dpkg/info")
            _tar_add(out, "etc/ld.so.preload", b"/usr/local/lib/libpayload.so\n", 0o644)
            _tar_add(out, "etc/ssl/certs/.wh..wh..opq", b"", 0o644)
            _tar_add(out, "etc/ssl/certs/attacker-ca.pem", b"-----BEGIN CERTIFICATE-----\nAAAA\n", 0o644)
            _tar_add(out, "usr/bin/python3.11", python, 0o4755)
            _tar_add(out, "usr/bin/env", env, 0o755, uid=1000)
            _tar_add(out, "usr/lib/python3.11/os.py", os_py, 0o644)
            _tar_add(out, MD5SUMS.lstrip("/"), md5sums, 0o644)
        layer.write_bytes(buf.getvalue())
        attacked = nocache_world.build("layer-poisoned")
        result = nocache_world.verify(attacked)
    _caught(
        result,
        ("RELEASE_LAYER_MISMATCH", ""),
        ("FILE_MODIFIED", "/usr/lib/python3.11/os.py"),
        ("FILE_MODIFIED", MD5SUMS),
        ("FILE_UNACCOUNTED", "/etc/ld.so.preload"),
        ("FILE_MODIFIED", "/usr/bin/python3.11: mode 4755, expected 755"),
        ("FILE_MODIFIED", "/usr/bin/env: owner 1000:1000, expected 0:0"),
        ("FILE_UNACCOUNTED", "/etc/ssl/certs/attacker-ca.pem"),
        ("FILE_REMOVED", "/etc/ssl/certs/"),
    )


def test_poisoned_cached_base_config(nocache_world):
    """bases/<id>.json rewritten: an Entrypoint that runs a payload, LD_AUDIT, and an extra "base" layer that
    adds /etc/ld.so.preload. The verifier reads the base from the engine and checks it."""
    entry = nocache_world.cache / "bases" / f"{nocache_world.base_id.removeprefix('sha256:')}.json"
    container = nocache_world.client.containers.create(
        nocache_world.base_id, command=["true"], network_mode="none"
    )
    try:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            _tar_add(tar, "etc/ld.so.preload", b"/usr/local/lib/libpayload.so\n", 0o644)
        container.put_archive("/", buf.getvalue())
        extra = container.commit()
    finally:
        container.remove(force=True)
    nocache_world.images.append(extra.id)
    extra_layer = extra.attrs["RootFS"]["Layers"][-1]
    with _restored(entry):
        based = json.loads(entry.read_text())
        based["diff_ids"].append(extra_layer)
        based["config"]["rootfs"]["diff_ids"].append(extra_layer)
        runtime = based["config"].setdefault("config", {})
        runtime["Entrypoint"] = ["/bin/sh", "-c", 'touch /tmp/pwned; exec "$@"', "--"]
        runtime["Env"] = [*(runtime.get("Env") or []), "LD_AUDIT=/usr/local/lib/libpayload.so"]
        entry.write_text(json.dumps(based))
        attacked = nocache_world.build("base-poisoned")
        # Before issue 27 this passed with and without --no-cache (both read this entry); now the base is
        # read from the engine in either mode (checked_base), so the default mode is the one run here.
        result = nocache_world.verify(attacked)
    _caught(
        result,
        ("CONFIG_MISMATCH", "Entrypoint"),
        ("CONFIG_MISMATCH", "LD_AUDIT"),
        ("EXTRA_LAYERS", ""),
        ("FILE_UNACCOUNTED", "/etc/ld.so.preload"),
    )


def test_forged_wheel_in_the_wheel_cache(nocache_world):
    """wheels/<key>/: the native kernels wheel with a backdoored library, RECORD and entry.json made to match."""
    entry_json = next(
        p for p in nocache_world.cache.glob("wheels/*/*/entry.json") if "rkdemo_kernels" in p.read_text()
    )
    wheel = next(entry_json.parent.glob("*.whl"))
    with _restored(entry_json, wheel):
        forged = io.BytesIO()
        with zipfile.ZipFile(wheel) as zin, zipfile.ZipFile(forged, "w", zipfile.ZIP_DEFLATED) as zout:
            names = zin.namelist()
            lib = next(n for n in names if n.endswith(".so"))
            payload = zin.read(lib) + b"\0backdoor"
            digest = hashlib.sha256(payload).digest()
            row = f"{lib},sha256={base64.urlsafe_b64encode(digest).rstrip(b'=').decode()},{len(payload)}"
            for info in zin.infolist():
                data = zin.read(info)
                if info.filename == lib:
                    data = payload
                elif info.filename.endswith(".dist-info/RECORD"):
                    lines = [
                        row if line.startswith(lib + ",") else line for line in data.decode().splitlines()
                    ]
                    data = ("\n".join(lines) + "\n").encode()
                zout.writestr(info, data)
        wheel.write_bytes(forged.getvalue())
        record = json.loads(entry_json.read_text())
        record["wheel"]["sha256"] = hashlib.sha256(forged.getvalue()).hexdigest()
        entry_json.write_text(json.dumps(record))
        attacked = nocache_world.build("wheel-forged")
        result = nocache_world.verify(attacked)
    _caught(result, ("RELEASE_LAYER_MISMATCH", ""), ("FILE_MODIFIED", "librkdemo_kernels.so"))


def _git(*args: str, cwd: Path | None = None, data: bytes | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, input=data, capture_output=True, check=True)
    return proc.stdout.decode().strip()


def _replacement_commit(git_dir: Path, commit: str, path: str, data: bytes) -> str:
    """A commit like ``commit`` (same parents, author, message) whose tree has ``data`` at ``path``."""
    g = ("--git-dir", str(git_dir))
    blob = _git(*g, "hash-object", "-w", "--stdin", data=data)
    index = git_dir / "attacker.index"
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}
    subprocess.run(["git", *g, "read-tree", commit], env=env, check=True)
    subprocess.run(["git", *g, "update-index", "--cacheinfo", f"100644,{blob},{path}"], env=env, check=True)
    tree = subprocess.run(
        ["git", *g, "write-tree"], env=env, check=True, capture_output=True, text=True
    ).stdout
    index.unlink()
    text = _git(*g, "cat-file", "commit", commit) + "\n"
    lines = text.split("\n")
    lines[0] = f"tree {tree.strip()}"
    return _git(*g, "hash-object", "-t", "commit", "-w", "--stdin", data="\n".join(lines).encode())


def test_replace_ref_in_the_mirror_does_not_hide_an_edited_source(nocache_world):
    """The image's rkdemo_runtime/scale.py edited, and ``git replace`` in the mirror the build filled (which the
    verifier reads) makes the locked commit show a tree with the edited bytes: SOURCE_BLOB_MISMATCH must still
    name the file."""
    from releasekit.records.lock import read_lock

    commit = read_lock(nocache_world.lock).components["runtime"].commit
    mirror = next((nocache_world.root / "cache" / "git").glob("rkdemo-runtime-*.git"))
    g = ("--git-dir", str(mirror))
    files = _git(*g, "ls-tree", "-r", "--name-only", commit).splitlines()
    path = next(p for p in files if p.endswith("rkdemo_runtime/scale.py"))
    edited = b"def scale(x, k=2):\n    return x * k + 1\n"
    forged = _replacement_commit(mirror, commit, path, edited)
    container = nocache_world.client.containers.create(
        nocache_world.image_id, command=["true"], network_mode="none"
    )
    try:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            _tar_add(tar, f"{SP}/rkdemo_runtime/scale.py".lstrip("/"), edited, 0o644)
        container.put_archive("/", buf.getvalue())
        image = container.commit(changes=['CMD ["python3"]']).id
    finally:
        container.remove(force=True)
    nocache_world.images.append(image)
    _git(*g, "replace", commit, forged)
    try:
        assert _git(*g, "show", f"{commit}:{path}").encode() + b"\n" == edited  # what git shows by default
        result = nocache_world.verify(nocache_world.release, image=image)
    finally:
        _git(*g, "replace", "-d", commit)
    _caught(result, ("SOURCE_BLOB_MISMATCH", "rkdemo_runtime/scale.py"))


def _release_copy(nocache_world: CacheWorld, tmp_path: Path) -> Path:
    copy = tmp_path / "release"
    shutil.copytree(nocache_world.release, copy)
    return copy


def _reproduce_cli(directory: Path) -> subprocess.CompletedProcess[str]:
    return invoke("reproduce", "--from", str(directory), "--json")


def test_reproduce_refuses_an_archive_with_an_unlisted_wheel(nocache_world, tmp_path):
    release = _release_copy(nocache_world, tmp_path)
    (release / "archive" / "wheels").mkdir(exist_ok=True)
    (release / "archive" / "wheels" / "rkdemo_runtime-9.9-py3-none-any.whl").write_bytes(
        b"PK\x05\x06" + bytes(18)
    )
    proc = _reproduce_cli(release)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    codes = {(f["code"], f["location"]["path"]) for f in result["findings"]["findings"]}
    assert ("ARCHIVE_UNLISTED_FILE", "archive/wheels/rkdemo_runtime-9.9-py3-none-any.whl") in codes, codes
    assert result["rebuilt_image_id"] == ""


def test_reproduce_refuses_a_bundle_with_extra_refs(nocache_world, tmp_path):
    """The runtime bundle re-made with a refs/replace/* ref beside the locked one, and archive.json and the
    provenance rewritten to its sha256 (unsigned evidence from a directory: an attacker can write all three)."""
    from releasekit.registry import RegistryClient
    from releasekit.reproduce.service import reproduce

    release = _release_copy(nocache_world, tmp_path)
    index = json.loads((release / "archive.json").read_text())
    entry = next(e for e in index["entries"] if e["component"] == "runtime")
    bundle = release / entry["path"]
    repo = tmp_path / "attacker.git"
    _git("init", "--quiet", "--bare", str(repo))
    _git("--git-dir", str(repo), "fetch", "--quiet", str(bundle), f"+{entry['ref']}:{entry['ref']}")
    path = next(
        p
        for p in _git("--git-dir", str(repo), "ls-tree", "-r", "--name-only", entry["commit"]).splitlines()
        if p.endswith("scale.py")
    )
    original = _git("--git-dir", str(repo), "rev-parse", f"{entry['commit']}:{path}")
    blob = _git(
        "--git-dir", str(repo), "hash-object", "-w", "--stdin", data=b"def scale(x, k=2):\n    return 0\n"
    )
    _git("--git-dir", str(repo), "replace", original, blob)
    bundle.unlink()
    _git(
        "--git-dir",
        str(repo),
        "bundle",
        "create",
        "--quiet",
        str(bundle),
        entry["ref"],
        f"refs/replace/{original}",
    )
    entry["sha256"] = hashlib.sha256(bundle.read_bytes()).hexdigest()
    entry["size"] = bundle.stat().st_size
    (release / "archive.json").write_text(json.dumps(index, indent=2))
    statement = json.loads((release / "provenance.intoto.json").read_text())
    shas = {
        entry["path"]: entry["sha256"],
        "archive.json": hashlib.sha256((release / "archive.json").read_bytes()).hexdigest(),
    }
    for item in statement["predicate"]["runDetails"]["byproducts"]:
        if item["name"] in shas:
            item["digest"]["sha256"] = shas[item["name"]]
    (release / "provenance.intoto.json").write_text(json.dumps(statement, indent=2))
    result = reproduce(
        engine=Engine(),
        rebuild=partial(run_build, clock=SystemClock()),
        open_registry=RegistryClient,
        from_dir=release,
    )
    found = {(f.code, f.location.path) for f in result.findings.errors}
    assert not result.same and result.rebuilt_image_id == "", result
    assert ("BUNDLE_EXTRA_REFS", entry["path"]) in found, found
    assert f"refs/replace/{original}" in result.findings.errors[0].message
