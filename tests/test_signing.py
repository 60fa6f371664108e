"""Signed evidence: DSSE envelopes round-trip, verify with an independent implementation
(securesystemslib), fail on any flipped byte, and never let the private key out."""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from securesystemslib.dsse import Envelope as SslibEnvelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import CryptoSigner, SSlibKey
from signing_support import cli

from releasekit.errors import InputError
from releasekit.signing import (
    ENV_KEY,
    ENV_KEY_FILE,
    PAYLOAD_TYPE,
    Envelope,
    SignatureError,
    TrustedKeys,
    keyid_of,
    load_signer,
    load_trusted_keys,
    pae,
    sign_payload,
    verify_envelope,
)
from releasekit.signing.keys import load_public_key, write_key_pair
from releasekit.signing.statements import envelope_path, sign_summary_file

KEY_TYPES = ["ecdsa-p256", "ed25519"]
STATEMENT = json.dumps(
    {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": "image", "digest": {"sha256": "ab" * 32}}],
        "predicateType": "https://slsa.dev/provenance/v1",
        "predicate": {"buildDefinition": {"buildType": "x"}, "runDetails": {}},
    },
    indent=2,
).encode()


@pytest.fixture(params=KEY_TYPES)
def pair(request, tmp_path) -> tuple[Path, Path, str]:
    return write_key_pair(tmp_path / request.param, request.param)


def sslib_key(public_file: Path) -> SSlibKey:
    """The public key as securesystemslib sees it, under our keyid (sha256 of the SPKI DER)."""
    public = serialization.load_pem_public_key(public_file.read_bytes())
    return SSlibKey.from_crypto(public, keyid=keyid_of(public))  # type: ignore[arg-type]


def sslib_verify(envelope_bytes: bytes, public_file: Path) -> bytes:
    envelope = SslibEnvelope.from_dict(json.loads(envelope_bytes))
    envelope.verify([sslib_key(public_file)], 1)
    return envelope.payload


def flip(text: str, index: int) -> str:
    raw = bytearray(base64.b64decode(text))
    raw[index] ^= 0x01
    return base64.b64encode(bytes(raw)).decode()


def test_pae_is_the_dsse_v1_encoding():
    assert pae("application/example", b"hello world") == b"DSSEv1 19 application/example 11 hello world"
    assert pae("", b"") == b"DSSEv1 0  0 "
    # Lengths are byte lengths, not character counts.
    assert pae("t", "é".encode()) == b"DSSEv1 1 t 2 " + "é".encode()
    # The independent implementation encodes the same bytes.
    envelope = SslibEnvelope(payload=STATEMENT, payload_type=PAYLOAD_TYPE, signatures={})
    assert envelope.pae() == pae(PAYLOAD_TYPE, STATEMENT)


def test_sign_verify_round_trip_and_independent_verifier(pair):
    private, public, keyid = pair
    signer = load_signer(private)
    assert signer is not None and signer.keyid == keyid
    assert keyid == keyid_of(load_public_key(public))
    envelope = sign_payload(signer, STATEMENT)
    data = envelope.to_json()
    parsed = json.loads(data)
    assert parsed["payloadType"] == "application/vnd.in-toto+json"
    assert parsed["signatures"][0]["keyid"] == keyid
    assert base64.b64decode(parsed["payload"]) == STATEMENT

    verified = verify_envelope(data, load_trusted_keys([public]))
    assert verified.payload == STATEMENT and verified.keyid == keyid
    # securesystemslib, not our code, accepts the envelope too.
    assert sslib_verify(data, public) == STATEMENT


def test_envelopes_signed_by_the_independent_implementation_verify_with_ours(pair):
    private, public, keyid = pair
    key = serialization.load_pem_private_key(private.read_bytes(), password=None)
    signer = CryptoSigner(key, sslib_key(public))  # type: ignore[arg-type]
    envelope = SslibEnvelope(payload=STATEMENT, payload_type=PAYLOAD_TYPE, signatures={})
    envelope.sign(signer)
    verified = verify_envelope(json.dumps(envelope.to_dict()).encode(), load_trusted_keys([public]))
    assert verified.payload == STATEMENT and verified.keyid == keyid


@pytest.mark.parametrize("part", ["payload", "signature", "payloadType"])
def test_a_flipped_byte_fails_both_verifiers(pair, part):
    private, public, _ = pair
    signer = load_signer(private)
    assert signer is not None
    data = json.loads(sign_payload(signer, STATEMENT).to_json())
    if part == "payload":
        data["payload"] = flip(data["payload"], 40)
    elif part == "signature":
        data["signatures"][0]["sig"] = flip(data["signatures"][0]["sig"], 10)
    else:
        data["payloadType"] = "application/vnd.in-toto+jsoN"
    tampered = json.dumps(data).encode()
    with pytest.raises(SignatureError) as ours:
        verify_envelope(tampered, load_trusted_keys([public]), payload_type=data["payloadType"])
    assert ours.value.code == "SIGNATURE_INVALID"
    assert len(ours.value.one_line().splitlines()) == 1
    with pytest.raises(VerificationError):
        sslib_verify(tampered, public)


def test_another_key_is_untrusted_and_the_error_is_one_line(tmp_path, pair):
    private, _, keyid = pair
    _, other_public, other_id = write_key_pair(tmp_path / "other", "ed25519")
    signer = load_signer(private)
    assert signer is not None
    data = sign_payload(signer, STATEMENT).to_json()
    with pytest.raises(SignatureError) as exc:
        verify_envelope(data, load_trusted_keys([other_public]))
    assert exc.value.code == "SIGNER_UNTRUSTED"
    assert keyid[:16] in exc.value.one_line() and other_id[:16] in exc.value.one_line()
    with pytest.raises(VerificationError):
        sslib_verify(data, other_public)
    # Trusting a set with the right key in it is enough.
    assert verify_envelope(data, load_trusted_keys([other_public, pair[1]])).keyid == keyid
    with pytest.raises(SignatureError, match="no trusted public key"):
        verify_envelope(data, TrustedKeys())


def test_unsigned_and_malformed_envelopes_fail(pair):
    _, public, _ = pair
    trusted = load_trusted_keys([public])
    bare = Envelope(payload=base64.b64encode(STATEMENT).decode(), payloadType=PAYLOAD_TYPE, signatures=[])
    with pytest.raises(SignatureError) as exc:
        verify_envelope(bare.to_json(), trusted)
    assert exc.value.code == "SIGNATURE_MISSING"
    for junk in (b"not json", b"{}", b'{"payload": 1}'):
        with pytest.raises(SignatureError, match="not a DSSE envelope"):
            verify_envelope(junk, trusted)


def test_keys_from_a_file_and_their_errors(tmp_path, pair):
    """Issue 43: a key is read from a file or a descriptor only, never the environment."""
    private, public, keyid = pair
    pem = private.read_text()
    assert load_signer() is None
    signer = load_signer(private)
    assert signer is not None and signer.keyid == keyid
    body = "".join(line for line in pem.splitlines() if "-----" not in line)
    assert body not in repr(signer) and body not in str(signer)

    damaged = pem.replace(body[10:30], "A" * 20)
    for name, text, message in (
        ("damaged.key", damaged, "not a PEM private key"),
        ("public.key", public.read_text(), "not a PEM private key"),
    ):
        bad = tmp_path / name
        bad.write_text(text)
        bad.chmod(0o600)
        with pytest.raises(InputError, match=message) as exc:
            load_signer(bad)
        assert body[:20] not in exc.value.one_line() and body[-20:] not in exc.value.one_line()
    with pytest.raises(InputError, match="does not exist"):
        load_signer(tmp_path / "nope.key")
    with pytest.raises(InputError, match="is a private key"):
        load_trusted_keys([private])
    p384 = tmp_path / "p384.key"
    p384.write_bytes(
        ec.generate_private_key(ec.SECP384R1()).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    p384.chmod(0o600)
    with pytest.raises(InputError, match="only P-256"):
        load_signer(p384)


def test_summary_envelope_signs_the_summary_statement_byte_for_byte(tmp_path, pair):
    from releasekit.clock import SystemClock
    from releasekit.provenance.summary import make_summary, write_summary
    from releasekit.records.verification import ReleasekitBlock

    private, public, _ = pair
    image_id = "sha256:" + "cd" * 32
    summary = tmp_path / "verification_summary.json"
    block = ReleasekitBlock(lock_sha256="0" * 64, manifest_sha256="1" * 64)
    write_summary(
        make_summary(image_id=image_id, passed=True, block=block, provenance=None, clock=SystemClock()),
        summary,
    )
    before = summary.read_bytes()
    written = sign_summary_file(load_signer(private), summary, image_id)
    assert written == envelope_path(summary) == tmp_path / "verification_summary.dsse.json"
    assert summary.read_bytes() == before
    payload = sslib_verify(written.read_bytes(), public)
    assert payload == before  # the file is the statement: signed as it is
    statement = json.loads(payload)
    assert statement["subject"][0]["digest"] == {"sha256": "cd" * 32}
    assert statement["predicateType"] == "https://slsa.dev/verification_summary/v1"
    # A file about another image is not signed for this one.
    with pytest.raises(SignatureError, match="not about"):
        sign_summary_file(load_signer(private), summary, "sha256:" + "ef" * 32)
    # Unsigned rerun: the stale envelope goes.
    assert sign_summary_file(None, summary, image_id) is None
    assert not written.exists()


@pytest.mark.parametrize("kind", KEY_TYPES)
def test_keys_generate_and_show_public(tmp_path, kind):
    out = tmp_path / "keys"
    r = cli("keys", "generate", "--out", str(out), "--type", kind, "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    private, public = out / "releasekit.key", out / "releasekit.pub"
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert info["keyid"] == keyid_of(load_public_key(public)) and info["type"] == kind
    body = "".join(line for line in private.read_text().splitlines() if "-----" not in line)
    assert body not in r.stdout + r.stderr

    for source in (private, public):
        shown = cli("keys", "show-public", str(source), "--json")
        assert shown.returncode == 0, shown.stderr
        data = json.loads(shown.stdout)
        assert data["keyid"] == info["keyid"] and data["public_key_pem"] == public.read_text()
        assert body not in shown.stdout + shown.stderr

    again = cli("keys", "generate", "--out", str(out))
    assert again.returncode == 2 and "already exists" in again.stderr
    bad = cli("keys", "generate", "--out", str(tmp_path / "x"), "--type", "rsa")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    missing = cli("keys", "show-public", str(tmp_path / "none.pem"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr


@pytest.mark.docker
def test_verify_provenance_writes_unsigned_evidence_and_sign_signs_it(tmp_path, base_image):
    """A real verify-provenance run (the base image against a lock it does not match: findings,
    exit 1) holds no key: it refuses one in its environment, writes the summary unsigned, and
    `releasekit sign` signs it afterwards; the key's base64 body is in no output and no file."""
    from publish_support import Release

    private, public, keyid = write_key_pair(tmp_path / "keys", "ecdsa-p256")
    pem = private.read_text()
    body = "".join(line for line in pem.splitlines() if "-----" not in line)
    image_id = base_image.image_id
    release = Release(tmp_path / "rel", image_id)
    # verify-provenance rebuilds from the lock: its locked base must be in the engine (here: the image itself).
    lock_data = json.loads(release.lock.read_text())
    lock_data["toolchain"]["base_image"]["name"] = base_image.name
    release.lock.write_text(json.dumps(lock_data, indent=2) + "\n")
    out = tmp_path / "out"
    summary = ["--summary", str(out / "verification_summary.json")]
    refused = cli("verify-provenance", image_id, "--lock", str(release.lock), *summary, env={ENV_KEY: pem})
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "releasekit sign" in refused.stderr
    assert not out.exists()
    runs = []
    for extra in (["--json"], []):
        r = cli("verify-provenance", image_id, "--lock", str(release.lock), *summary, *extra)
        assert r.returncode == 1, r.stdout + r.stderr
        runs.append(r)
    assert not (out / "verification_summary.dsse.json").exists()
    signed = cli("sign", str(out), "--key", str(private))
    assert signed.returncode == 0, signed.stderr
    runs.append(signed)
    envelope = (out / "verification_summary.dsse.json").read_bytes()
    payload = sslib_verify(envelope, public)
    statement = json.loads(payload)
    assert statement["subject"][0]["digest"]["sha256"] == image_id.removeprefix("sha256:")
    assert payload == (out / "verification_summary.json").read_bytes()
    assert json.loads(envelope)["signatures"][0]["keyid"] == keyid

    pieces = [body] + [body[i : i + 24] for i in range(0, len(body) - 24, 24)]
    for r in runs:
        for piece in pieces:
            assert piece not in r.stdout and piece not in r.stderr
    for path in [*out.rglob("*"), *release.root.rglob("*")]:
        if path.is_file() and path != private:
            data = path.read_bytes()
            assert not any(piece.encode() in data for piece in pieces), path

    # A damaged key is one line, exit 2, and does not echo the key.
    broken = tmp_path / "broken.key"
    broken.write_text(pem.replace(body[20:60], "B" * 40))
    broken.chmod(0o600)
    bad = cli("sign", str(out), "--key", str(broken))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and str(broken) in bad.stderr
    assert not any(piece in bad.stderr for piece in pieces[1:] if "B" * 8 not in piece)


@pytest.mark.parametrize("command", ["build", "verify-provenance"])
@pytest.mark.parametrize("how", ["option", ENV_KEY, ENV_KEY_FILE])
def test_build_and_verify_hold_no_key(tmp_path, command, how):
    """Issue 34: build and verify-provenance run git, Docker and builds, so they never take a key: the
    old option and a key in their environment are one line, exit 2, before any work (no engine here)."""
    from publish_support import Release

    release = Release(tmp_path / "rel", "sha256:" + "e" * 64)
    key, _public, _keyid = write_key_pair(tmp_path / "keys", "ed25519")
    args = (
        [str(release.manifest), "--lock", str(release.lock), "-o", str(tmp_path / "out")]
        if command == "build"
        else ["sha256:" + "e" * 64, "--lock", str(release.lock), "--artifacts", str(tmp_path / "out")]
    )
    env = {"DOCKER_HOST": "unix:///nonexistent.sock"}
    if how == "option":
        args += ["--signing-key", str(key)]
    else:
        env[how] = key.read_text() if how == ENV_KEY else str(key)
    r = cli(command, *args, env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and "releasekit sign" in r.stderr, r.stderr
    assert "Docker" not in r.stderr and not (tmp_path / "out").exists()
