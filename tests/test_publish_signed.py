"""Signed evidence through publish and promote, against a real registry on 127.0.0.1.

distribution 2.8 has no referrers API, so the envelopes are found by the
``sha256-<hex>.att`` tag: publish.json says which way was used.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from cli_run import invoke
from publish_support import MANIFEST, Release, publish_args
from securesystemslib.dsse import Envelope as SslibEnvelope
from securesystemslib.signer import SSlibKey

from releasekit.publish.attachments import attach_signed, signed_tag
from releasekit.registry import RegistryClient
from releasekit.signing import SignatureError, keyid_of, load_signer, load_trusted_keys, verify_envelope
from releasekit.signing.keys import load_public_key
from releasekit.signing.statements import sign_statement_file, sign_summary_file

pytestmark = pytest.mark.docker


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
    r = invoke("promote", "--from", f"{target}:beta", "--to", f"{target}:stable", "--json", *extra)
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
    nokey = invoke(*publish_args(release, image, target, "beta"))
    assert nokey.returncode == 2 and "--trusted-key" in nokey.stderr
    assert tags_of(registry, repo) == []

    r = invoke(*publish_args(release, image, target, "beta"), "--trusted-key", str(keys["public"]))
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
    code, out, _ = promote(target, "--trusted-key", str(keys["stranger_pub"]))
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
    r = invoke(*publish_args(release, image, target, "beta"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["signed"] is None
    code, out, _ = promote(target, "--trusted-key", str(keys["public"]))
    assert code == 1 and out is not None
    assert error_codes(out) == ["SIGNATURE_MISSING", "SIGNATURE_MISSING"]
    assert "stable" not in tags_of(registry, "team/unsigned")


def finding_codes(result: dict, severity: str) -> list[str]:
    findings = result["gate"]["findings"]["findings"] if "gate" in result else result["findings"]["findings"]
    return [f["code"] for f in findings if f["severity"] == severity]


def test_policy_signed_refuses_an_unsigned_release(tmp_path, registry, image, keys):
    release = Release(
        tmp_path, image, manifest_text=MANIFEST + "publish:\n  repository: x.invalid/y\n  signed: true\n"
    )
    repo = "team/policy-signed"
    nokey = invoke(*publish_args(release, image, f"{registry.host}/{repo}", "beta"))
    assert nokey.returncode == 1, nokey.stdout + nokey.stderr
    assert finding_codes(json.loads(nokey.stdout), "error") == ["EVIDENCE_UNSIGNED"]
    r = invoke(
        *publish_args(release, image, f"{registry.host}/{repo}", "beta"), "--trusted-key", str(keys["public"])
    )
    assert r.returncode == 1, r.stdout + r.stderr
    codes = [f["code"] for f in json.loads(r.stdout)["gate"]["findings"]["findings"]]
    assert codes.count("SIGNATURE_MISSING") == 2
    assert tags_of(registry, repo) == []


def test_unsigned_evidence_is_accepted_only_out_loud_and_refused_with_require_signed(
    tmp_path, registry, image
):
    """No key anywhere: publish and promote go ahead, each with a warning line on stderr and an
    EVIDENCE_UNSIGNED warning in its result (publish.json too); --require-signed refuses (exit 1)."""
    release = Release(tmp_path, image)
    repo = "team/unsigned-loud"
    target = f"{registry.host}/{repo}"

    refused = invoke(*publish_args(release, image, target, "beta"), "--require-signed")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert finding_codes(json.loads(refused.stdout), "error") == ["EVIDENCE_UNSIGNED"]
    assert tags_of(registry, repo) == []

    r = invoke(*publish_args(release, image, target, "beta"))
    assert r.returncode == 0, r.stdout + r.stderr
    warning = [line for line in r.stderr.splitlines() if line.startswith("releasekit: warning:")]
    assert len(warning) == 1 and "NOT signed" in warning[0], r.stderr
    assert finding_codes(json.loads(r.stdout), "warning") == ["EVIDENCE_UNSIGNED"]
    written = json.loads((release.evidence / "published" / "publish.json").read_text())
    assert [f["code"] for f in written["gate"]["findings"]["findings"]] == ["EVIDENCE_UNSIGNED"]

    code, out, stderr = promote(target, "--require-signed")
    assert code == 1 and out is not None, stderr
    assert error_codes(out) == ["EVIDENCE_UNSIGNED"]
    assert "stable" not in tags_of(registry, repo)

    code, out, stderr = promote(target)
    assert code == 0 and out is not None and out["promoted"], stderr
    assert "releasekit: warning: attached: the evidence is NOT signed" in stderr
    assert [f["code"] for f in out["findings"]["findings"] if f["severity"] == "warning"] == [
        "EVIDENCE_UNSIGNED"
    ]


def test_forged_unsigned_evidence_is_refused_with_require_signed(tmp_path, registry, image, keys):
    """An attacker who can write the release directory writes evidence that says PASSED for the
    image (no key, so no envelope): with --require-signed it is refused, with or without a key."""
    forged = Release(tmp_path, image)  # every file written by hand, none by verify-provenance
    statement = json.loads((forged.evidence / "verification_summary.json").read_text())
    assert statement["predicate"]["verificationResult"] == "PASSED"
    repo = "team/forged-unsigned"
    target = f"{registry.host}/{repo}"
    r = invoke(*publish_args(forged, image, target, "beta"), "--require-signed")
    assert r.returncode == 1 and finding_codes(json.loads(r.stdout), "error") == ["EVIDENCE_UNSIGNED"]
    r = invoke(
        *publish_args(forged, image, target, "beta"), "--require-signed", "--trusted-key", str(keys["public"])
    )
    # The forged receipts are refused too: no validating host signed them.
    assert r.returncode == 1 and sorted(finding_codes(json.loads(r.stdout), "error")) == [
        "RECEIPT_UNSIGNED",
        "RECEIPT_UNSIGNED",
        "SIGNATURE_MISSING",
        "SIGNATURE_MISSING",
    ]
    assert tags_of(registry, repo) == []


def test_a_non_canonical_base64_envelope_is_refused(tmp_path, registry, image, keys):
    """A real envelope signed by the release key, its payload (then its signature) re-encoded so
    that it decodes to the same bytes through a lenient decoder: refused as SIGNATURE_ENCODING."""
    release = Release(tmp_path, image)
    sign(release, keys["private"])
    path = release.evidence / "verification_summary.dsse.json"
    genuine = json.loads(path.read_text())
    repo = "team/noncanonical"
    target = f"{registry.host}/{repo}"

    def respell(text: str) -> str:
        """Same bytes, another spelling: the unused low bits of the last character set."""
        stripped = text.rstrip("=")
        pad = len(text) - len(stripped)
        assert pad, "the test needs a padded value"
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
        last = alphabet[alphabet.index(stripped[-1]) | (0b1111 if pad == 2 else 0b11)]
        return stripped[:-1] + last + "=" * pad

    def variants(value: str) -> list[str]:
        """MIME line-wrapped (76 columns), a trailing newline, and, when padded, unpadded and respelled."""
        out = [base64.encodebytes(base64.b64decode(value)).decode(), value + "\n"]
        if value.endswith("="):
            out += [value.rstrip("="), respell(value)]
        return out

    trusted = load_trusted_keys([keys["public"]])
    verify_envelope(path.read_bytes(), trusted)  # the genuine envelope verifies
    respelled: list[dict] = []
    for field in ("payload", "sig"):
        value = genuine[field] if field == "payload" else genuine["signatures"][0]["sig"]
        for bad in variants(value):
            assert bad != value and base64.b64decode(bad + "==") == base64.b64decode(value)  # lenient: same
            envelope = json.loads(json.dumps(genuine))
            if field == "payload":
                envelope["payload"] = bad
            else:
                envelope["signatures"][0]["sig"] = bad
            with pytest.raises(SignatureError, match="not canonical base64") as caught:
                verify_envelope(json.dumps(envelope).encode(), trusted)
            assert caught.value.code == "SIGNATURE_ENCODING"
            respelled.append(envelope)
    assert len(respelled) >= 4
    # Through publish: the line-wrapped payload is a finding, and nothing is pushed.
    path.write_text(json.dumps(respelled[0]))
    r = invoke(*publish_args(release, image, target, "beta"), "--trusted-key", str(keys["public"]))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "SIGNATURE_ENCODING" in finding_codes(json.loads(r.stdout), "error")
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
    r = invoke(
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
    r = invoke(
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
    r = invoke(*publish_args(release, image, target, "beta"), "--trusted-key", str(keys["public"]))
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


def test_publish_finds_the_manifest_on_the_demo_layout(tmp_path, registry, image):
    """``lock.json`` beside ``example/manifest.yaml``, evidence in ``release/`` (the demo's layout):
    publish finds the lock's manifest without --manifest, passing over a decoy of the same name."""
    import hashlib

    from publish_support import REQUIRED_CELLS

    release = Release(tmp_path, image)
    (tmp_path / "aaa").mkdir()  # sorted before example/: same name, other bytes
    (tmp_path / "aaa" / "manifest.yaml").write_text(MANIFEST + "# not the locked manifest\n")
    (tmp_path / "example").mkdir()
    release.manifest = release.manifest.rename(tmp_path / "example" / "manifest.yaml")
    data = json.loads(release.lock.read_text())
    data["manifest"]["path"] = "manifest.yaml"
    release.lock.unlink()
    release.lock = tmp_path / "lock.json"
    release.lock.write_text(json.dumps(data, indent=2) + "\n")
    release.lock_sha256 = hashlib.sha256(release.lock.read_bytes()).hexdigest()
    release.write_plan_check()
    release.write_verification()
    for cell in REQUIRED_CELLS:
        release.write_receipt(cell)
    repo = "team/demo-layout"
    r = invoke(
        *publish_args(release, image, f"{registry.host}/{repo}", "beta"), "--evidence", str(release.evidence)
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["published"] is True
    assert "beta" in tags_of(registry, repo)


def test_a_swapped_sbom_is_refused_at_promote_and_an_unsigned_one_under_require_signed(
    tmp_path, registry, image, keys
):
    """Issue 34 item 3: the SBOM was not signed, so promote --trusted-key --require-signed accepted
    an attached SBOM swapped for another that still names the image. Now the signed summary names
    the SBOM's sha256 and the SBOM has its own envelope."""
    from sbom_support import signed_release, swapped_sbom

    from releasekit.publish.attachments import attachment_tag, push_artifact
    from releasekit.records.oci import OCI_MANIFEST

    release, text = signed_release(tmp_path / "rel", image, keys["private"])
    repo = "team/signed-sbom"
    target = f"{registry.host}/{repo}"
    strict = ("--trusted-key", str(keys["public"]), "--require-signed")
    r = invoke(*publish_args(release, image, target, "beta"), *strict)
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(r.stdout)
    assert result["signed"]["files"] == [
        "provenance.intoto.dsse.json",
        "receipts/tiny-tp1-ngram.dsse.json",
        "receipts/tiny-tp1.dsse.json",
        "sbom.cdx.dsse.json",
        "verification_summary.dsse.json",
    ]
    digest = result["digest"]

    # Someone with push rights re-pushes the evidence with the SBOM swapped (the envelopes untouched).
    with RegistryClient(registry.host) as client:
        manifest = json.loads(client.get_manifest(repo, attachment_tag(digest)).data)
        layers = []
        for layer in manifest["layers"]:
            title = layer["annotations"]["org.opencontainers.image.title"]
            data = client.get_blob(repo, layer["digest"])
            layers.append(
                (title, layer["mediaType"], swapped_sbom(text).encode() if title == "sbom.cdx.json" else data)
            )
        config = client.get_blob(repo, manifest["config"]["digest"])
        body = push_artifact(
            client,
            repo,
            client.get_manifest(repo, digest),
            artifact_type=manifest["artifactType"],
            config=config,
            config_media_type=manifest["config"]["mediaType"],
            layers=layers,
            annotations=manifest.get("annotations"),
        )
        client.put_manifest(repo, attachment_tag(digest), body, OCI_MANIFEST)
    code, out, stderr = promote(target, *strict)
    assert code == 1 and out is not None, stderr
    assert sorted(error_codes(out)) == ["SBOM_MISMATCH", "SIGNED_EVIDENCE_MISMATCH"]
    assert "stable" not in tags_of(registry, repo)

    # The same swap in the release directory: refused before anything is pushed.
    (release.evidence / "sbom.cdx.json").write_text(swapped_sbom(text), encoding="utf-8")
    r = invoke(*publish_args(release, image, f"{registry.host}/team/swapped-sbom", "beta"), *strict)
    assert r.returncode == 1, r.stdout + r.stderr
    assert sorted(finding_codes(json.loads(r.stdout), "error")) == [
        "SBOM_MISMATCH",
        "SIGNED_EVIDENCE_MISMATCH",
    ]
    assert tags_of(registry, "team/swapped-sbom") == []

    # An unsigned SBOM (the rest signed): refused under --require-signed, said out loud without it.
    (release.evidence / "sbom.cdx.json").write_text(text, encoding="utf-8")
    (release.evidence / "sbom.cdx.dsse.json").unlink()
    r = invoke(*publish_args(release, image, f"{registry.host}/team/unsigned-sbom", "beta"), *strict)
    assert r.returncode == 1, r.stdout + r.stderr
    assert finding_codes(json.loads(r.stdout), "error") == ["SBOM_UNSIGNED"]
    assert tags_of(registry, "team/unsigned-sbom") == []
    r = invoke(*publish_args(release, image, f"{registry.host}/team/unsigned-sbom", "beta"), *strict[:2])
    assert r.returncode == 0, r.stdout + r.stderr
    assert finding_codes(json.loads(r.stdout), "warning") == ["SBOM_UNSIGNED"]
