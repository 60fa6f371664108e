"""Issue 34 items 5 and 6: every external stream bounded, no lie recorded from a cache.

Each attack is built for real: a hostile HTTP server on 127.0.0.1 (endless body, one byte a
second, 100,000-deep JSON), a FIFO, a ``/dev/zero`` link, a poisoned forge cache entry. A
command that used to hang runs as a subprocess with a timeout and must end quickly with one line.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cli_run import invoke, run_cli
from forge import Forge
from github_server import PR, GitHubServer
from plan_world import plan_lock

from releasekit.manifest import load_manifest

REPO = Path(__file__).resolve().parent.parent


def _one_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "internal error" not in lines[0] and "Traceback" not in proc.stderr
    return lines[0]


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name in ("GITHUB_TOKEN", "GH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RELEASEKIT_ALLOW_LOCAL_REPOS", "1")
    monkeypatch.setenv("RELEASEKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("RELEASEKIT_STATE", str(tmp_path / "state"))
    return dict(os.environ)


# --- the forge ----------------------------------------------------------------------------------


class Hostile:
    """A forge that answers every GET with what ``body`` writes to the socket."""

    def __init__(self, body: Callable[[BaseHTTPRequestHandler], None]) -> None:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    body(self)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/api/v3"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _head(h: BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("content-type", "application/json")
    h.end_headers()


def _endless(h: BaseHTTPRequestHandler) -> None:
    _head(h)
    h.wfile.write(b'[{"title": "')
    chunk = b"x" * (1 << 20)
    while True:
        h.wfile.write(chunk)


def _drip(h: BaseHTTPRequestHandler) -> None:
    _head(h)
    while True:
        h.wfile.write(b" ")
        h.wfile.flush()
        time.sleep(1)


def _deep(h: BaseHTTPRequestHandler) -> None:
    _head(h)
    h.wfile.write(b"[" * 100_000 + b"]" * 100_000)


def _manifest(path: Path, repo: str, api_url: str) -> Path:
    data = {
        "schema": "releasekit/v1",
        "name": "bounded",
        "components": {
            "app": {
                "kind": "git",
                "repo": repo,
                "canonical_branch": "main",
                "forge": {"api_url": api_url, "repo": "lab/app"},
                "merge_plan": [{"pr": 1, "title": "one"}],
            }
        },
        "toolchain": {
            "base_image": {"name": "releasekit-test/none", "digest": "sha256:" + "0" * 64},
            "cuda_arch_list": ["12.0a"],
        },
    }
    path.write_text(json.dumps(data, indent=1))
    return path


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Forge:
    git = Forge(tmp_path_factory.mktemp("bounded") / "w", "app")
    git.init()
    git.open_pr(1, [{"one.py": "1\n"}])
    return git


@pytest.mark.parametrize(
    ("answer", "expect"),
    [(_endless, "over 33554432 bytes"), (_drip, "no complete answer within 3 s"), (_deep, "nested deeper")],
    ids=["endless-body", "one-byte-a-second", "deep-json"],
)
def test_a_hostile_forge_ends_plan_lock_with_one_line(
    app: Forge,
    env: dict[str, str],
    tmp_path: Path,
    answer: Callable[[BaseHTTPRequestHandler], None],
    expect: str,
) -> None:
    server = Hostile(answer)
    try:
        manifest = _manifest(tmp_path / "m.json", app.url, server.api_url)
        out = tmp_path / "lock.json"
        started = time.monotonic()
        # A child process: the abandoned forge read dies with it (bounded_http), and a hang meets the timeout.
        proc = run_cli(
            "plan",
            "lock",
            str(manifest),
            "-o",
            str(out),
            env={**env, "RELEASEKIT_FORGE_DEADLINE": "3"},
            timeout=60,
        )
        took = time.monotonic() - started
    finally:
        server.stop()
    assert proc.returncode == 2, proc.stderr
    assert expect in _one_line(proc)
    assert took < 30 and not out.exists()


def _entry(cache: Path) -> Path:
    entries = sorted((cache / "forge").glob("*.json"))
    assert len(entries) == 1, entries
    return entries[0]


def test_a_poisoned_forge_cache_entry_cannot_change_the_lock(
    app: Forge, env: dict[str, str], tmp_path: Path
) -> None:
    server = GitHubServer(owner="lab", repo="app").start()
    try:
        server.add(PR(1, app.pr_head(1), "one", draft=True))
        loaded = load_manifest(_manifest(tmp_path / "m.json", app.url, server.api_url))
        first = plan_lock(loaded, allow_local=True)
        assert first.forge is not None and first.forge.components["app"].pull_requests[0].draft is True
        # The attacker keeps the server's current ETag (anyone can GET it) and edits the body.
        entry = _entry(tmp_path / "cache")
        data = json.loads(entry.read_text())
        body = json.loads(data["body"])
        body[0]["draft"] = False
        data["body"] = json.dumps(body)
        entry.write_text(json.dumps(data))
        server.log.clear()
        again = plan_lock(loaded, allow_local=True)
        assert again.forge is not None and again.forge.components["app"].pull_requests[0].draft is True
        assert server.statuses() == [200]  # asked afresh, not revalidated from the poisoned entry
        # An honest entry (written by this user's releasekit) is still revalidated: no rate limit spent.
        server.log.clear()
        assert plan_lock(loaded, allow_local=True).forge == first.forge
        assert server.statuses() == [304]
    finally:
        server.stop()


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_forge_cache_entry_that_is_a_fifo_or_dev_zero_is_ignored(
    app: Forge, env: dict[str, str], tmp_path: Path, kind: str
) -> None:
    server = GitHubServer(owner="lab", repo="app").start()
    try:
        server.add(PR(1, app.pr_head(1), "one"))
        manifest = _manifest(tmp_path / "m.json", app.url, server.api_url)
        first = invoke("plan", "lock", str(manifest), "-o", str(tmp_path / "l1.json"), env=env)
        assert first.returncode == 0, first.stderr
        entry = _entry(tmp_path / "cache")
        entry.unlink()
        if kind == "fifo":
            os.mkfifo(entry)
        else:
            entry.symlink_to("/dev/zero")
        started = time.monotonic()
        # A child process: a cache entry that a regression would block on is ended by the timeout.
        again = run_cli("plan", "lock", str(manifest), "-o", str(tmp_path / "l2.json"), env=env, timeout=30)
        assert again.returncode == 0, again.stderr
        assert time.monotonic() - started < 30
        forge = [json.loads((tmp_path / n).read_text())["forge"] for n in ("l1.json", "l2.json")]
        assert forge[0] == forge[1] and forge[0]["components"]["app"]["status"] == "read"
    finally:
        server.stop()


# --- models and datasets (plan lock --models / --datasets) ----------------------------------------


def _model_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "models" / "tiny"
    directory.mkdir(parents=True)
    (directory / "tokenizer.json").write_bytes(b'{"version": "1.0"}\n')
    return directory


def _plain_manifest(tmp_path: Path) -> Path:
    from models_support import write_manifest

    return write_manifest(tmp_path, {"name": "tiny", "path": "models/tiny"})


def _lock_models(tmp_path: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    from models_support import tvm_wheel

    manifest = tmp_path / "manifest.yaml"
    wheels = str(tvm_wheel(tmp_path))
    out = str(tmp_path / "lock.json")
    return invoke(
        "plan", "lock", str(manifest), "-o", out, "--no-fetch", "--wheelhouse", wheels, *args, env=env
    )


@pytest.mark.parametrize("planted", ["link-out", "fifo", "sparse-20g"])
def test_plan_lock_models_hashes_only_regular_files_inside_the_directory(
    env: dict[str, str], tmp_path: Path, planted: str
) -> None:
    directory = _model_dir(tmp_path)
    _plain_manifest(tmp_path)
    secret = tmp_path / "outside-secret"
    secret.write_bytes(b"root:$6$secret\n")
    config = directory / "config.json"
    if planted == "link-out":
        config.symlink_to(secret)
    elif planted == "fifo":
        os.mkfifo(config)
    else:
        with open(config, "wb") as handle:
            handle.truncate(20 << 30)
    started = time.monotonic()
    proc = _lock_models(
        tmp_path, "--models", f"tiny={directory}", env={**env, "HF_HUB_CACHE": str(tmp_path / "no")}
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = _one_line(proc)
    assert "config.json" in line and time.monotonic() - started < 30
    assert not (tmp_path / "lock.json").exists()


def test_a_hub_snapshot_link_out_of_blobs_and_a_bad_refs_main_are_one_line(
    env: dict[str, str], tmp_path: Path
) -> None:
    from models_support import HUB_MODEL, REV, hub_cache, tvm_wheel, write_manifest

    cache = hub_cache(tmp_path / "hub")
    secret = tmp_path / "outside-secret"
    secret.write_bytes(b"root:$6$secret\n")
    config = cache / "models--org--tiny" / "snapshots" / REV / "config.json"
    config.unlink()
    config.symlink_to(secret)
    manifest = write_manifest(tmp_path, HUB_MODEL)
    args = ["--no-fetch", "--wheelhouse", str(tvm_wheel(tmp_path)), "--models", str(cache)]
    hub_env = {**env, "HF_HUB_CACHE": str(tmp_path / "no")}
    proc = invoke("plan", "lock", str(manifest), "-o", str(tmp_path / "lock.json"), *args, env=hub_env)
    assert proc.returncode == 2 and "outside" in _one_line(proc), proc.stderr
    # A refs/main naming a snapshot that is not a commit.
    config.unlink()
    config.symlink_to("../../blobs/" + os.listdir(cache / "models--org--tiny" / "blobs")[0])
    snapshots = cache / "models--org--tiny" / "snapshots"
    (snapshots / REV).rename(snapshots / "not-a-commit")
    (cache / "models--org--tiny" / "refs" / "main").write_text("not-a-commit")
    proc = invoke("plan", "lock", str(manifest), "-o", str(tmp_path / "lock.json"), *args, env=hub_env)
    assert proc.returncode == 2 and "not-a-commit" in _one_line(proc), proc.stderr
    # A refs/main that is a FIFO: refused before huggingface_hub opens it.
    (cache / "models--org--tiny" / "refs" / "main").unlink()
    os.mkfifo(cache / "models--org--tiny" / "refs" / "main")
    # A child process: a FIFO that a regression would block on is ended by the timeout.
    proc = run_cli(
        "plan", "lock", str(manifest), "-o", str(tmp_path / "lock.json"), *args, env=hub_env, timeout=30
    )
    assert proc.returncode == 2 and "FIFO" in _one_line(proc), proc.stderr
    assert not (tmp_path / "lock.json").exists()


def test_a_sparse_dataset_is_refused_on_its_size(env: dict[str, str], tmp_path: Path) -> None:
    _model_dir(tmp_path)
    _plain_manifest(tmp_path)
    with open(tmp_path / "data" / "gsm8k.jsonl", "r+b") as handle:
        handle.truncate(2 << 30)
    started = time.monotonic()
    proc = _lock_models(tmp_path, "--datasets", env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "over the limit" in _one_line(proc) and time.monotonic() - started < 30
    assert not (tmp_path / "lock.json").exists()


# --- the registry (publish, promote, reproduce read through releasekit/registry.py) --------------


def _registry(manifest: bytes | None) -> Hostile:
    """``manifest`` None: every manifest GET is endless; else that manifest, and every blob endless."""

    def answer(h: BaseHTTPRequestHandler) -> None:
        if "/manifests/" in h.path and manifest is not None:
            h.send_response(200)
            h.send_header("content-type", "application/vnd.oci.image.manifest.v1+json")
            h.send_header("content-length", str(len(manifest)))
            h.end_headers()
            h.wfile.write(manifest)
            return
        if h.path == "/v2/":
            h.send_response(200)
            h.send_header("content-length", "0")
            h.end_headers()
            return
        h.send_response(200)
        h.end_headers()
        chunk = b"\0" * (1 << 20)
        while True:
            h.wfile.write(chunk)

    server = Hostile(answer)

    class Head(server.httpd.RequestHandlerClass):  # type: ignore[misc,name-defined]
        def do_HEAD(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(404)
            self.send_header("content-length", "0")
            self.end_headers()

    server.httpd.RequestHandlerClass = Head
    return server


def _python(code: str, env: dict[str, str], tmp: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(REPO), "TMPDIR": str(tmp)},
        timeout=60,
    )


def test_an_endless_registry_manifest_is_refused_at_its_cap(env: dict[str, str], tmp_path: Path) -> None:
    server = _registry(None)
    try:
        host = f"127.0.0.1:{server.httpd.server_address[1]}"
        code = (
            "from releasekit.registry import RegistryClient\n"
            "from releasekit.errors import EnvironmentProblem\n"
            f"c = RegistryClient({host!r})\n"
            "try:\n    c.get_manifest('r', 'sha256:' + '0' * 64)\n"
            "except EnvironmentProblem as e:\n    print(e); raise SystemExit(2)\n"
        )
        proc = _python(code, env, tmp_path)
    finally:
        server.stop()
    assert proc.returncode == 2 and "over 4194304 bytes" in proc.stdout, proc.stdout + proc.stderr


def test_an_endless_blob_stops_at_its_declared_size_and_leaves_no_copy(
    env: dict[str, str], tmp_path: Path
) -> None:
    config = {
        "mediaType": "application/vnd.oci.image.config.v1+json",
        "digest": "sha256:" + "1" * 64,
        "size": 1000,
    }
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": config,
            "layers": [],
        }
    ).encode()
    import hashlib

    digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
    source, target = _registry(manifest), _registry(manifest)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    try:
        hosts = [f"127.0.0.1:{s.httpd.server_address[1]}" for s in (source, target)]
        code = (
            "from releasekit.registry import RegistryClient, copy_image\n"
            "from releasekit.errors import EnvironmentProblem\n"
            f"s, t = RegistryClient({hosts[0]!r}), RegistryClient({hosts[1]!r})\n"
            f"try:\n    copy_image(s, 'r', {digest!r}, t, 'r')\n"
            "except EnvironmentProblem as e:\n    print(e); raise SystemExit(2)\n"
        )
        proc = _python(code, env, tmp)
    finally:
        source.stop()
        target.stop()
    assert proc.returncode == 2 and "past its declared 1000 bytes" in proc.stdout, proc.stdout + proc.stderr
    assert list(tmp.iterdir()) == []  # the releasekit-copy-* directory and its partial blob are gone


# --- mirrors (RELEASEKIT_MIRRORS, --mirror) --------------------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_mirrors_file_that_is_a_fifo_or_dev_zero_is_one_line(
    app: Forge, env: dict[str, str], tmp_path: Path, kind: str
) -> None:
    mirrors = tmp_path / "mirrors.txt"
    if kind == "fifo":
        os.mkfifo(mirrors)
    else:
        mirrors.symlink_to("/dev/zero")
    manifest = _manifest(tmp_path / "m.json", app.url, "http://127.0.0.1:9/api/v3")
    out = tmp_path / "lock.json"
    # A child process: a FIFO or /dev/zero that a regression would block on is ended by the timeout.
    proc = run_cli(
        "plan", "lock", str(manifest), "-o", str(out), "--no-forge",
        env={**env, "RELEASEKIT_MIRRORS": str(mirrors)}, timeout=30,
    )  # fmt: skip
    assert proc.returncode == 2 and "mirrors.txt" in _one_line(proc), proc.stderr
    assert not out.exists()


@pytest.mark.parametrize("planted", ["objects/info/alternates", "packed-refs", "config"])
def test_a_mirror_whose_control_file_is_a_fifo_does_not_hang_plan_lock(
    app: Forge, env: dict[str, str], tmp_path: Path, planted: str
) -> None:
    snapshot = tmp_path / "snapshot.git"
    subprocess.run(
        ["git", "clone", "--quiet", "--mirror", "--no-local", app.url, str(snapshot)],
        check=True,
        env={**env, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"},
    )
    fifo = snapshot / planted
    if fifo.exists():
        fifo.unlink()
    os.mkfifo(fifo)
    manifest = _manifest(tmp_path / "m.json", app.url, "http://127.0.0.1:9/api/v3")
    out = tmp_path / "lock.json"
    # A child process: a FIFO that a regression would block on is ended by the timeout.
    proc = run_cli(
        "plan", "lock", str(manifest), "-o", str(out), "--no-forge", "--mirror", f"{app.url}={snapshot}",
        env=env, timeout=30,
    )  # fmt: skip
    assert proc.returncode == 2 and "FIFO" in _one_line(proc), proc.stderr
    assert not out.exists()


def test_an_oversize_packed_refs_in_a_mirror_is_refused_on_stat(
    app: Forge, env: dict[str, str], tmp_path: Path
) -> None:
    """Issue 43: a 255 MiB ``packed-refs`` took 2.58 GB and exited 0; here its refs, then 100 MiB of
    sparse file (no disk), refused on ``stat`` before releasekit or git reads it."""
    snapshot = tmp_path / "snapshot.git"
    subprocess.run(
        ["git", "clone", "--quiet", "--mirror", "--no-local", app.url, str(snapshot)],
        check=True,
        env={**env, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"},
    )
    subprocess.run(["git", "-C", str(snapshot), "pack-refs", "--all"], check=True, env=env)
    with open(snapshot / "packed-refs", "ab") as handle:
        handle.truncate(100 << 20)
    manifest = _manifest(tmp_path / "m.json", app.url, "http://127.0.0.1:9/api/v3")
    out = tmp_path / "lock.json"
    started = time.monotonic()
    proc = invoke(
        "plan", "lock", str(manifest), "-o", str(out), "--no-forge", "--mirror", f"{app.url}={snapshot}", env=env
    )  # fmt: skip
    line = _one_line(proc)
    assert proc.returncode == 2 and "packed-refs" in line and "over the limit" in line, proc.stderr
    assert time.monotonic() - started < 30
    assert not out.exists()


def _snapshot(app: Forge, env: dict[str, str], tmp_path: Path) -> Path:
    snapshot = tmp_path / "snapshot.git"
    subprocess.run(
        ["git", "clone", "--quiet", "--mirror", "--no-local", app.url, str(snapshot)],
        check=True,
        env={**env, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"},
    )
    return snapshot


def _loose(snapshot: Path, env: dict[str, str]) -> Path:
    """Every object of the mirror unpacked loose; the file of the commit HEAD names, returned."""
    pack_dir = snapshot / "objects" / "pack"
    (pack,) = pack_dir.glob("*.pack")
    moved = snapshot.parent / "moved.pack"
    pack.rename(moved)
    for other in pack_dir.iterdir():
        other.unlink()
    with open(moved, "rb") as handle:
        subprocess.run(
            ["git", "-C", str(snapshot), "unpack-objects", "-q"], stdin=handle, check=True, env=env
        )
    head = subprocess.run(
        ["git", "-C", str(snapshot), "rev-parse", "HEAD"], capture_output=True, text=True, check=True, env=env
    ).stdout.strip()
    return snapshot / "objects" / head[:2] / head[2:]


@pytest.mark.parametrize("planted", ["pack-idx", "loose-object"])
def test_a_fifo_in_a_mirrors_object_directory_does_not_hang_plan_lock(
    app: Forge, env: dict[str, str], tmp_path: Path, planted: str
) -> None:
    """Issue 43: a FIFO in place of a pack ``.idx`` or a loose object hung git, so plan lock."""
    snapshot = _snapshot(app, env, tmp_path)
    if planted == "pack-idx":
        (fifo,) = (snapshot / "objects" / "pack").glob("*.idx")
    else:
        fifo = _loose(snapshot, env)
    fifo.unlink()
    os.mkfifo(fifo)
    manifest = _manifest(tmp_path / "m.json", app.url, "http://127.0.0.1:9/api/v3")
    out = tmp_path / "lock.json"
    started = time.monotonic()
    # A child process: the hang is the subject, and a regression is ended by the timeout.
    proc = run_cli(
        "plan", "lock", str(manifest), "-o", str(out), "--no-forge", "--mirror", f"{app.url}={snapshot}",
        env=env, timeout=30,
    )  # fmt: skip
    line = _one_line(proc)
    assert proc.returncode == 2 and "FIFO" in line and fifo.name in line, proc.stderr
    assert time.monotonic() - started < 20
    assert not out.exists()


def test_every_git_process_has_a_deadline(app: Forge, env: dict[str, str], tmp_path: Path) -> None:
    """Past the pre-git checks (here: none), a git that blocks is killed at its deadline: one line."""
    snapshot = _snapshot(app, env, tmp_path)
    fifo = _loose(snapshot, env)
    fifo.unlink()
    os.mkfifo(fifo)
    code = (
        "from pathlib import Path\n"
        "from releasekit.git.runner import Git, GitFailed\n"
        f"try:\n    Git(Path({str(snapshot)!r}), bare=True).run('cat-file', '-t', 'HEAD')\n"
        "except GitFailed as e:\n    print(e); raise SystemExit(2)\n"
    )
    started = time.monotonic()
    proc = _python(code, {**env, "RELEASEKIT_GIT_TIMEOUT": "2"}, tmp_path)
    assert proc.returncode == 2 and "no answer within 2 s" in proc.stdout, proc.stdout + proc.stderr
    assert time.monotonic() - started < 30
    # And all of a command's git processes together: each under its own 600 s, the first is killed
    # when the command's total is spent, and the next is not started.
    code = (
        "from pathlib import Path\n"
        "from releasekit.git.runner import Git, GitFailed\n"
        f"git = Git(Path({str(snapshot)!r}), bare=True)\n"
        "for args in (('cat-file', '-t', 'HEAD'), ('rev-parse', '--git-dir')):\n"
        "    try:\n        git.run(*args)\n"
        "    except GitFailed as e:\n        print(e)\n"
    )
    started = time.monotonic()
    proc = _python(code, {**env, "RELEASEKIT_GIT_TOTAL_TIMEOUT": "2"}, tmp_path)
    killed, refused = proc.stdout.splitlines()
    assert "no answer within 2 s (killed; RELEASEKIT_GIT_TOTAL_TIMEOUT sets the limit)" in killed, proc.stdout
    assert "rev-parse" in refused and "spent; not started" in refused, proc.stdout
    assert time.monotonic() - started < 30


# --- audit pins ----------------------------------------------------------------------------------


def test_an_oversize_pin_input_is_a_finding_and_never_read(env: dict[str, str], tmp_path: Path) -> None:
    from pins_support import MANIFEST, commit_files, git

    repo = tmp_path / "repo"
    commit_files(repo, {"requirements.txt": "apache-tvm-ffi==0.1.12\n"})
    # 17 MiB of comments, then a disagreeing pin: read whole, the pin would be found and judged.
    with open(repo / "requirements.txt", "a") as handle:
        handle.write(("#" * 1023 + "\n") * (17 << 10))
        handle.write("apache-tvm-ffi==0.0.1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "big")
    manifest = tmp_path / "m.yaml"
    manifest.write_text(json.dumps(MANIFEST))
    proc = invoke("audit", "pins", str(manifest), "--repo", str(repo), "--json", env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    found = json.loads(proc.stdout)["findings"]["findings"]
    unreadable = [f for f in found if f["code"] == "PIN_INPUT_UNREADABLE"]
    assert unreadable and "over the limit of 16777216 bytes" in unreadable[0]["message"], found
    assert not [f for f in found if f["code"] == "PIN_MISMATCH"]


@pytest.mark.parametrize("kind", ["sparse", "fifo"])
def test_validate_reads_a_gsm8k_dataset_bounded(env: dict[str, str], tmp_path: Path, kind: str) -> None:
    data = tmp_path / "gsm8k.jsonl"
    if kind == "fifo":
        os.mkfifo(data)
    else:
        with open(data, "wb") as handle:
            handle.truncate(300 << 20)
    code = (
        "from pathlib import Path\n"
        "from releasekit.errors import InputError\n"
        "from releasekit.validate.checks.gsm8k import read_problems\n"
        f"try:\n    read_problems(Path({str(data)!r}))\n"
        "except InputError as e:\n    print(e); raise SystemExit(2)\n"
    )
    proc = _python(code, env, tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert ("over the limit" if kind == "sparse" else "FIFO") in proc.stdout


def test_a_fifo_planted_in_the_cached_mirror_does_not_hang_plan_lock(
    app: Forge, env: dict[str, str], tmp_path: Path
) -> None:
    manifest = _manifest(tmp_path / "m.json", app.url, "http://127.0.0.1:9/api/v3")
    first = invoke("plan", "lock", str(manifest), "-o", str(tmp_path / "l1.json"), "--no-forge", env=env)
    assert first.returncode == 0, first.stderr
    heads = sorted((tmp_path / "cache").rglob("objects/info"))
    assert heads, "the lock left no cached mirror"
    os.mkfifo(heads[0] / "alternates")
    out = tmp_path / "l2.json"
    # A child process: a FIFO that a regression would block on is ended by the timeout.
    proc = run_cli("plan", "lock", str(manifest), "-o", str(out), "--no-forge", env=env, timeout=30)
    assert proc.returncode == 2 and "FIFO" in _one_line(proc), proc.stderr
    assert not out.exists()


def test_the_forge_cache_key_must_be_private(tmp_path: Path) -> None:
    from releasekit.errors import InputError
    from releasekit.forge.etag_cache import KEY_FILE, cache_key

    state = tmp_path / "state"
    key = cache_key(state)
    assert len(key) == 32 and cache_key(state) == key  # made once, then read back
    (state / KEY_FILE).chmod(0o644)
    with pytest.raises(InputError, match="mode 0600"):
        cache_key(state)
    (state / KEY_FILE).chmod(0o600)
    state.chmod(0o755)
    with pytest.raises(InputError, match="mode 0700"):
        cache_key(state)


def _drip_manifest(h: BaseHTTPRequestHandler) -> None:
    if h.path == "/v2/":
        h.send_response(200)
        h.send_header("content-length", "0")
        h.end_headers()
        return
    h.send_response(200)
    h.send_header("content-type", "application/vnd.oci.image.manifest.v1+json")
    h.end_headers()
    while True:  # a byte at a time, each well inside the socket timeout
        h.wfile.write(b" ")
        h.wfile.flush()
        time.sleep(0.2)


def test_a_registry_answer_dripped_a_byte_at_a_time_meets_a_total_deadline(
    env: dict[str, str], tmp_path: Path
) -> None:
    """Each read returns within the socket timeout, so only a deadline over the whole exchange ends it
    (the default is 120 s plus 4 s a MiB; the test shortens it to 2 s)."""
    server = Hostile(_drip_manifest)
    try:
        host = f"127.0.0.1:{server.httpd.server_address[1]}"
        code = (
            "import releasekit.registry as r\n"
            "from releasekit.errors import EnvironmentProblem\n"
            "r.ANSWER_SECONDS = 2.0\n"
            "r.BLOB_MIN_BYTES_PER_SECOND = 1 << 40\n"
            f"c = r.RegistryClient({host!r})\n"
            "try:\n    c.get_manifest('r', 'sha256:' + '0' * 64)\n"
            "except EnvironmentProblem as e:\n    print(e); raise SystemExit(2)\n"
        )
        started = time.monotonic()
        proc = _python(code, env, tmp_path)
        elapsed = time.monotonic() - started
    finally:
        server.stop()
    assert proc.returncode == 2 and "still sending after 2 s" in proc.stdout, proc.stdout + proc.stderr
    assert elapsed < 30


@pytest.mark.parametrize("kind", ["endless", "deep"])
def test_a_hostile_token_service_is_one_line(env: dict[str, str], tmp_path: Path, kind: str) -> None:
    """The Bearer flow's token answer is read bounded (64 KiB) and parsed strictly (depth, numbers)."""

    def answer(h: BaseHTTPRequestHandler) -> None:
        if h.path.startswith("/token"):
            (_endless if kind == "endless" else _deep)(h)
            return
        port = h.server.server_address[1]
        h.send_response(401)
        h.send_header("www-authenticate", f'Bearer realm="http://127.0.0.1:{port}/token",service="r"')
        h.send_header("content-length", "0")
        h.end_headers()

    server = Hostile(answer)
    try:
        host = f"127.0.0.1:{server.httpd.server_address[1]}"
        code = (
            "from releasekit.registry import RegistryClient, RegistryCredentials\n"
            "from releasekit.errors import EnvironmentProblem\n"
            f"c = RegistryClient({host!r}, RegistryCredentials('u', 'p'))\n"
            "try:\n    c.get_manifest('r', 'sha256:' + '0' * 64)\n"
            "except EnvironmentProblem as e:\n    print(e); raise SystemExit(2)\n"
        )
        proc = _python(code, env, tmp_path)
    finally:
        server.stop()
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "token service 127.0.0.1" in proc.stdout and proc.stdout.count("\n") == 1, (
        proc.stdout + proc.stderr
    )


# --- reproduce: a published layer is uncompressed bounded and checked against its diff_id ----------


def test_a_published_layer_that_is_a_gzip_bomb_or_not_its_diff_id_is_refused(tmp_path: Path) -> None:
    import gzip
    import hashlib
    import zlib

    from releasekit.errors import InputError
    from releasekit.reproduce.evidence import uncompressed_layer

    tar = b"layer tar bytes" * 1000
    good = tmp_path / "good.gz"
    good.write_bytes(gzip.compress(tar))
    uncompressed_layer(good, tmp_path / "good.tar", "sha256:" + hashlib.sha256(tar).hexdigest(), "layer 0")
    assert (tmp_path / "good.tar").read_bytes() == tar

    with pytest.raises(InputError, match="does not hash to the config's diff_id"):
        uncompressed_layer(good, tmp_path / "other.tar", "sha256:" + "0" * 64, "layer 0")
    assert not (tmp_path / "other.tar").exists()

    # 256 MiB of zeros in a quarter of a MiB of gzip: stopped at 64 MiB, nothing left behind, in seconds.
    bomb = tmp_path / "bomb.gz"
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 31)
    with bomb.open("wb") as fh:
        zeros = bytes(1 << 20)
        for _ in range(256):
            fh.write(squeeze.compress(zeros))
        fh.write(squeeze.flush())
    started = time.monotonic()
    with pytest.raises(InputError, match="uncompresses past"):
        uncompressed_layer(bomb, tmp_path / "bomb.tar", "sha256:" + "0" * 64, "layer 1")
    assert time.monotonic() - started < 20
    assert not (tmp_path / "bomb.tar").exists()
