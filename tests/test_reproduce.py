"""reproduce: the demo release rebuilt from the source archive attached to its digest, with its sources gone.

One real build for the module (`releasekit demo`'s pipeline up to verify-provenance, without
the validation matrix), published through the real gate to a real `docker-registry` on
127.0.0.1. Then: the archive's bundles hold exactly the locked commits; the demo's source
repositories and the releasekit mirror cache are deleted and `releasekit reproduce` on the
pushed digest rebuilds the same image ID from the attachments alone, and its reproduce receipt,
signed by a reproducer key, is what `promote` to stable requires (the manifest says
`publish.require_reproduced`: no receipt, unsigned, signed by another key, edited, of another
digest, of another verdict or made on the build's runner is refused, nothing moved); a tampered
archive blob is refused before building; and a registry that answers the pull-back with another
manifest fails the publish with nothing tagged.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cli_run import invoke

from releasekit.publish.attachments import TITLE, attachment_tag
from releasekit.registry import RegistryClient
from releasekit.signing.keys import write_key_pair

pytestmark = [pytest.mark.docker, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
PULLBACK_REPO = "demo/pullback"


class World:
    root: Path
    cache: Path
    demo: Path
    manifest: Path
    lock: Path
    release: Path
    saved_release: Path
    image_id: str
    host: str
    digest: str
    swap_result: subprocess.CompletedProcess[str]
    swapped: list[str]
    locked: Path
    repo = "demo/reproduce"


def _without_suites(ctx):
    """A demo stage: drop ``tests:`` and ``hygiene:`` from the example manifest's components."""
    from ruamel.yaml import YAML

    from releasekit.demo.result import StageResult

    yaml = YAML()
    data = yaml.load(ctx.manifest.read_text())
    for comp in data["components"].values():
        comp.pop("tests", None)
        comp.pop("hygiene", None)
    # Promote to stable requires an independent reproduction, signed by a reproducer key of its own
    # (made beside a saved copy of this manifest once the demo ran: the demo directory is deleted below).
    data["publish"] = {
        "repository": f"127.0.0.1/{World.repo}",
        "promote": {"r1": "stable"},
        "require_reproduced": True,
        "reproducer_keys": ["reproducer/releasekit.pub"],
    }
    with ctx.manifest.open("w") as fh:
        yaml.dump(data, fh)
    return StageResult(name="without suites", status="passed", summary="component suites and hygiene removed")


@pytest.fixture(scope="module")
def reproduce_world(tmp_path_factory, docker_client):
    from releasekit.demo.localregistry import start_local_registry
    from releasekit.demo.service import STAGES, VALIDATION_SETUP_STAGES, DemoStage, run_demo

    w = World()
    w.root = tmp_path_factory.mktemp("reproduce")
    w.cache = w.root / "cache"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RELEASEKIT_CACHE", str(w.cache))
        # Unsigned (no "signing key" stage): this release is published without --trusted-key.
        plain = [s for s in STAGES if s.name not in (*VALIDATION_SETUP_STAGES, "signing key")]
        names = [s.name for s in plain]
        # This release is about its source archive: the example's component test suites and hygiene
        # (whose receipts the publish gate would require) are taken out before the plan is locked.
        stages = plain[: names.index("verify-provenance") + 1]
        stages.insert(names.index("example") + 1, DemoStage("without suites", _without_suites))
        demo = run_demo(w.root / "demo", stages=stages)
        assert demo.passed and demo.image_id, [s.summary for s in demo.stages]
        w.demo = w.root / "demo"
        w.manifest = w.demo / "example" / "manifest.yaml"
        w.lock = w.demo / "lock.json"
        w.release = w.demo / "release"
        w.image_id = demo.image_id
        # The locked manifest (same bytes) and its reproducer key, kept where the sources' deletion leaves them.
        w.locked = w.root / "locked"
        w.locked.mkdir()
        shutil.copyfile(w.manifest, w.locked / "manifest.yaml")
        write_key_pair(w.locked / "reproducer")
        write_key_pair(w.root / "release-key")  # a key of the release, never a reproducer's
        with start_local_registry(w.root / "registry") as reg:
            w.host = reg.host
            # First, before the engine has ever pulled this image (it then keeps the manifest and
            # trusts its copy): a publish through a registry proxy that answers the pull-back with
            # other manifest bytes. The test below reads the outcome.
            with _swapping_proxy(reg.host) as (proxy, handler):
                w.swap_result = invoke(
                    "publish",
                    "--image",
                    w.image_id,
                    "--lock",
                    str(w.lock),
                    "--receipts",
                    str(w.release / "receipts"),
                    "--evidence",
                    str(w.release),
                    "--manifest",
                    str(w.manifest),
                    "--to",
                    f"{proxy}/{PULLBACK_REPO}",
                    "--tag",
                    "r1",
                    "--tag",
                    "beta",
                    "-o",
                    str(w.root / "pullback-out"),
                    env={"RELEASEKIT_CACHE": str(w.cache)},
                )
                w.swapped = list(handler.swapped)
            r = invoke(
                "publish",
                "--image",
                w.image_id,
                "--lock",
                str(w.lock),
                "--receipts",
                str(w.release / "receipts"),
                "--evidence",
                str(w.release),
                "--manifest",
                str(w.manifest),
                "--to",
                f"{reg.host}/{w.repo}",
                "--tag",
                "r1",
                "--json",
                env={"RELEASEKIT_CACHE": str(w.cache)},
            )
            assert r.returncode == 0, r.stdout + r.stderr
            w.digest = json.loads(r.stdout)["digest"]
            w.saved_release = w.root / "saved-release"
            shutil.copytree(w.release, w.saved_release)
            yield w


def test_build_writes_a_complete_archive_listed_in_the_provenance(reproduce_world):
    index = json.loads((reproduce_world.release / "archive.json").read_text())
    assert index["schema"] == "releasekit.archive/v1"
    lock = json.loads(reproduce_world.lock.read_text())
    kinds = {e["path"]: e for e in index["entries"]}
    runtime = kinds["archive/git/runtime.bundle"]
    assert runtime["commit"] == lock["components"]["runtime"]["commit"]
    assert {"archive/lock.json", "archive/manifest.yaml"} <= set(kinds)
    # Exactly the locked commit under one ref: no branch, no PR head (PR 3 was superseded, never merged).
    heads = subprocess.run(
        ["git", "bundle", "list-heads", str(reproduce_world.release / runtime["path"])],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert heads == [runtime["commit"], "refs/releasekit/locked/runtime"]
    pr3 = subprocess.run(
        [
            "git",
            "--git-dir",
            str(reproduce_world.demo / "example" / "repos" / "rkdemo-runtime.git"),
            "rev-parse",
            "refs/pull/3/head",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    probe = reproduce_world.root / "probe.git"
    subprocess.run(["git", "init", "-q", "--bare", str(probe)], check=True)
    subprocess.run(
        [
            "git",
            "--git-dir",
            str(probe),
            "fetch",
            "-q",
            str(reproduce_world.release / runtime["path"]),
            "refs/*:refs/*",
        ],
        check=True,
    )
    assert subprocess.run(["git", "--git-dir", str(probe), "cat-file", "-e", pr3]).returncode != 0
    # Every file and the index itself are byproducts of the build, with the same sha256.
    statement = json.loads((reproduce_world.release / "provenance.intoto.json").read_text())
    byproducts = {
        b["name"]: b["digest"]["sha256"] for b in statement["predicate"]["runDetails"]["byproducts"]
    }
    for entry in index["entries"]:
        assert byproducts[entry["path"]] == entry["sha256"]
    assert "archive.json" in byproducts
    # The archive is attached to the pushed digest, byte for byte.
    with RegistryClient(reproduce_world.host) as client:
        attached = json.loads(
            client.get_manifest(reproduce_world.repo, attachment_tag(reproduce_world.digest)).data
        )
        titles = {layer["annotations"][TITLE]: layer["digest"] for layer in attached["layers"]}
    for entry in index["entries"]:
        assert titles[entry["path"]] == "sha256:" + entry["sha256"]


def test_reproduce_from_the_registry_with_every_source_gone(reproduce_world):
    # The sources and every mirror of them leave the disk: only the registry's attachments remain.
    shutil.rmtree(reproduce_world.demo)
    shutil.rmtree(reproduce_world.cache / "git", ignore_errors=True)
    receipt = reproduce_world.root / "reproduction" / "receipt.json"
    receipt.parent.mkdir()
    r = invoke(
        "reproduce",
        f"{reproduce_world.host}/{reproduce_world.repo}@{reproduce_world.digest}",
        "--json",
        "--receipt",
        str(receipt),
        "--runner",
        "reproducer-1",
        env={"RELEASEKIT_CACHE": str(reproduce_world.cache)},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(r.stdout)
    assert result["same"] is True
    assert result["rebuilt_image_id"] == result["published_image_id"] == reproduce_world.image_id
    assert result["layers"] and all(layer["same"] for layer in result["layers"])
    assert {c["name"] for c in result["components"] if c["same"]} >= {"runtime"}
    assert not (reproduce_world.cache / "git").exists() or not any(
        (reproduce_world.cache / "git").glob("*.git")
    )
    # A tag is resolved to its digest first.
    again = receipt.with_name("again.json")
    by_tag = invoke(
        "reproduce",
        f"{reproduce_world.host}/{reproduce_world.repo}:r1",
        "--json",
        "--receipt",
        str(again),
        "--runner",
        "reproducer-1",
        env={"RELEASEKIT_CACHE": str(reproduce_world.cache)},
    )
    assert by_tag.returncode == 0, by_tag.stdout + by_tag.stderr
    assert json.loads(by_tag.stdout)["digest"] == reproduce_world.digest
    # The receipt: what was reproduced, by whom, from which build; the same bytes when run again.
    assert again.read_bytes() == receipt.read_bytes()
    _promote_stable_requires_a_signed_independent_reproduction(reproduce_world, receipt)


def _promote(world: World, *extra: str, manifest: bool = True):
    return invoke(
        "promote",
        "--from",
        f"{world.host}/{world.repo}:r1",
        "--to",
        f"{world.host}/{world.repo}:stable",
        *(("--manifest", str(world.locked / "manifest.yaml")) if manifest else ()),
        *extra,
    )


def _resign(receipt: Path, key: Path, edit: dict[str, object] | None = None, *, name: str) -> Path:
    """A copy of ``receipt`` (with ``edit`` applied to its JSON) signed by ``key`` beside it."""
    copy = receipt.with_name(f"{name}.json")
    data = json.loads(receipt.read_text())
    for field, value in (edit or {}).items():
        section, _, inner = field.partition(".")
        if inner:
            data[section][inner] = value
        else:
            data[section] = value
    copy.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    r = invoke("sign", "--reproduce-receipt", str(copy), "--key", str(key))
    assert r.returncode == 0, r.stdout + r.stderr
    return copy


def _promote_stable_requires_a_signed_independent_reproduction(world: World, receipt: Path) -> None:
    data = json.loads(receipt.read_text())
    build_runner = data["build"]["runner"]
    assert data["digest"] == f"{world.host}/{world.repo}@{world.digest}"
    assert data["reproduced"] is True and data["reproducer"] == "reproducer-1"
    assert data["published_image_id"] == data["rebuilt_image_id"] == world.image_id
    assert build_runner and build_runner != "reproducer-1"
    assert data["examined"]["layers"] > 0 and data["examined"]["archive_files"] > 0
    reproducer_key = world.locked / "reproducer" / "releasekit.key"
    release_key = world.root / "release-key" / "releasekit.key"
    unsigned = receipt.with_name("unsigned.json")
    shutil.copyfile(receipt, unsigned)
    edited = _resign(receipt, reproducer_key, name="edited")
    edited.write_text(edited.read_text().replace('"reproducer-1"', '"reproducer-2"'))
    attacks = {
        "REPRODUCTION_REQUIRED": (),
        "REPRODUCTION_UNSIGNED": ("--reproduced", str(unsigned)),
        "REPRODUCTION_UNTRUSTED": ("--reproduced", str(_resign(receipt, release_key, name="release-signed"))),
        "REPRODUCTION_WRONG_DIGEST": (
            "--reproduced",
            str(
                _resign(
                    receipt,
                    reproducer_key,
                    {"digest": f"{world.host}/{world.repo}@sha256:{'0' * 64}"},
                    name="other-digest",
                )
            ),
        ),
        "REPRODUCTION_SAME_RUNNER": (
            "--reproduced",
            str(_resign(receipt, reproducer_key, {"reproducer": build_runner}, name="same-runner")),
        ),
        "REPRODUCTION_DIFFERED": (
            "--reproduced",
            str(_resign(receipt, reproducer_key, {"reproduced": False}, name="differed")),
        ),
    }
    for code, extra in attacks.items():
        r = _promote(world, *extra)
        assert r.returncode == 1 and code in r.stdout, (code, r.stdout + r.stderr)
    r = _promote(world, "--reproduced", str(edited))  # edited after it was signed
    assert r.returncode == 1 and "REPRODUCTION_UNTRUSTED" in r.stdout, r.stdout + r.stderr
    # Without --manifest, the published gate record's own word holds: refused, not let through unasked.
    r = _promote(world, manifest=False)
    assert r.returncode == 1 and "REPRODUCTION_REQUIRED" in r.stdout, r.stdout + r.stderr
    assert "published gate record" in r.stdout, r.stdout
    with RegistryClient(world.host) as client:
        assert client.get_manifest(world.repo, "stable") is None  # nothing moved
    # The signed receipt of this digest, from another runner: promoted.
    r = invoke("sign", "--reproduce-receipt", str(receipt), "--key", str(reproducer_key))
    assert r.returncode == 0, r.stdout + r.stderr
    r = _promote(world, "--reproduced", str(receipt))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "reproduced independently" in r.stdout
    with RegistryClient(world.host) as client:
        stable = client.get_manifest(world.repo, "stable")
        assert stable is not None and stable.digest == world.digest


def test_tampered_archive_blob_is_refused_before_building(reproduce_world):
    # In the registry: the attachment now carries a bundle with one byte changed.
    with RegistryClient(reproduce_world.host) as client:
        tag = attachment_tag(reproduce_world.digest)
        original = client.get_manifest(reproduce_world.repo, tag)
        manifest = json.loads(original.data)
        layer = next(x for x in manifest["layers"] if x["annotations"][TITLE] == "archive/git/runtime.bundle")
        data = bytearray(client.get_blob(reproduce_world.repo, layer["digest"]))
        data[-30] ^= 0xFF
        layer["digest"] = client.push_blob(reproduce_world.repo, bytes(data))
        client.put_manifest(reproduce_world.repo, tag, json.dumps(manifest).encode(), original.media_type)
        try:
            r = invoke("reproduce", f"{reproduce_world.host}/{reproduce_world.repo}@{reproduce_world.digest}")
        finally:
            client.put_manifest(reproduce_world.repo, tag, original.data, original.media_type)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "archive/git/runtime.bundle" in r.stderr and "component runtime" in r.stderr, r.stderr
    assert "refusing to rebuild" in r.stderr
    assert "evidence: every archive file" not in r.stderr  # refused before the rebuild began

    # A local release directory: one changed byte in the lock is named the same way.
    tampered = reproduce_world.root / "tampered-release"
    shutil.copytree(reproduce_world.saved_release, tampered)
    lock = tampered / "archive" / "lock.json"
    lock.write_text(lock.read_text().replace('"name"', '"name" ', 1))
    r = invoke("reproduce", "--from", str(tampered))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "archive/lock.json" in r.stderr, r.stderr


class _SwapManifest(BaseHTTPRequestHandler):
    """A proxy in front of the registry that answers the engine's pull by digest with another manifest."""

    protocol_version = "HTTP/1.1"
    upstream = ""
    swapped: list[str] = []

    def log_message(self, *args: object) -> None:
        return None

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []  # joined once: appending to one bytes object is quadratic
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _forward(self) -> None:
        body = self._body()
        headers = {
            k: v
            for k, v in self.headers.items()
            if k.lower() not in ("host", "transfer-encoding", "connection")
        }
        headers["Content-Length"] = str(len(body))
        conn = http.client.HTTPConnection(self.upstream, timeout=120)
        conn.request(self.command, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        out_headers = [
            (k, v.replace(self.upstream, f"{self.server.server_address[0]}:{self.server.server_address[1]}"))
            for k, v in resp.getheaders()
            if k.lower() not in ("transfer-encoding", "connection", "content-length")
        ]
        status = resp.status
        agent = self.headers.get("User-Agent", "")
        length = resp.getheader("Content-Length") or "0" if self.command == "HEAD" else str(len(data))
        if (
            self.command in ("GET", "HEAD")
            and "/manifests/sha256:" in self.path
            and agent.startswith("docker/")
            and status == 200
        ):
            # Same image, different bytes: a registry that does not serve what was pushed.
            if self.command == "HEAD":
                conn.request("GET", self.path, headers=headers)
                data = conn.getresponse().read()
            data = json.dumps(json.loads(data), indent=1).encode()
            length = str(len(data))
            out_headers = [(k, v) for k, v in out_headers if k.lower() != "docker-content-digest"]
            out_headers.append(("Docker-Content-Digest", "sha256:" + hashlib.sha256(data).hexdigest()))
            self.swapped.append(f"{self.command} {self.path}")
        self.send_response(status)
        for k, v in out_headers:
            self.send_header(k, v)
        self.send_header("Content-Length", length)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        conn.close()

    do_GET = do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = _forward


@contextlib.contextmanager
def _swapping_proxy(upstream: str):
    handler = type("Handler", (_SwapManifest,), {"upstream": upstream, "swapped": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def test_pull_back_of_another_manifest_fails_the_publish_with_nothing_tagged(reproduce_world):
    r = reproduce_world.swap_result
    assert reproduce_world.swapped, (
        "the engine never asked the proxy for the manifest by digest: " + r.stdout[-800:] + r.stderr
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert "pull-back of" in r.stderr and "nothing was tagged" in r.stderr, r.stderr
    with RegistryClient(reproduce_world.host) as client:
        tags = client.tags(PULLBACK_REPO)
    assert "r1" not in tags and "beta" not in tags
    assert not any(t.endswith(".releasekit") for t in tags), tags


def _layer(path: Path, files: dict[str, bytes]) -> Path:
    import io
    import tarfile

    with tarfile.open(path, "w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_first_difference_names_the_file_and_the_component_that_installs_it(tmp_path):
    import zipfile

    from releasekit.reproduce.compare import first_file_difference, owner_of, tar_files

    sp = "usr/local/lib/python3.11/dist-packages"
    published = _layer(
        tmp_path / "p.tar", {f"{sp}/rkdemo_runtime/scale.py": b"x = 1\n", f"{sp}/k/__init__.py": b""}
    )
    rebuilt = _layer(
        tmp_path / "r.tar", {f"{sp}/rkdemo_runtime/scale.py": b"x = 2\n", f"{sp}/k/__init__.py": b""}
    )
    found = first_file_difference(tar_files(published), tar_files(rebuilt))
    assert found is not None and found[0] == f"{sp}/rkdemo_runtime/scale.py"
    wheel = tmp_path / "rkdemo_runtime-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("rkdemo_runtime/scale.py", "x = 2\n")
    other = tmp_path / "k-1-py3-none-any.whl"
    with zipfile.ZipFile(other, "w") as zf:
        zf.writestr("k/__init__.py", "")
    assert owner_of(found[0], {"kernels": other, "runtime": wheel}) == "runtime"
    assert first_file_difference(tar_files(published), tar_files(published)) is None


def _git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    return subprocess.run(
        ["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True, env=env
    ).stdout.strip()


def test_bundle_of_a_locked_commit_is_complete_and_an_incomplete_one_is_an_error(tmp_path):
    from releasekit.errors import InputError
    from releasekit.git import Mirror, check_bundle, create_bundle

    work = tmp_path / "src"
    work.mkdir()
    _git(work, "init", "-q", "-b", "main")
    (work / "a.txt").write_text("one\n")
    # Unchanged by the locked commit: a bundle of that commit alone over its parent lacks this blob.
    (work / "kept.txt").write_text("kept\n")
    _git(work, "add", "a.txt", "kept.txt")
    _git(work, "commit", "-qm", "one")
    (work / "a.txt").write_text("two\n")
    _git(work, "commit", "-qam", "two")
    commit, tree = _git(work, "rev-parse", "HEAD"), _git(work, "rev-parse", "HEAD^{tree}")
    _git(work, "checkout", "-qb", "side")
    (work / "b.txt").write_text("side\n")
    _git(work, "add", "b.txt")
    _git(work, "commit", "-qm", "side")
    side = _git(work, "rev-parse", "HEAD")

    mirror = Mirror(str(work), tmp_path / "cache", allow_local=True).update()
    bundle = tmp_path / "out" / "c.bundle"
    create_bundle(mirror, commit, "refs/releasekit/locked/c", bundle)
    # The remote is named by a URL that cannot be reached: only the bundle is read.
    checkout = check_bundle(bundle, "https://example.invalid/c.git", commit, tree, tmp_path / "check")
    assert checkout.tree == tree and (checkout.path / "a.txt").read_text() == "two\n"
    probe = tmp_path / "probe"
    probe.mkdir()
    _git(probe, "init", "-q", "--bare")
    _git(probe, "fetch", "-q", str(bundle), "refs/*:refs/*")
    assert subprocess.run(["git", "-C", str(probe), "cat-file", "-e", side]).returncode != 0  # nothing else

    # Needs the parent commit from elsewhere, and lacks a blob of the commit's own tree (kept.txt):
    # a bundle without history is read only when it holds every object a checkout reads.
    thin = tmp_path / "thin.bundle"
    _git(work, "bundle", "create", "-q", str(thin), f"{commit}~1..main")
    with pytest.raises(InputError, match="cannot read the commit from the bundle"):
        check_bundle(thin, "https://example.invalid/c.git", commit, tree, tmp_path / "check2")
