"""Signed evidence through publish and promote, against a real registry on 127.0.0.1.

distribution 2.8 has no referrers API, so the envelopes are found by the
``sha256-<hex>.att`` tag: publish.json says which way was used.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import docker
import pytest
from securesystemslib.dsse import Envelope as SslibEnvelope
from securesystemslib.signer import SSlibKey
from test_publish_support import MANIFEST, Release, build_image, publish_args, run_cli

from releasekit.demo.localregistry import start_local_registry
from releasekit.publish.attachments import attach_signed, signed_tag
from releasekit.registry import RegistryClient
from releasekit.signing import keyid_of, load_signer
from releasekit.signing.keys import load_public_key, write_key_pair
from releasekit.signing.statements import sign_statement_file, sign_summary_file

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def engine():
    client = docker.from_env()
    client.ping()
    yield client
    client.close()


@pytest.fixture(scope="module")
def image(engine) -> str:
    return build_image(
        engine, "releasekit-test/publish-small:1", {"hello.txt": b"small image for publish tests\n"}
    )


@pytest.fixture(scope="module")
def other_image(engine) -> str:
    return build_image(engine, "releasekit-test/publish-small:2", {"hello.txt": b"another image\n"})


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    with start_local_registry(tmp_path_factory.mktemp("registry")) as reg:
        yield reg


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("keys")
    signer_key, signer_pub, _ = write_key_pair(root / "release", "ecdsa-p256")
    _, stranger_pub, _ = write_key_pair(root / "stranger", "ed25519")
    return {"private": signer_key, "public": signer_pub, "stranger": stranger_pub}


def sign(release: Release, private: Path, image_id: str | None = None) -> None:
    """What build (provenance) and verify-provenance (summary) write when given the key."""
    if image_id is not None:  # evidence about another image, re-signed by the release key
        release.image_id = image_id
        release.write_provenance()
        release.write_verification()
    signer = load_signer(private)
    sign_statement_file(signer, release.evidence / "provenance.intoto.json")
    sign_summary_file(signer, release.evidence / "verification_summary.json", release.image_id)


def tags_of(reg, repository: str) -> list[str]:
    with RegistryClient(reg.host) as client:
        return client.tags(repository)


def promote(target: str, *extra: str) -> tuple[int, dict | None, str]:
    r = run_cli("promote", "--from", f"{target}:beta", "--to", f"{target}:stable", "--json", *extra)
    try:
        return r.returncode, json.loads(r.stdout), r.stderr
    except ValueError:
        return r.returncode, None, r.stderr


def error_codes(result: dict) -> list[str]:
    return [f["code"] for f in result["findings"]["findings"] if f["severity"] == "error"]


def test_signed_release_is_attached_by_tag_and_promoted_only_with_the_trusted_key(
    tmp_path, registry, image, keys
):
    release = Release(tmp_path, image)
    sign(release, keys["private"])
    repo = "team/signed"
    target = f"{registry.host}/{repo}"

    # Signed evidence and no key to check it with: missing input, nothing pushed.
    nokey = run_cli(*publish_args(release, image, target, "beta"))
    assert nokey.returncode == 2 and "--trusted-key" in nokey.stderr
    assert tags_of(registry, repo) == []

    r = run_cli(*publish_args(release, image, target, "beta"), "--trusted-key", str(keys["public"]))
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(r.stdout)
    digest = result["digest"]
    assert result["signed"]["method"] == "tag-fallback"  # distribution 2.8: no referrers API
    assert result["signed"]["tag"] == signed_tag(digest) == digest.replace(":", "-") + ".att"
    assert result["signed"]["files"] == ["provenance.intoto.dsse.json", "verification_summary.dsse.json"]
    written = json.loads((release.evidence / "published" / "publish.json").read_text())
    assert written["signed"] == result["signed"]
    keyid = keyid_of(load_public_key(keys["public"]))
    assert set(result["signers"].values()) == {keyid}

    # In the registry: an OCI 1.1 artifact whose subject is the image; the envelopes verify
    # with securesystemslib (not our code).
    with RegistryClient(registry.host) as client:
        assert client.referrers(repo, digest) is None
        artifact = json.loads(client.get_manifest(repo, signed_tag(digest)).data)
        assert artifact["subject"]["digest"] == digest
        assert artifact["artifactType"] == "application/vnd.dsse.envelope.v1+json"
        public = load_public_key(keys["public"])
        for layer in artifact["layers"]:
            envelope = SslibEnvelope.from_dict(json.loads(client.get_blob(repo, layer["digest"])))
            envelope.verify([SSlibKey.from_crypto(public, keyid=keyid)], 1)
            statement = json.loads(envelope.payload)
            assert statement["subject"][0]["digest"]["sha256"] == image.removeprefix("sha256:")

    code, _, stderr = promote(target)
    assert code == 2 and "--trusted-key" in stderr
    code, out, _ = promote(target, "--trusted-key", str(keys["stranger"]))
    assert code == 1 and out is not None
    assert error_codes(out) == ["SIGNER_UNTRUSTED", "SIGNER_UNTRUSTED"]
    assert "stable" not in tags_of(registry, repo)

    code, out, stderr = promote(target, "--trusted-key", str(keys["public"]))
    assert code == 0, stderr
    assert out is not None and out["signed_via"] == "tag-fallback" and set(out["signers"].values()) == {keyid}
    with RegistryClient(registry.host) as client:
        assert client.get_manifest(repo, "stable").digest == digest


def test_promote_with_a_trusted_key_refuses_unsigned_evidence(tmp_path, registry, image, keys):
    release = Release(tmp_path, image)
    target = f"{registry.host}/team/unsigned"
    r = run_cli(*publish_args(release, image, target, "beta"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["signed"] is None
    code, out, _ = promote(target, "--trusted-key", str(keys["public"]))
    assert code == 1 and out is not None
    assert error_codes(out) == ["SIGNATURE_MISSING", "SIGNATURE_MISSING"]
    assert "stable" not in tags_of(registry, "team/unsigned")


def test_policy_signed_refuses_an_unsigned_release(tmp_path, registry, image, keys):
    release = Release(
        tmp_path, image, manifest_text=MANIFEST + "publish:\n  repository: x.invalid/y\n  signed: true\n"
    )
    repo = "team/policy-signed"
    nokey = run_cli(*publish_args(release, image, f"{registry.host}/{repo}", "beta"))
    assert nokey.returncode == 2 and "requires signed evidence" in nokey.stderr
    r = run_cli(
        *publish_args(release, image, f"{registry.host}/{repo}", "beta"), "--trusted-key", str(keys["public"])
    )
    assert r.returncode == 1, r.stdout + r.stderr
    codes = [f["code"] for f in json.loads(r.stdout)["gate"]["findings"]["findings"]]
    assert codes.count("SIGNATURE_MISSING") == 2
    assert tags_of(registry, repo) == []


def test_publish_refuses_a_flipped_byte_and_evidence_of_another_image(
    tmp_path, registry, image, other_image, keys
):
    flipped = Release(tmp_path / "flipped", image)
    sign(flipped, keys["private"])
    path = flipped.evidence / "verification_summary.dsse.json"
    envelope = json.loads(path.read_text())
    payload = bytearray(base64.b64decode(envelope["payload"]))
    payload[payload.index(b"PASSED")] ^= 0x01
    envelope["payload"] = base64.b64encode(bytes(payload)).decode()
    path.write_text(json.dumps(envelope))
    repo = "team/flipped"
    r = run_cli(
        *publish_args(flipped, image, f"{registry.host}/{repo}", "beta"), "--trusted-key", str(keys["public"])
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert "SIGNATURE_INVALID" in [f["code"] for f in json.loads(r.stdout)["gate"]["findings"]["findings"]]
    assert tags_of(registry, repo) == []

    elsewhere = Release(tmp_path / "elsewhere", image)
    sign(elsewhere, keys["private"], image_id=other_image)
    elsewhere.image_id = image
    elsewhere.write_provenance()
    elsewhere.write_verification()
    repo = "team/elsewhere"
    r = run_cli(
        *publish_args(elsewhere, image, f"{registry.host}/{repo}", "beta"),
        "--trusted-key",
        str(keys["public"]),
    )
    assert r.returncode == 1, r.stdout + r.stderr
    codes = [f["code"] for f in json.loads(r.stdout)["gate"]["findings"]["findings"]]
    assert codes.count("SIGNED_SUBJECT_MISMATCH") == 2
    assert tags_of(registry, repo) == []


def test_promote_refuses_signed_evidence_for_another_digest(tmp_path, registry, image, other_image, keys):
    release = Release(tmp_path / "rel", image)
    sign(release, keys["private"])
    repo = "team/swapped"
    target = f"{registry.host}/{repo}"
    r = run_cli(*publish_args(release, image, target, "beta"), "--trusted-key", str(keys["public"]))
    assert r.returncode == 0, r.stdout + r.stderr
    digest = json.loads(r.stdout)["digest"]

    # Someone with push rights replaces the signed evidence with genuine envelopes, signed by
    # the release key, about another image.
    other = Release(tmp_path / "other", other_image)
    sign(other, keys["private"])
    names = ("provenance.intoto.dsse.json", "verification_summary.dsse.json")
    with RegistryClient(registry.host) as client:
        blob = client.get_manifest(repo, digest)
        swapped = attach_signed(client, repo, blob, {n: (other.evidence / n).read_bytes() for n in names})
    assert swapped.tag == signed_tag(digest)

    code, out, stderr = promote(target, "--trusted-key", str(keys["public"]))
    assert code == 1, stderr
    assert out is not None and error_codes(out) == ["SIGNED_SUBJECT_MISMATCH", "SIGNED_SUBJECT_MISMATCH"]
    assert "stable" not in tags_of(registry, repo)
