"""Two hosts, really: engine A stages the verified candidate, engine B pulls it by digest and runs it.

Engine B is a second Docker Engine on this machine with its own data root (``second_engine.py``):
nothing it runs can come from A's image store. A pushes the candidate to a staging repository
of a real registry on 127.0.0.1 (``releasekit stage``); B runs a validation cell (a stub
OpenAI-compatible engine answering the GSM8K check in the image) and a test suite, each
pulled by digest with ``--staged staging.json``; ``publish --staged`` promotes that digest into
the release repository and accepts only receipts for it. A candidate swapped between stage and
validate is refused on B before anything runs.

What A's build and verification wrote is made with those stages' own record models, as in the
publish tests (the build and verify stages have their own tests); the lock is a real
``plan lock`` of a real repository.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from cli_run import invoke
from forge import Forge
from plan_world import plan_lock
from publish_support import context_tar
from ruamel.yaml import YAML
from second_engine import SecondEngine, second_engine
from stable import assert_same_record

from releasekit.demo.localregistry import start_local_registry
from releasekit.manifest import load_manifest
from releasekit.records.lock import lock_file_sha256, write_lock
from releasekit.registry import RegistryClient

pytestmark = pytest.mark.docker

STUB = """
import http.server, json
ANSWER = " 1 + 1 = 2.\\n#### 2"
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def _send(self, body, ctype="application/json"):
        self.send_response(200); self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def do_GET(self):
        if self.path == "/v1/models": self._send(json.dumps({"data": [{"id": "stub"}]}).encode())
        else: self._send(b"ok", "text/plain")
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        events = [{"choices": [{"index": 0, "text": ANSWER, "finish_reason": "stop"}]},
                  {"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 8, "total_tokens": 18}}]
        body = b"".join(b"data: " + json.dumps(e).encode() + b"\\n\\n" for e in events) + b"data: [DONE]\\n\\n"
        self._send(body, "text/event-stream")
print("stub engine up", flush=True)
http.server.ThreadingHTTPServer(("0.0.0.0", 8000), H).serve_forever()
"""

JUNIT = (
    "import pathlib; pathlib.Path('/tmp/junit.xml').write_text("
    '\'<testsuite name="smoke" tests="1"><testcase classname="smoke" name="image_runs_python"/></testsuite>\')'
)


def _image(client, base: str, tag: str, payload: bytes) -> str:
    files = {"Dockerfile": f"FROM {base}\nCOPY payload.txt /payload.txt\n".encode(), "payload.txt": payload}
    image, _ = client.images.build(fileobj=context_tar(files), custom_context=True, tag=tag, rm=True)
    return image.id


class Staged:
    """A release directory on host A: manifest, real lock, the build's and verifier's records, a candidate image."""

    def __init__(self, root: Path, repo: Forge, image_id: str) -> None:
        self.root = root
        self.image_id = image_id
        self.evidence = root / "release"
        self.receipts = self.evidence / "receipts"
        self.evidence.mkdir(parents=True)
        (root / "q.jsonl").write_text('{"question": "1 + 1?", "answer": "#### 2"}\n')
        pin = {"sha256": hashlib.sha256((root / "q.jsonl").read_bytes()).hexdigest(), "samples": 1}
        data = {
            "schema": "releasekit/v1",
            "name": "twohosts",
            "components": {
                "app": {
                    "kind": "git",
                    "repo": repo.url,
                    "canonical_branch": "main",
                    "tests": [
                        {
                            "name": "smoke",
                            "command": {"argv": ["python3", "-c", JUNIT], "junit": "/tmp/junit.xml"},
                        }
                    ],
                }
            },
            "toolchain": {
                "base_image": {"name": "releasekit-test/none", "digest": "to-be-locked"},
                "cuda_arch_list": ["12.0a"],
            },
            "validation": {
                "datasets": {"q": {"path": "q.jsonl", **pin}},
                "cells": [
                    {
                        "id": "stub",
                        "model": {"name": "stub"},
                        "gpus": 0,
                        "engine_command": ["python3", "-c", STUB],
                        "startup_timeout_s": 30,
                        "request_timeout_s": 10,
                        "checks": [
                            {
                                "kind": "gsm8k",
                                "dataset": "q",
                                "num_fewshot": 0,
                                "max_tokens": 16,
                                "min_accuracy": 1.0,
                            }
                        ],
                    }
                ],
            },
        }
        self.manifest = root / "manifest.yaml"
        YAML(typ="safe", pure=True).dump(data, self.manifest)
        lock = plan_lock(load_manifest(self.manifest), cache_dir=root / "git-cache", allow_local=True)
        self.lock = self.evidence / "lock.json"
        write_lock(lock, self.lock)
        self.lock_sha256 = lock_file_sha256(self.lock)
        self._records()

    def _records(self) -> None:
        from releasekit.clock import SystemClock
        from releasekit.findings import Findings
        from releasekit.provenance.summary import make_summary, write_summary
        from releasekit.records.base import write_record
        from releasekit.records.plan_check import PlanCheckResult
        from releasekit.records.verification import ReleasekitBlock

        manifest_sha = hashlib.sha256(self.manifest.read_bytes()).hexdigest()
        write_record(
            PlanCheckResult(
                passed=True, manifest_sha256=manifest_sha, lock_sha256=self.lock_sha256, findings=Findings()
            ),
            self.evidence / "plan-check.json",
        )
        statement = {
            "_type": "https://in-toto.io/Statement/v1",
            "subject": [{"name": "image", "digest": {"sha256": self.image_id.split(":")[1]}}],
            "predicateType": "https://slsa.dev/provenance/v1",
            "predicate": {"buildDefinition": {"buildType": "releasekit"}, "runDetails": {}},
        }
        (self.evidence / "provenance.intoto.json").write_text(json.dumps(statement), encoding="utf-8")
        summary = make_summary(
            image_id=self.image_id,
            passed=True,
            block=ReleasekitBlock(lock_sha256=self.lock_sha256, manifest_sha256=manifest_sha),
            provenance=self.evidence / "provenance.intoto.json",
            clock=SystemClock(),
        )
        write_summary(summary, self.evidence / "verification_summary.json")


@pytest.fixture(scope="module")
def hosts(tmp_path_factory, base_image, docker_client):
    root = tmp_path_factory.mktemp("twohosts")
    repo = Forge(root / "forge", "app")
    repo.init({"app/__init__.py": "VALUE = 1\n"})
    candidate = _image(
        docker_client, base_image.name, "releasekit-test/twohosts:candidate", b"the verified one\n"
    )
    other = _image(docker_client, base_image.name, "releasekit-test/twohosts:other", b"an attacker's image\n")
    with (
        start_local_registry(root / "registry") as registry,
        second_engine(root / "engine-b") as engine_b,
    ):
        yield root, repo, registry, engine_b, candidate, other


def _on_b(engine_b: SecondEngine, *args: str):
    return invoke(*args, env={**engine_b.env, "RELEASEKIT_ALLOW_LOCAL_REPOS": "1"})


def _stage(candidate: str, rel: Staged, staging: str, *extra: str):
    """``releasekit stage`` of ``candidate`` for ``rel``'s lock; it must succeed."""
    staged = invoke("stage", "--image", candidate, "--lock", str(rel.lock), "--staging", staging, *extra)
    assert staged.returncode == 0, staged.stdout + staged.stderr
    return staged


def test_stage_on_a_validate_and_test_on_b_publish_the_same_digest(hosts, docker_client):
    root, repo, registry, engine_b, candidate, other = hosts
    rel = Staged(root / "rel", repo, candidate)
    staging = f"{registry.host}/team/staging"

    record = json.loads(_stage(candidate, rel, staging, "--json").stdout)
    digest = record["digest"]
    assert record["image_id"] == candidate and digest.startswith("sha256:")
    assert record["tag"] == f"lock-{rel.lock_sha256}"
    staging_json = rel.evidence / "staging.json"
    assert json.loads(staging_json.read_text())["digest"] == digest
    # A function of its inputs: staged again, the same image gives the same staging.json bytes.
    again = root / "staged-again"
    _stage(candidate, rel, staging, "-o", str(again))
    assert_same_record(staging_json, again / "staging.json")
    reference = f"{staging}@{digest}"

    b = engine_b.client()
    assert not [i for i in b.images.list() if i.id == candidate]  # B shares nothing with A

    cell = _on_b(
        engine_b,
        *("validate", str(rel.manifest), "--image", reference, "--staged", str(staging_json)),
        *("--lock", str(rel.lock), "-o", str(rel.receipts), "--gpus", "0", "--json"),
    )
    assert cell.returncode == 0, cell.stdout[-3000:] + cell.stderr
    receipt = json.loads((rel.receipts / "stub.json").read_text())
    assert (receipt["image_id"], receipt["image_digest"], receipt["passed"]) == (candidate, digest, True)
    assert receipt["host"]["hostname"]

    suite = _on_b(
        engine_b,
        *("test", str(rel.manifest), "--image", reference, "--staged", str(staging_json)),
        *("--lock", str(rel.lock), "-o", str(rel.evidence), "--allow-local-repos", "--json"),
    )
    assert suite.returncode == 0, suite.stdout[-3000:] + suite.stderr
    test_receipt = json.loads((rel.evidence / "tests" / "app.smoke.json").read_text())
    assert (test_receipt["image_id"], test_receipt["image_digest"], test_receipt["status"]) == (
        candidate,
        digest,
        "passed",
    )
    assert test_receipt["host"]
    assert b.images.get(reference).id == candidate  # B ran what it pulled
    b.close()

    # Publish on A from the staging repository: the same digest, no docker push of the image.
    release_repo = f"{registry.host}/team/release"
    published = invoke(
        *("publish", "--staged", str(staging_json), "--lock", str(rel.lock), "--receipts", str(rel.receipts)),
        *(
            "--evidence",
            str(rel.evidence),
            "--manifest",
            str(rel.manifest),
            "--to",
            release_repo,
            "--tag",
            "beta",
        ),
        "--json",
    )
    assert published.returncode == 0, published.stdout[-3000:] + published.stderr
    result = json.loads(published.stdout)
    assert result["digest"] == digest and result["published"] is True
    with RegistryClient(registry.host) as client:
        assert client.get_manifest("team/release", "beta").digest == digest
        assert (
            client.get_manifest("team/release", digest).data
            == client.get_manifest("team/staging", digest).data
        )

    # A receipt for the same image ID run from a local image (no digest) is not accepted for the staged digest.
    local = json.loads((rel.receipts / "stub.json").read_text())
    local["image_digest"] = None
    other_dir = root / "rel-local-receipts"
    other_dir.mkdir()
    (other_dir / "stub.json").write_text(json.dumps(local))
    refused = invoke(
        *("publish", "--staged", str(staging_json), "--lock", str(rel.lock), "--receipts", str(other_dir)),
        *(
            "--evidence",
            str(rel.evidence),
            "--manifest",
            str(rel.manifest),
            "--to",
            release_repo,
            "--tag",
            "rc",
        ),
        "--json",
    )
    assert refused.returncode == 1, refused.stdout[-2000:] + refused.stderr
    assert "RECEIPT_WRONG_DIGEST" in refused.stdout


def test_a_candidate_swapped_after_staging_is_refused_on_b(hosts, docker_client):
    root, repo, registry, engine_b, candidate, other = hosts
    rel = Staged(root / "swap", repo, candidate)
    staging = f"{registry.host}/team/swap"
    digest = json.loads(_stage(candidate, rel, staging, "--json").stdout)["digest"]
    staging_json = rel.evidence / "staging.json"
    # The attacker pushes their image to the staging repository and points the GPU host at it.
    from releasekit.docker_engine import Engine

    swapped = Engine(docker_client).push(other, f"{registry.host}/team/swap", "evil", where=registry.host)

    def validate(image: str, staged_file: Path):
        return _on_b(
            engine_b,
            *("validate", str(rel.manifest), "--image", image, "--staged", str(staged_file)),
            *("--lock", str(rel.lock), "-o", str(root / "swap-receipts"), "--gpus", "0"),
        )

    wrong_digest = validate(f"{staging}@{swapped}", staging_json)
    assert wrong_digest.returncode == 2 and swapped in wrong_digest.stderr and digest in wrong_digest.stderr
    # ... or edits the digest in staging.json: B pulls it, and its image ID is not the verified one.
    edited = json.loads(staging_json.read_text())
    edited["digest"] = swapped
    forged = root / "forged-staging.json"
    forged.write_text(json.dumps(edited))
    wrong_image = validate(f"{staging}@{swapped}", forged)
    assert wrong_image.returncode == 2, wrong_image.stderr
    assert other in wrong_image.stderr and candidate in wrong_image.stderr
    assert not (root / "swap-receipts").exists()  # refused before any cell started
    b = engine_b.client()
    assert not b.containers.list(all=True)
    b.close()


def test_every_link_signed_by_its_host_and_published_under_require_signed(hosts, tmp_path):
    """Issue 34, item 3: the whole chain signed by the hosts that wrote it — A signs the evidence and
    staging.json, B (its own key) signs its receipts and test receipts after running them — and
    published with --require-signed, both keys trusted; every link's signer is recorded."""
    from releasekit.signing import keyid_of, load_signer
    from releasekit.signing.keys import load_public_key, write_key_pair
    from releasekit.signing.statements import sign_statement_file, sign_summary_file

    root, repo, registry, engine_b, candidate, _ = hosts
    a_key, a_pub, _ = write_key_pair(tmp_path / "a")
    b_key, b_pub, _ = write_key_pair(tmp_path / "b")
    rel = Staged(root / "signed", repo, candidate)
    signer = load_signer(a_key)
    sign_statement_file(signer, rel.evidence / "provenance.intoto.json")
    sign_summary_file(signer, rel.evidence / "verification_summary.json", candidate)
    strict = ("--trusted-key", str(a_pub), "--trusted-key", str(b_pub), "--require-signed")
    staging = f"{registry.host}/team/signed-staging"
    digest = json.loads(
        _stage(candidate, rel, staging, "--json", *strict, "--signing-key", str(a_key)).stdout
    )["digest"]
    staging_json = rel.evidence / "staging.json"
    reference = f"{staging}@{digest}"

    cell = _on_b(
        engine_b,
        *("validate", str(rel.manifest), "--image", reference, "--staged", str(staging_json)),
        *("--lock", str(rel.lock), "-o", str(rel.receipts), "--gpus", "0", "--json"),
        *strict,
        *("--signing-key", str(b_key)),
    )
    assert cell.returncode == 0, cell.stdout[-3000:] + cell.stderr
    assert (rel.receipts / "stub.dsse.json").is_file()
    suite = _on_b(
        engine_b,
        *("test", str(rel.manifest), "--image", reference, "--staged", str(staging_json)),
        *("--lock", str(rel.lock), "-o", str(rel.evidence), "--allow-local-repos", "--json"),
        *strict,
        *("--signing-key", str(b_key)),
    )
    assert suite.returncode == 0, suite.stdout[-3000:] + suite.stderr
    assert (rel.evidence / "tests" / "app.smoke.dsse.json").is_file()

    published = invoke(
        *("publish", "--staged", str(staging_json), "--lock", str(rel.lock), "--receipts", str(rel.receipts)),
        *("--evidence", str(rel.evidence), "--manifest", str(rel.manifest)),
        *("--to", f"{registry.host}/team/signed-release", "--tag", "beta", "--json"),
        *strict,
    )
    assert published.returncode == 0, published.stdout[-3000:] + published.stderr
    signers = json.loads(published.stdout)["signers"]
    a_id, b_id = (keyid_of(load_public_key(p)) for p in (a_pub, b_pub))
    assert signers["verification_summary.dsse.json"] == a_id
    assert signers["receipts/stub.dsse.json"] == b_id and signers["tests/app.smoke.dsse.json"] == b_id
