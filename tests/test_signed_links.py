"""Every link of the evidence chain signed (issue 34, item 3): ``staging.json``, receipts and test
receipts carry a DSSE envelope by the host that wrote them, and every reader verifies it.

The attacks, built for real: ``publish --staged --trusted-key --require-signed`` published with
forged, unsigned receipts; a GPU host ran containers on an edited ``staging.json``. Real keys, a real
registry on 127.0.0.1, the real ``stage``, ``validate``, ``test``, ``publish`` and ``promote`` commands.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_run import invoke
from publish_support import REQUIRED_CELLS, Release, publish_args, staging_file

from releasekit.errors import InputError
from releasekit.records.staging import STAGING_ENVELOPE_FILE
from releasekit.registry import RegistryClient
from releasekit.signing import SignatureError, keyid_of, load_signer
from releasekit.signing.keys import load_public_key
from releasekit.signing.statements import (
    sign_receipt_file,
    sign_staging_file,
    sign_statement_file,
    sign_summary_file,
    sign_test_receipt_file,
)
from releasekit.signing.verify import read_signed_staging


def _code(exc: pytest.ExceptionInfo[SignatureError]) -> str:
    return exc.value.code


def test_staging_json_is_verified_before_any_field_is_used(tmp_path, keys):
    public = [keys["public"]]
    # Signed by the staging host: verified, the signer named.
    good = staging_file(tmp_path / "good")
    sign_staging_file(load_signer(keys["private"]), good)
    read = read_signed_staging(good, public, required=True, what="validate")
    assert read.signer == keyid_of(load_public_key(keys["public"])) and read.warning is None

    # Edited after signing (pointed at another repository): the envelope no longer covers it.
    good.write_text(good.read_text().replace("team/staging", "team/evil"))
    with pytest.raises(SignatureError) as edited:
        read_signed_staging(good, public, required=True, what="validate")
    assert _code(edited) == "SIGNED_EVIDENCE_MISMATCH" and "staging.json" in str(edited.value)

    # Unsigned: refused when required or when a key is given; a loud warning otherwise.
    bare = staging_file(tmp_path / "bare")
    for trusted, required in ((public, False), ([], True)):
        with pytest.raises(SignatureError) as unsigned:
            read_signed_staging(bare, trusted, required=required, what="test")
        assert _code(unsigned) == "STAGING_UNSIGNED"
    allowed = read_signed_staging(bare, [], required=False, what="test")
    assert allowed.signer is None and allowed.warning is not None and "STAGING_UNSIGNED" in allowed.warning

    # Signed by a key nobody trusts; signed and no key to check it with is missing input (exit 2).
    foreign = staging_file(tmp_path / "foreign")
    sign_staging_file(load_signer(keys["stranger"]), foreign)
    with pytest.raises(SignatureError) as untrusted:
        read_signed_staging(foreign, public, required=True, what="publish")
    assert _code(untrusted) == "SIGNER_UNTRUSTED"
    with pytest.raises(InputError):
        read_signed_staging(foreign, [], required=False, what="publish")

    # A receipt's envelope cannot stand in for staging.json's: another payload type.
    swapped = staging_file(tmp_path / "swapped")
    receipt_env = Release(tmp_path / "rel", "sha256:" + "1" * 64).receipts / f"{REQUIRED_CELLS[0]}.json"
    envelope = sign_receipt_file(load_signer(keys["private"]), receipt_env)
    assert envelope is not None
    (swapped.parent / STAGING_ENVELOPE_FILE).write_bytes(envelope.read_bytes())
    with pytest.raises(SignatureError) as kind:
        read_signed_staging(swapped, public, required=True, what="publish")
    assert _code(kind) == "SIGNATURE_INVALID"


def test_a_host_signs_only_the_record_it_names(tmp_path, keys):
    signer = load_signer(keys["private"])
    release = Release(tmp_path, "sha256:" + "1" * 64)
    summary = release.evidence / "verification_summary.json"
    for sign in (sign_receipt_file, sign_test_receipt_file, sign_staging_file):
        with pytest.raises(SignatureError, match="refusing to sign"):
            sign(signer, summary)
    receipt = release.receipts / f"{REQUIRED_CELLS[0]}.json"
    envelope = sign_receipt_file(signer, receipt)
    assert envelope == receipt.with_name(f"{REQUIRED_CELLS[0]}.dsse.json")
    from releasekit.records.receipt import RECEIPT_PAYLOAD_TYPE, read_receipts
    from releasekit.signing import load_trusted_keys, verify_envelope

    verified = verify_envelope(
        envelope.read_bytes(), load_trusted_keys([keys["public"]]), payload_type=RECEIPT_PAYLOAD_TYPE
    )
    assert verified.payload == receipt.read_bytes()
    # The envelope beside the receipts is not read as one more receipt.
    assert sorted(r.cell_id for r in read_receipts(release.receipts)) == sorted(REQUIRED_CELLS)
    # No signer: a stale envelope is removed, so an unsigned run never leaves an old signature.
    assert sign_receipt_file(None, receipt) is None and not envelope.exists()


# --- the chain across hosts: stage, a GPU host, publish and promote ---------------------------------


def _staged_release(root: Path, image: str, registry, keys: dict[str, Path], repo: str) -> Release:
    """Build host: evidence signed, the candidate staged with ``stage --signing-key``; the receipts
    then say they ran the staged digest (as a GPU host's validate writes them), unsigned."""
    release = Release(root, image)
    signer = load_signer(keys["private"])
    sign_statement_file(signer, release.evidence / "provenance.intoto.json")
    sign_summary_file(signer, release.evidence / "verification_summary.json", image)
    r = invoke(
        *("stage", "--image", image, "--lock", str(release.lock), "--staging", f"{registry.host}/{repo}"),
        *("--trusted-key", str(keys["public"]), "--require-signed", "--signing-key", str(keys["private"])),
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert (release.evidence / STAGING_ENVELOPE_FILE).is_file()
    digest = json.loads((release.evidence / "staging.json").read_text())["digest"]
    for cell in REQUIRED_CELLS:
        path = release.receipts / f"{cell}.json"
        data = json.loads(path.read_text())
        data["image_digest"] = digest
        path.write_text(json.dumps(data))
    return release


def _tags(registry, repo: str) -> list[str]:
    with RegistryClient(registry.host) as client:
        return client.tags(repo)


def _publish(release: Release, image: str, target: str, *extra: str) -> tuple[int, dict | None, str]:
    r = invoke(
        *publish_args(release, image, target, "beta"),
        *("--staged", str(release.evidence / "staging.json")),
        *extra,
    )
    try:
        return r.returncode, json.loads(r.stdout), r.stderr
    except ValueError:
        return r.returncode, None, r.stderr


def _errors(result: dict) -> list[str]:
    return sorted({f["code"] for f in result["gate"]["findings"]["findings"] if f["severity"] == "error"})


@pytest.mark.docker
def test_publish_staged_refuses_forged_receipts_and_takes_a_signed_chain(tmp_path, registry, image, keys):
    strict = ("--trusted-key", str(keys["public"]), "--require-signed")
    release = _staged_release(tmp_path / "rel", image, registry, keys, "team/links-stage")
    target = f"{registry.host}/team/links"

    # The attack: receipts written by hand (no host signed them). Refused, nothing tagged.
    code, out, stderr = _publish(release, image, target, *strict)
    assert code == 1 and out is not None, stderr
    assert _errors(out) == ["RECEIPT_UNSIGNED"]
    assert _tags(registry, "team/links") == []

    # The same receipts signed by a key nobody trusts.
    stranger = load_signer(keys["stranger"])
    for cell in REQUIRED_CELLS:
        sign_receipt_file(stranger, release.receipts / f"{cell}.json")
    code, out, stderr = _publish(release, image, target, *strict)
    assert code == 1 and out is not None and _errors(out) == ["SIGNER_UNTRUSTED"], stderr

    # Signed by the validating host, then one edited (a failing cell made to pass).
    host = load_signer(keys["private"])
    for cell in REQUIRED_CELLS:
        sign_receipt_file(host, release.receipts / f"{cell}.json")
    edited = release.receipts / f"{REQUIRED_CELLS[0]}.json"
    original = edited.read_text()
    edited.write_text(original.replace('"duration_s": 60.0', '"duration_s": 61.0'))
    code, out, stderr = _publish(release, image, target, *strict)
    assert code == 1 and out is not None and _errors(out) == ["SIGNED_EVIDENCE_MISMATCH"], stderr
    assert _tags(registry, "team/links") == []

    # Without --require-signed and with a key, an unsigned receipt is said out loud, not silent.
    edited.write_text(original)
    (release.receipts / f"{REQUIRED_CELLS[1]}.dsse.json").unlink()
    code, out, stderr = _publish(release, image, f"{registry.host}/team/links-loud", *strict[:2])
    assert code == 0 and out is not None and _errors(out) == [], stderr
    assert f"receipts/{REQUIRED_CELLS[1]}.json is NOT signed" in stderr

    # The whole chain signed: published, the receipt envelopes attached, and promote verifies them again.
    sign_receipt_file(host, release.receipts / f"{REQUIRED_CELLS[1]}.json")
    code, out, stderr = _publish(release, image, target, *strict)
    assert code == 0, stderr
    assert out is not None and "warning" not in stderr
    receipt_envelopes = [f"receipts/{cell}.dsse.json" for cell in REQUIRED_CELLS]
    assert set(receipt_envelopes) <= set(out["signed"]["files"])
    assert set(receipt_envelopes) <= set(out["signers"])
    r = invoke(*("promote", "--from", f"{target}:beta", "--to", f"{target}:stable", "--json"), *strict)
    assert r.returncode == 0, r.stdout + r.stderr
    assert set(receipt_envelopes) <= set(json.loads(r.stdout)["signers"])


def _containers_of(client, image: str) -> int:
    return len(client.containers.list(all=True, filters={"ancestor": image}))


@pytest.mark.docker
def test_a_gpu_host_refuses_an_edited_or_unsigned_staging_json_before_anything_runs(
    tmp_path, registry, image, keys, docker_client
):
    from releasekit.docker_engine import LazyEngine
    from releasekit.staging.candidate import resolve_candidate

    strict = ("--trusted-key", str(keys["public"]), "--require-signed")
    release = _staged_release(tmp_path / "rel", image, registry, keys, "team/links-gpu")
    staging = release.evidence / "staging.json"
    record = json.loads(staging.read_text())
    reference = f"{record['registry']}/{record['repository']}@{record['digest']}"

    # Correctly signed: the candidate is pulled by digest and proven (a real pull from the registry).
    candidate = resolve_candidate(
        reference, staging, trusted_key_files=[keys["public"]], require_signed=True, engine=LazyEngine()
    )
    assert candidate.image == image and candidate.digest == record["digest"] and candidate.warning is None

    # The attack: staging.json edited on its way to the GPU host (here: its summary hash, any edit does).
    staging.write_text(staging.read_text().replace(record["verification_summary_sha256"], "0" * 64))
    before = _containers_of(docker_client, image)
    validate = (
        "validate",
        str(release.manifest),
        "--image",
        reference,
        "--staged",
        str(staging),
        "--dry-run",
    )
    r = invoke(*validate, *strict)
    assert r.returncode == 1 and "SIGNED_EVIDENCE_MISMATCH" in r.stderr, r.stdout + r.stderr
    out = tmp_path / "tests-out"
    test = ("test", str(release.manifest), "--image", reference, "--staged", str(staging), "-o", str(out))
    r = invoke(*test, *strict)
    assert r.returncode == 1 and "SIGNED_EVIDENCE_MISMATCH" in r.stderr, r.stdout + r.stderr
    code, _, stderr = _publish(release, image, f"{registry.host}/team/links-edited", *strict)
    assert code == 1 and "SIGNED_EVIDENCE_MISMATCH" in stderr, stderr

    # Unsigned (the envelope removed) under --require-signed; signed by a stranger.
    (release.evidence / STAGING_ENVELOPE_FILE).unlink()
    r = invoke(*validate, "--require-signed")
    assert r.returncode == 1 and "STAGING_UNSIGNED" in r.stderr, r.stdout + r.stderr
    sign_staging_file(load_signer(keys["stranger"]), staging)
    r = invoke(*test, *strict)
    assert r.returncode == 1 and "SIGNER_UNTRUSTED" in r.stderr, r.stdout + r.stderr
    assert _containers_of(docker_client, image) == before  # no container of the candidate was ever created
    assert not out.exists() or not any(out.iterdir())
    assert _tags(registry, "team/links-edited") == []
