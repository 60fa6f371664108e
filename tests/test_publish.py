"""publish and promote against a real Docker Engine and a real registry on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
from cli_run import invoke
from publish_support import EXTRA_CELL, MANIFEST, Release, build_image, publish_args

from releasekit.demo.localregistry import Credentials, start_local_registry
from releasekit.errors import EnvironmentProblem
from releasekit.registry import RegistryClient, RegistryCredentials

pytestmark = pytest.mark.docker


def tags_of(reg, repository: str, credentials: RegistryCredentials | None = None) -> list[str]:
    with RegistryClient(reg.host, credentials) as client:
        return client.tags(repository)


def manifest_digest(
    reg, repository: str, ref: str, credentials: RegistryCredentials | None = None
) -> str | None:
    with RegistryClient(reg.host, credentials) as client:
        blob = client.get_manifest(repository, ref)
        return blob.digest if blob else None


def test_publish_with_all_gates_green_pushes_tags_and_attaches(tmp_path, registry, image, other_image):
    release = Release(tmp_path, image)
    repo = "team/vllm-green"
    r = invoke(*publish_args(release, image, f"{registry.host}/{repo}", "ff-next", "beta"))
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(r.stdout)
    assert result["published"] is True
    digest = result["digest"]
    assert digest.startswith("sha256:")

    tags = tags_of(registry, repo)
    assert {"ff-next", "beta"} <= set(tags)
    assert manifest_digest(registry, repo, "beta") == digest
    assert manifest_digest(registry, repo, "ff-next") == digest
    with RegistryClient(registry.host) as client:
        pushed = json.loads(client.get_manifest(repo, digest).data)
        # The registry's image is this image: its config blob is the image ID.
        assert pushed["config"]["digest"] == image
        attached = json.loads(client.get_manifest(repo, result["attachment"]["tag"]).data)
        assert attached["subject"]["digest"] == digest
        files = {
            layer["annotations"]["org.opencontainers.image.title"]: client.get_blob(repo, layer["digest"])
            for layer in attached["layers"]
        }
    # Attached byte for byte: the digests verify-provenance recorded still match.
    for name in ("provenance.intoto.json", "verification_summary.json", "plan-check.json"):
        assert files[name] == (release.evidence / name).read_bytes()
    assert files["receipts/tiny-tp1.json"] == (release.receipts / "tiny-tp1.json").read_bytes()
    assert {"receipts/tiny-tp1.json", "receipts/tiny-tp1-ngram.json", "gate.json", "RELEASE.md"} <= set(files)

    notes = Path(result["release_notes"]).read_text()
    assert notes.startswith("# pubtest")
    assert f"`{registry.host}/{repo}@{digest}`" in notes
    assert "| tiny-tp1 | pass | decode.output_tok_s 120 (baseline 100, 120.0%) |" in notes
    assert "| tiny-optional | not run (optional) |" in notes
    assert files["RELEASE.md"].decode() == notes

    # A rerun of a completed publish is harmless and lands on the same digest; byte-stable (issue
    # 22): it writes the same publish.json and RELEASE.md.
    written = Path(result["release_notes"]).parent
    first = {name: (written / name).read_bytes() for name in ("publish.json", "RELEASE.md")}
    again = invoke(*publish_args(release, image, f"{registry.host}/{repo}", "ff-next", "beta"))
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["digest"] == digest
    assert json.loads(again.stdout)["moved_tags"] == {}
    assert again.stdout == r.stdout
    assert first == {name: (written / name).read_bytes() for name in ("publish.json", "RELEASE.md")}

    # The next release moves `beta` and says from where.
    nxt = Release(tmp_path / "next", other_image)
    moved = invoke(*publish_args(nxt, other_image, f"{registry.host}/{repo}", "beta"))
    assert moved.returncode == 0, moved.stdout + moved.stderr
    assert json.loads(moved.stdout)["moved_tags"] == {"beta": digest}
    assert manifest_digest(registry, repo, "ff-next") == digest


GATE_CASES = {
    "plan check missing": (lambda rel: (rel.evidence / "plan-check.json").unlink(), "PLAN_CHECK_MISSING"),
    "plan check failed": (
        lambda rel: rel.write_plan_check(errors=["SUPERSEDED_PR_MERGED"]),
        "PLAN_CHECK_FAILED",
    ),
    "plan check of another lock": (
        lambda rel: rel.write_plan_check(lock_sha256="0" * 64),
        "PLAN_CHECK_WRONG_LOCK",
    ),
    "verification missing": (
        lambda rel: (rel.evidence / "verification_summary.json").unlink(),
        "VERIFICATION_MISSING",
    ),
    "verification failed": (lambda rel: rel.write_verification(result="FAILED"), "PROVENANCE_NOT_VERIFIED"),
    "verification of another image": (
        lambda rel: rel.write_verification(image_id="sha256:" + "1" * 64),
        "VERIFICATION_WRONG_IMAGE",
    ),
    "provenance missing": (
        lambda rel: (rel.evidence / "provenance.intoto.json").unlink(),
        "PROVENANCE_MISSING",
    ),
    "receipt missing": (lambda rel: (rel.receipts / "tiny-tp1-ngram.json").unlink(), "RECEIPT_MISSING"),
    "receipt failed": (lambda rel: rel.write_receipt("tiny-tp1", passed=False), "RECEIPT_FAILED"),
    "receipt of another lock": (
        lambda rel: rel.write_receipt("tiny-tp1", lock_sha256="2" * 64),
        "RECEIPT_WRONG_LOCK",
    ),
    "forbidden env": (
        lambda rel: rel.write_receipt("tiny-tp1", env={"VLLM_DISABLE_SHARED_EXPERTS_STREAM": "1"}),
        "FORBIDDEN_SWITCH",
    ),
    "forbidden flag": (
        lambda rel: rel.write_receipt("tiny-tp1", args=["--disable-aux-streams"]),
        "FORBIDDEN_SWITCH",
    ),
    "hidden env": (lambda rel: rel.write_receipt("tiny-tp1", env={"VLLM_MLA_DISABLE": "1"}), "HIDDEN_SWITCH"),
    "hidden flag": (
        lambda rel: rel.write_receipt("tiny-tp1-ngram", args=["--no-enable-prefix-caching"]),
        "HIDDEN_SWITCH",
    ),
    "receipt of an older cell definition": (
        lambda rel: rel.write_receipt("tiny-tp1", cell_sha256="3" * 64),
        "RECEIPT_STALE_CELL",
    ),
    "receipt unreadable": (
        lambda rel: (rel.receipts / "tiny-tp1.json").write_text('{"schema": "releasekit.receipt/v1"}'),
        "RECEIPT_INVALID",
    ),
    "image default overridden": (
        lambda rel: rel.write_receipt("tiny-tp1", env={"VLLM_USE_V1": "0"}),
        "HIDDEN_SWITCH",
    ),
}


@pytest.mark.parametrize("case", sorted(GATE_CASES))
def test_each_failed_gate_is_refused_and_nothing_reaches_the_registry(tmp_path, registry, image, case):
    break_it, code = GATE_CASES[case]
    release = Release(tmp_path, image)
    break_it(release)
    repo = "team/refused-" + "".join(ch for ch in case if ch.isalnum())
    r = invoke(*publish_args(release, image, f"{registry.host}/{repo}", "beta"))
    assert r.returncode == 1, r.stdout + r.stderr
    result = json.loads(r.stdout)
    assert result["published"] is False
    codes = [f["code"] for f in result["gate"]["findings"]["findings"] if f["severity"] == "error"]
    assert code in codes
    assert tags_of(registry, repo) == []
    assert not (release.evidence / "published").exists()


@pytest.mark.parametrize("target", ["RELEASE.md", "publish.json", "the directory"])
def test_a_link_planted_at_an_output_is_refused_before_anything_is_pushed(tmp_path, registry, image, target):
    """Issue 34 item 8: the local outputs are checked first; the registry never sees a byte."""
    release = Release(tmp_path, image)
    out = tmp_path / "planted-out"
    victim = tmp_path / "victim"
    victim.write_text("not releasekit's\n")
    if target == "the directory":
        out.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    else:
        out.mkdir()
        (out / target).symlink_to(victim)
    repo = "team/planted-" + "".join(ch for ch in target if ch.isalnum()).lower()
    r = invoke(*publish_args(release, image, f"{registry.host}/{repo}", "beta"), "-o", str(out))
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "refusing to write" in r.stderr, r.stderr
    assert tags_of(registry, repo) == []
    assert victim.read_text() == "not releasekit's\n"
    assert not (tmp_path / "elsewhere").exists()


def test_a_receipt_for_another_image_is_refused(tmp_path, registry, image, other_image):
    release = Release(tmp_path, image)
    # Every receipt is for the other image: the cells are unvalidated for this one.
    for cell in ("tiny-tp1", "tiny-tp1-ngram"):
        release.write_receipt(cell, image_id=other_image)
    repo = "team/other-image"
    r = invoke(*publish_args(release, image, f"{registry.host}/{repo}", "beta"))
    assert r.returncode == 1
    codes = [f["code"] for f in json.loads(r.stdout)["gate"]["findings"]["findings"]]
    assert codes.count("RECEIPT_WRONG_IMAGE") == 2
    assert codes.count("RECEIPT_MISSING") == 2
    assert tags_of(registry, repo) == []


def test_terminal_output_names_the_refusal(tmp_path, registry, image):
    release = Release(tmp_path, image)
    release.write_receipt("tiny-tp1", passed=False)
    args = [
        a for a in publish_args(release, image, f"{registry.host}/team/terminal", "beta") if a != "--json"
    ]
    r = invoke(*args)
    assert r.returncode == 1
    assert "RECEIPT_FAILED" in r.stdout
    assert "nothing was pushed" in r.stdout


def test_unreachable_registry_is_one_clear_line(tmp_path, image):
    release = Release(tmp_path, image)
    r = invoke(*publish_args(release, image, "127.0.0.1:9/team/nowhere", "beta"))
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [r.stderr.strip()]
    assert "unreachable" in r.stderr
    assert "Traceback" not in r.stderr


def test_unknown_image_is_exit_2(tmp_path, registry, image):
    release = Release(tmp_path, image)
    r = invoke(*publish_args(release, "sha256:" + "9" * 64, f"{registry.host}/team/x", "beta"))
    assert r.returncode == 2
    assert "not found" in r.stderr


def test_auth_refused_then_accepted_and_no_secret_leaks(tmp_path, image):
    secret = "s3cret-Pa55-" + os.urandom(4).hex()
    creds = Credentials("releaser", secret)
    good = RegistryCredentials("releaser", secret)
    release = Release(tmp_path / "rel", image)
    with start_local_registry(tmp_path / "reg", htpasswd=creds) as reg:
        repo = "team/authed"
        target = f"{reg.host}/{repo}"
        wrong = {
            "RELEASEKIT_REGISTRY_USERNAME": "releaser",
            "RELEASEKIT_REGISTRY_PASSWORD": "wrong",
            "RELEASEKIT_REGISTRY_HOST": reg.host,
        }
        refused = invoke(*publish_args(release, image, target, "beta"), env=wrong)
        assert refused.returncode == 2
        assert "refused the credentials" in refused.stderr
        assert tags_of(reg, repo, good) == []

        # No credentials at all: the registry asks, and we have nothing to answer with.
        anonymous = invoke(
            *publish_args(release, image, target, "beta"), env={"DOCKER_CONFIG": str(tmp_path / "empty")}
        )
        assert anonymous.returncode == 2
        assert tags_of(reg, repo, good) == []

        right = {
            "RELEASEKIT_REGISTRY_USERNAME": "releaser",
            "RELEASEKIT_REGISTRY_PASSWORD": secret,
            "RELEASEKIT_REGISTRY_HOST": reg.host,
        }
        ok = invoke(*publish_args(release, image, target, "beta"), env=right)
        assert ok.returncode == 0, ok.stdout + ok.stderr
        digest = json.loads(ok.stdout)["digest"]
        assert manifest_digest(reg, repo, "beta", good) == digest

        # The secret is nowhere: not in output, not in what was written, not in what was attached.
        for text in (refused.stdout, refused.stderr, ok.stdout, ok.stderr):
            assert secret not in text
        for path in (release.evidence / "published").rglob("*"):
            assert secret.encode() not in path.read_bytes()
        with RegistryClient(reg.host, good) as client:
            attached = json.loads(client.get_manifest(repo, json.loads(ok.stdout)["attachment"]["tag"]).data)
            for layer in attached["layers"]:
                assert secret.encode() not in client.get_blob(repo, layer["digest"])
        assert secret not in (reg.root / "registry.log").read_text(errors="replace")

        promoted = invoke(
            "promote", "--from", f"{target}:beta", "--to", f"{target}:stable", "--json", env=right
        )
        assert promoted.returncode == 0, promoted.stdout + promoted.stderr
        assert manifest_digest(reg, repo, "stable", good) == digest


def test_promote_keeps_the_digest_and_checks_receipts(tmp_path, registry, image, other_image, docker_client):
    release = Release(tmp_path, image)
    repo = "team/promote"
    target = f"{registry.host}/{repo}"
    r = invoke(*publish_args(release, image, target, "beta"))
    assert r.returncode == 0, r.stderr
    digest = json.loads(r.stdout)["digest"]

    # Another manifest (here: a stricter matrix, a cell with no receipt) is not the one the lock was
    # made from: LOCK_MANIFEST_MISMATCH before anything is judged (issue 43: its trusted keys would be
    # trust anchors anyone can write).
    stricter = tmp_path / "stricter.yaml"
    stricter.write_text(MANIFEST + EXTRA_CELL, encoding="utf-8")
    refused = invoke(
        "promote",
        "--from",
        f"{target}:beta",
        "--to",
        f"{target}:stable",
        "--manifest",
        str(stricter),
        "--json",
    )
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "LOCK_MANIFEST_MISMATCH" in refused.stderr
    assert "stable" not in tags_of(registry, repo)

    ok = invoke("promote", "--from", f"{target}:beta", "--to", f"{target}:stable", "--json")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert json.loads(ok.stdout)["digest"] == digest
    assert manifest_digest(registry, repo, "stable") == digest == manifest_digest(registry, repo, "beta")

    # An image pushed around releasekit has no evidence attached: never promoted.
    docker_client.api.tag(other_image, f"{target}", "sideload")
    try:
        for _ in docker_client.api.push(f"{target}", tag="sideload", stream=True, decode=True):
            pass
    finally:
        docker_client.api.remove_image(f"{target}:sideload", noprune=True)
    bare = invoke("promote", "--from", f"{target}:sideload", "--to", f"{target}:stable2", "--json")
    assert bare.returncode == 1
    assert [f["code"] for f in json.loads(bare.stdout)["findings"]["findings"]] == ["ATTACHMENTS_MISSING"]
    assert "stable2" not in tags_of(registry, repo)


@pytest.fixture(scope="module")
def big_image(docker_client):
    """Big enough (96 MB of noise) that a push is still uploading when we interrupt it."""
    image_id = build_image(
        docker_client, "releasekit-test/publish-big:1", {"blob.bin": os.urandom(96 * 1024 * 1024)}
    )
    yield image_id
    docker_client.images.remove(image_id, force=True, noprune=False)


def _publish(**options):
    """The library's publish, given the engine and target its command makes."""
    from releasekit.publish.commands import docker_engine, publish_target
    from releasekit.publish.service import publish

    engine = docker_engine()
    return publish(**options, engine=engine, publish_target=publish_target(engine))


def _publish_in_thread(
    release: Release, image: str, target: str, outcome: dict[str, object]
) -> threading.Thread:
    def run() -> None:
        try:
            outcome["result"] = _publish(
                image=image, lock_path=release.lock, receipts_dir=release.receipts, to=target, tags=["beta"]
            )
        except EnvironmentProblem as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=run)
    worker.start()
    return worker


def _wait_for_upload(reg, repo: str) -> None:
    uploads = reg.storage / "docker/registry/v2/repositories" / repo / "_uploads"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not _has_upload_data(uploads):
        time.sleep(0.01)
    assert _has_upload_data(uploads), "the push never started uploading"


@pytest.mark.slow
def test_killing_the_registry_mid_push_leaves_no_tag_and_a_rerun_completes(tmp_path, big_image):
    big = big_image
    release = Release(tmp_path / "rel", big)
    with start_local_registry(tmp_path / "reg") as reg:
        repo = "team/big"
        # The relay holds the layer's upload part-way, so the kill lands mid-upload every time.
        # Killed while committing a blob instead, distribution's filesystem driver can leave an
        # empty link file that answers 500 until its storage is repaired: the registry's own
        # fault, not what this test is about (CI once met it when the kill came late).
        link = RegistryLink(reg.port, hold_after=8 * 1024 * 1024)
        outcome: dict[str, object] = {}
        worker = _publish_in_thread(release, big, f"{link.host}/{repo}", outcome)
        assert link.holding.wait(60), "the push never sent the layer"
        _wait_for_upload(reg, repo)
        reg.kill()
        worker.join(timeout=300)
        assert not worker.is_alive()
        assert "error" in outcome, f"publish did not fail: {outcome}"
        assert f"push to {link.host}" in str(outcome["error"])

        # The engine may still be retrying the abandoned push in the background; with the old
        # relay closed, those retries meet a refused connection and cannot race the rerun (CI
        # once saw such a late retry leave the rerun's manifest naming a blob never committed).
        link.close()
        reg.start()  # same storage: the dead registry's partial upload is still there
        assert _has_upload_data(reg.storage / "docker/registry/v2/repositories" / repo / "_uploads")
        assert tags_of(reg, repo) == []
        with pytest.raises(httpx.HTTPError), httpx.Client() as probe:
            probe.get(f"{reg.url}/v2/{repo}/manifests/beta").raise_for_status()

        rerun_link = RegistryLink(reg.port, hold_after=None)
        result = _publish(
            image=big,
            lock_path=release.lock,
            receipts_dir=release.receipts,
            to=f"{rerun_link.host}/{repo}",
            tags=["beta"],
        )
        assert result.published
        assert manifest_digest(reg, repo, "beta") == result.digest
        rerun_link.close()


class RegistryLink:
    """A TCP relay on 127.0.0.1 in front of a registry that can hold an upload part-way.

    With ``hold_after`` set, a connection that has sent that many bytes toward the registry is
    no longer read: the rest of the request body waits in the sender's buffers and the registry
    keeps an upload it can neither finish nor commit. When the registry goes, the relay closes
    the client's side, as a dead registry would. ``hold_after = None`` relays everything.
    """

    def __init__(self, registry_port: int, hold_after: int | None) -> None:
        self.registry_port = registry_port
        self.hold_after = hold_after
        self.holding = threading.Event()
        self.held: list[socket.socket] = []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.host = f"127.0.0.1:{self.server.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.registry_port))
            except OSError:
                client.close()  # registry down: refuse, as it would
                continue
            threading.Thread(target=self._send, args=(client, upstream), daemon=True).start()
            threading.Thread(target=EngineLink._pump, args=(upstream, client), daemon=True).start()

    def _send(self, client: socket.socket, upstream: socket.socket) -> None:
        sent = 0
        try:
            while chunk := client.recv(65536):
                if self.hold_after is not None and sent + len(chunk) > self.hold_after:
                    self.held += [client, upstream]
                    self.holding.set()
                    return  # hold: neither forward nor close; the registry waits for the rest
                upstream.sendall(chunk)
                sent += len(chunk)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            upstream.shutdown(socket.SHUT_WR)

    def release(self) -> None:
        """Relay everything from now on, and break the held connections (their sender sees a reset)."""
        self.hold_after = None
        for sock in self.held:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self.release()
        self.server.close()


class EngineLink:
    """A real connection to the real Docker Engine, through a socket we can cut.

    Cutting it is what the publisher sees when the engine dies mid-push: the stream
    breaks. (Killing the shared dockerd itself is not an option on a shared machine.)
    """

    def __init__(self, path: Path, engine_socket: str = "/var/run/docker.sock") -> None:
        self.path = path
        self.engine_socket = engine_socket
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(16)
        self.links: list[socket.socket] = []
        self.cut_now = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.cut_now:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(self.engine_socket)
            self.links += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self.cut_now = True
        self.server.close()
        for link in self.links:
            with contextlib.suppress(OSError):
                link.shutdown(socket.SHUT_RDWR)
            link.close()


@pytest.mark.slow
def test_losing_the_engine_mid_push_leaves_no_tag_and_a_rerun_completes(
    tmp_path, big_image, docker_client, monkeypatch
):
    release = Release(tmp_path / "rel", big_image)
    link = EngineLink(tmp_path / "engine.sock")
    with start_local_registry(tmp_path / "reg") as reg:
        repo = "team/engine-lost"
        # The layer's upload is held part-way, so the engine is lost mid-push every time.
        registry = RegistryLink(reg.port, hold_after=8 * 1024 * 1024)
        outcome: dict[str, object] = {}
        monkeypatch.setenv("DOCKER_HOST", f"unix://{link.path}")
        worker = _publish_in_thread(release, big_image, f"{registry.host}/{repo}", outcome)
        assert registry.holding.wait(60), "the push never sent the layer"
        _wait_for_upload(reg, repo)
        link.cut()
        worker.join(timeout=300)
        assert not worker.is_alive()
        assert "error" in outcome, f"publish did not fail: {outcome}"
        assert "Docker Engine" in str(outcome["error"])
        assert "beta" not in tags_of(reg, repo)

        registry.release()  # the engine's own upload, if it goes on, now fails or completes
        monkeypatch.delenv("DOCKER_HOST")
        result = _publish(
            image=big_image,
            lock_path=release.lock,
            receipts_dir=release.receipts,
            to=f"{registry.host}/{repo}",
            tags=["beta"],
        )
        assert result.published
        assert manifest_digest(reg, repo, "beta") == result.digest
        registry.close()
    # The cut connection could not untag the local staging tag; the rerun did.
    assert not [t for t in docker_client.images.get(big_image).tags if "releasekit-staging-" in t]


def _has_upload_data(uploads: Path) -> bool:
    if not uploads.is_dir():
        return False
    return any(p.is_file() and p.stat().st_size > 1024 * 1024 for p in uploads.rglob("data"))


def test_the_demo_helper_publishes_and_promotes_on_its_own_registry(tmp_path, image):
    from releasekit.demo.publish_stage import publish_locally

    release = Release(tmp_path / "rel", image)
    outcome = publish_locally(
        root=tmp_path / "reg", image=image, lock_path=release.lock, receipts_dir=release.receipts
    )
    assert outcome.passed
    assert outcome.promote is not None and outcome.promote.digest == outcome.publish.digest
    # The registry is gone afterwards, its storage is not.
    assert (
        tmp_path / "reg" / "storage" / "docker" / "registry" / "v2" / "repositories" / "demo" / "release"
    ).is_dir()

    release.write_receipt("tiny-tp1", passed=False)
    refused = publish_locally(
        root=tmp_path / "reg2", image=image, lock_path=release.lock, receipts_dir=release.receipts
    )
    assert not refused.passed and refused.promote is None
    assert "RECEIPT_FAILED" in refused.publish.gate.findings.codes()
