"""The SBOM verify-provenance writes: made from the verified inventory, valid CycloneDX, byte-stable.

The image here is a tar stream read by the verifier's own reader (``inventory_from_tar``): a pip
distribution with its RECORD (one row hashed, one not, one ``.pyc`` it does not list), a locked
git component's distribution, two Debian packages with dpkg's ``status`` and ``.list`` files, a
file no package owns, a symlink and a directory. The SBOM is validated against the CycloneDX 1.6
schema with ``cyclonedx-python-lib``'s own validator. The real image's SBOM (written by a real
``verify-provenance``) is checked in tests/test_verify_tamper.py.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from sbom_support import (
    COMMIT,
    CREATED,
    IMAGE,
    PINNED,
    SP,
    TREE,
    WHEEL,
    image_files,
    sbom_context,
    signed_release,
    swapped_sbom,
)

from releasekit.bounded_read import UnsafeFileError
from releasekit.docker_engine import ImageFacts
from releasekit.provenance.sbom import image_created, make_bom, sbom_text, write_sbom
from releasekit.records.base import RecordError
from releasekit.records.sbom import SBOM_FILE, SbomView, sbom_serial


@pytest.fixture(scope="module")
def doc() -> dict:
    return json.loads(sbom_text(make_bom(sbom_context(), CREATED)))


def _walk(components: list[dict]):
    for c in components:
        yield c
        yield from _walk(c.get("components", []))


def _by_ref(doc: dict) -> dict[str, dict]:
    return {c["bom-ref"]: c for c in _walk(doc["components"])}


def test_the_sbom_is_valid_cyclonedx_1_6_by_the_librarys_own_validator():
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    text = sbom_text(make_bom(sbom_context(), CREATED))
    validator = JsonStrictValidator(SchemaVersion.V1_6)
    assert validator.validate_str(text) is None
    # The validator can fail: the same document with a hash that is not hex is refused.
    broken = text.replace(WHEEL, "not-a-sha256", 1)
    assert broken != text and validator.validate_str(broken) is not None


def test_every_distribution_has_name_version_purl_and_its_hashes(doc):
    refs = _by_ref(doc)
    runtime = refs[f"pypi:{SP}/rk_runtime-0.1.0.dist-info"]
    assert (runtime["name"], runtime["version"], runtime["purl"]) == (
        "rk-runtime",
        "0.1.0",
        "pkg:pypi/rk-runtime@0.1.0",
    )
    assert runtime["hashes"] == [{"alg": "SHA-256", "content": WHEEL}]  # the verifier's own rebuild
    props = {p["name"]: p["value"] for p in runtime["properties"]}
    record = image_files()[f"{SP}/rk_runtime-0.1.0.dist-info/RECORD"]
    assert props["releasekit:record:sha256"] == hashlib.sha256(record).hexdigest()
    assert props["releasekit:vcs:commit"] == COMMIT and props["releasekit:vcs:tree"] == TREE
    assert props["releasekit:component"] == "runtime"
    assert props["releasekit:vcs:pull-request"] == f"#7 {'3' * 40} planned"
    assert runtime["externalReferences"] == [
        {"type": "vcs", "url": "https://example.org/rk/runtime.git", "comment": f"commit {COMMIT}"}
    ]
    six = refs[f"pypi:{SP}/six-1.16.0.dist-info"]
    assert six["purl"] == "pkg:pypi/six@1.16.0" and six["hashes"] == [{"alg": "SHA-256", "content": PINNED}]
    plain = refs[f"pypi:{SP}/Plain_Dist-2.0.dist-info"]
    assert plain["purl"] == "pkg:pypi/plain-dist@2.0" and "hashes" not in plain


def _sha(path: str) -> list[dict]:
    data = image_files()[path]
    assert isinstance(data, bytes)
    return [{"alg": "SHA-256", "content": hashlib.sha256(data).hexdigest()}]


def _listed(holder: dict) -> dict[str, str]:
    """A component's (or the image's) listed files: path -> sha256 (or "-> target" for a link)."""
    out: dict[str, str] = {}
    for prop in holder.get("properties", []):
        if prop["name"] == "releasekit:file":
            digest, path = prop["value"].split("  ", 1)
            out[path] = digest
        elif prop["name"] in ("releasekit:symlink", "releasekit:hardlink"):
            path, target = prop["value"].split(" -> ", 1)
            out[path] = "-> " + target
    return out


def _sha(path: str) -> str:
    data = image_files()[path]
    assert isinstance(data, bytes)
    return hashlib.sha256(data).hexdigest()


def test_every_file_outside_a_record_hash_is_listed_with_its_sha256(doc):
    refs = _by_ref(doc)
    image = doc["metadata"]["component"]
    holders = [image, *refs.values()]
    listed = {path: digest for h in holders for path, digest in _listed(h).items()}
    # RECORD vouches for __init__.py and six.py by hash; every other file and link is listed, once.
    assert sum(len(_listed(h)) for h in holders) == len(listed)
    expected = {p for p in image_files() if p not in (f"{SP}/rk_runtime/__init__.py", f"{SP}/six.py")}
    assert set(listed) == expected
    for path, data in image_files().items():
        if path in listed and isinstance(data, bytes):
            assert listed[path] == _sha(path), path
    runtime = _listed(refs[f"pypi:{SP}/rk_runtime-0.1.0.dist-info"])
    assert f"{SP}/rk_runtime/__pycache__/__init__.cpython-311.pyc" in runtime  # its source's owner
    assert f"{SP}/rk_runtime-0.1.0.dist-info/RECORD" in runtime  # RECORD lists itself without a hash
    libc = refs["deb:libc6:amd64"]
    assert libc["purl"] == "pkg:deb/debian/libc6@2.36-9?arch=amd64"
    assert _listed(libc) == {"/lib/libc.so.6": _sha("/lib/libc.so.6")}
    assert "deb:gone" not in refs  # not installed
    # No package owns these: the image lists them itself.
    loose = _listed(image)
    assert loose["/etc/hostname.local"] == _sha("/etc/hostname.local")
    assert loose["/usr/bin/sh"] == "-> ../../bin/bash"


def test_the_sbom_names_its_image_and_is_byte_stable(tmp_path, doc):
    assert doc["serialNumber"] == sbom_serial(IMAGE).urn
    assert doc["metadata"]["component"]["version"] == IMAGE
    assert doc["metadata"]["timestamp"] == "2023-11-14T22:13:20.123456+00:00"
    first = write_sbom(sbom_context(), CREATED, tmp_path / SBOM_FILE)
    again = write_sbom(sbom_context(), CREATED, tmp_path / "again.json")
    assert first == again == (tmp_path / SBOM_FILE).read_text(encoding="utf-8")
    view = SbomView.from_json(json.loads(first))
    assert view.names_image(IMAGE) and not view.names_image("sha256:" + "cd" * 32)
    # files: all but the two a RECORD row vouches for and the symlink
    assert view.counts() == {"container": 1, "library": 5, "files": len(image_files()) - 3}
    with pytest.raises(RecordError, match="not a CycloneDX document"):
        SbomView.from_json({"bomFormat": "SPDX"})


def test_a_symlink_planted_at_the_sbom_path_is_refused_not_followed(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n")
    release = tmp_path / "release"
    release.mkdir()
    (release / SBOM_FILE).symlink_to(outside)
    (release / f"{SBOM_FILE}.tmp").symlink_to(outside)  # the name a naive atomic write would open
    # Like every release-directory write (atomic.write_atomic), a link at the target is refused.
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        write_sbom(sbom_context(), CREATED, release / SBOM_FILE)
    assert outside.read_text() == "keep me\n"
    # No temporary file left (the planted links are the attacker's, left as they were).
    assert sorted(p.name for p in release.iterdir()) == [SBOM_FILE, f"{SBOM_FILE}.tmp"]
    (release / SBOM_FILE).unlink()
    text = write_sbom(sbom_context(), CREATED, release / SBOM_FILE)
    assert (release / SBOM_FILE).read_text() == text and outside.read_text() == "keep me\n"
    assert oct((release / SBOM_FILE).stat().st_mode & 0o777) == "0o644"


def test_image_created_reads_docker_times():
    assert image_created("2024-01-02T03:04:05Z").isoformat() == "2024-01-02T03:04:05+00:00"
    assert image_created(None).year == 1970


# --- publish: the gate reads it, attaches it, lists it in RELEASE.md; promote reads it back ------


def _gate(release, image_id: str):
    from publish_support import IMAGE_CMD, IMAGE_ENV, gate

    return gate(release, ImageFacts(id=image_id, env=dict(IMAGE_ENV), cmd=list(IMAGE_CMD)))


def test_the_gate_refuses_an_sbom_of_another_image_or_not_cyclonedx(tmp_path):
    from publish_support import Release

    image_id = "sha256:" + "4" * 64
    release = Release(tmp_path, image_id)
    assert _gate(release, image_id).passed  # no SBOM: nothing to say (older release directories)
    (release.evidence / SBOM_FILE).write_text(sbom_text(make_bom(sbom_context(image_id), CREATED)))
    report = _gate(release, image_id)
    assert report.passed, [f.render() for f in report.findings]
    (release.evidence / SBOM_FILE).write_text(sbom_text(make_bom(sbom_context(IMAGE), CREATED)))
    report = _gate(release, image_id)
    assert [f.code for f in report.findings.errors] == ["SBOM_WRONG_IMAGE"]
    (release.evidence / SBOM_FILE).write_text(json.dumps({"bomFormat": "SPDX"}))
    assert [f.code for f in _gate(release, image_id).findings.errors] == ["SBOM_INVALID"]


@pytest.mark.docker
def test_publish_attaches_the_sbom_lists_it_and_promote_reads_it_back(tmp_path, image):
    from cli_run import invoke
    from publish_support import Release, publish_args

    from releasekit.demo.localregistry import start_local_registry
    from releasekit.registry import RegistryClient

    release = Release(tmp_path / "rel", image)
    text = sbom_text(make_bom(sbom_context(image), CREATED))
    (release.evidence / SBOM_FILE).write_text(text, encoding="utf-8")
    with start_local_registry(tmp_path / "registry") as registry:
        target = f"{registry.host}/team/sbom"
        published = invoke(*publish_args(release, image, target, "beta"))
        assert published.returncode == 0, published.stdout + published.stderr
        result = json.loads(published.stdout)
        with RegistryClient(registry.host) as client:
            attached = json.loads(client.get_manifest("team/sbom", result["attachment"]["tag"]).data)
            layers = {
                layer["annotations"]["org.opencontainers.image.title"]: layer for layer in attached["layers"]
            }
            assert layers[SBOM_FILE]["mediaType"] == "application/vnd.cyclonedx+json"
            assert client.get_blob("team/sbom", layers[SBOM_FILE]["digest"]) == text.encode()  # byte for byte
        notes = Path(result["release_notes"]).read_text(encoding="utf-8")
        sha = hashlib.sha256(text.encode()).hexdigest()
        assert (
            f"- `{SBOM_FILE}` (CycloneDX 1.6, attached): serial `{sbom_serial(image).urn}`, sha256 `{sha}`"
            in notes
        )
        counts = SbomView.from_json(json.loads(text)).counts()
        assert f"- components and files: {', '.join(f'{n} {k}' for k, n in counts.items())}" in notes
        assert counts["files"] > 0 and counts["library"] == 5  # three distributions, two Debian packages
        promoted = invoke("promote", "--from", f"{target}:beta", "--to", f"{target}:stable", "--json")
        assert promoted.returncode == 0, promoted.stdout + promoted.stderr
        assert any(
            c["name"] == "the SBOM describes this image" and c["passed"]
            for c in json.loads(promoted.stdout)["gate"]["checks"]
        )
        # An SBOM of another image is refused before anything reaches the registry.
        (release.evidence / SBOM_FILE).write_text(
            sbom_text(make_bom(sbom_context(IMAGE), CREATED)), encoding="utf-8"
        )
        refused = invoke(*publish_args(release, image, f"{registry.host}/team/sbom-wrong", "beta"))
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "SBOM_WRONG_IMAGE" in refused.stdout


# --- issue 34 item 3, issue 36: the SBOM signed and named by sha256 in the signed summary ----------


def test_the_gate_refuses_an_sbom_other_than_the_one_the_summary_names(tmp_path):
    image_id = "sha256:" + "4" * 64
    release, text = signed_release(tmp_path, image_id, None)
    assert _gate(release, image_id).passed
    swapped = swapped_sbom(text)
    assert SbomView.from_json(json.loads(swapped)).names_image(image_id)  # the old check was satisfied
    (release.evidence / SBOM_FILE).write_text(swapped, encoding="utf-8")
    report = _gate(release, image_id)
    assert [f.code for f in report.findings.errors] == ["SBOM_MISMATCH"]
    assert hashlib.sha256(text.encode()).hexdigest() in report.findings.errors[0].message
    (release.evidence / SBOM_FILE).unlink()
    assert [f.code for f in _gate(release, image_id).findings.errors] == ["SBOM_MISSING"]


def _signed_verdict(release, image_id: str, public: Path, *, required: bool):
    from releasekit.publish.evidence import load_evidence
    from releasekit.publish.signatures import check_signed, local_envelopes
    from releasekit.signing import load_trusted_keys

    evidence = load_evidence(release.evidence, release.receipts)
    return check_signed(
        local_envelopes(release.evidence),
        load_trusted_keys([public]),
        image_id=image_id,
        provenance=evidence.provenance.text,
        summary=evidence.verification_summary.text,
        where="",
        sbom=evidence.sbom_text(),
        sbom_named=evidence.sbom_named(),
        required=required,
    )


def test_a_signed_sbom_verifies_and_a_swapped_or_unsigned_one_is_a_finding(tmp_path):
    from releasekit.records.dsse import SBOM_ENVELOPE_FILE
    from releasekit.signing import keyid_of, load_trusted_keys, verify_envelope
    from releasekit.signing.keys import load_public_key, write_key_pair
    from releasekit.signing.statements import SBOM_PAYLOAD_TYPE

    private, public, _ = write_key_pair(tmp_path / "key")
    image_id = "sha256:" + "4" * 64
    release, text = signed_release(tmp_path / "rel", image_id, private)
    envelope = release.evidence / SBOM_ENVELOPE_FILE
    assert SBOM_ENVELOPE_FILE == "sbom.cdx.dsse.json"
    verified = verify_envelope(
        envelope.read_bytes(), load_trusted_keys([public]), payload_type=SBOM_PAYLOAD_TYPE
    )
    assert verified.payload == text.encode() and verified.payload_type == "application/vnd.cyclonedx+json"
    verdict = _signed_verdict(release, image_id, public, required=True)
    assert list(verdict.findings) == []
    assert verdict.signers[SBOM_ENVELOPE_FILE] == keyid_of(load_public_key(public))

    # Swapped after signing: the envelope no longer covers it.
    (release.evidence / SBOM_FILE).write_text(swapped_sbom(text), encoding="utf-8")
    verdict = _signed_verdict(release, image_id, public, required=True)
    assert [f.code for f in verdict.findings.errors] == ["SIGNED_EVIDENCE_MISMATCH"]

    # Unsigned (the envelope removed): an error when signing is required, a warning otherwise.
    (release.evidence / SBOM_FILE).write_text(text, encoding="utf-8")
    envelope.unlink()
    verdict = _signed_verdict(release, image_id, public, required=True)
    assert [f.code for f in verdict.findings.errors] == ["SBOM_UNSIGNED"]
    assert "refused" in verdict.findings.errors[0].message
    verdict = _signed_verdict(release, image_id, public, required=False)
    assert verdict.findings.passed and [f.code for f in verdict.findings] == ["SBOM_UNSIGNED"]


def test_an_sbom_the_signed_summary_does_not_name_is_unsigned(tmp_path):
    from releasekit.signing import load_signer
    from releasekit.signing.keys import write_key_pair
    from releasekit.signing.statements import sign_summary_file

    private, public, _ = write_key_pair(tmp_path / "key")
    image_id = "sha256:" + "4" * 64
    release, _text = signed_release(tmp_path / "rel", image_id, private)
    release.write_verification()  # a summary (re-signed) that names no SBOM
    sign_summary_file(load_signer(private), release.evidence / "verification_summary.json", image_id)
    verdict = _signed_verdict(release, image_id, public, required=True)
    assert [f.code for f in verdict.findings.errors] == ["SBOM_UNSIGNED"]
    assert "names no SBOM" in verdict.findings.errors[0].message
