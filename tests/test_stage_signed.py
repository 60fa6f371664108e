"""``releasekit stage`` with signed evidence (issue 34, item 3): a real key, a real registry on
127.0.0.1, the real ``stage`` command.

The attack: ``stage`` staged a tampered image on an unsigned, edited summary (and a GPU host then
ran it by digest). With ``--trusted-key … --require-signed``, or the manifest's ``publish.signed``,
the summary's envelope is verified before anything is pushed.
"""

from __future__ import annotations

import json

import pytest
from cli_run import invoke
from publish_support import MANIFEST, Release

from releasekit.registry import RegistryClient
from releasekit.signing import keyid_of, load_signer
from releasekit.signing.keys import load_public_key
from releasekit.signing.statements import sign_summary_file

pytestmark = pytest.mark.docker


def _stage(release: Release, image: str, staging: str, *extra: str):
    return invoke(
        *("stage", "--image", image, "--lock", str(release.lock), "--staging", staging, "--json"), *extra
    )


def _repos(registry) -> list[str]:
    with RegistryClient(registry.host) as client:
        return [r for r in ("team/a", "team/b", "team/c", "team/d", "team/e") if client.tags(r)]


def test_stage_refuses_an_unsigned_edited_or_untrusted_summary_before_pushing(
    tmp_path, registry, image, keys
):
    strict = ("--trusted-key", str(keys["public"]), "--require-signed")
    # The attacker's summary: written by hand (no key), PASSED for the image.
    forged = Release(tmp_path / "forged", image)
    r = _stage(forged, image, f"{registry.host}/team/a", *strict)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "SIGNATURE_MISSING" in r.stderr and "nothing pushed" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = _stage(forged, image, f"{registry.host}/team/a", "--require-signed")
    assert r.returncode == 1 and "EVIDENCE_UNSIGNED" in r.stderr, r.stderr

    # Signed by the release key, then edited: the envelope no longer covers it.
    edited = Release(tmp_path / "edited", image)
    summary = edited.evidence / "verification_summary.json"
    sign_summary_file(load_signer(keys["private"]), summary, image)
    summary.write_text(summary.read_text().replace('"image_tags": []', '"image_tags": ["x"]'))
    r = _stage(edited, image, f"{registry.host}/team/b", *strict)
    assert r.returncode == 1 and "SIGNED_EVIDENCE_MISMATCH" in r.stderr, r.stderr

    # Signed by a key nobody trusts.
    stranger = Release(tmp_path / "stranger", image)
    sign_summary_file(load_signer(keys["stranger"]), stranger.evidence / "verification_summary.json", image)
    r = _stage(stranger, image, f"{registry.host}/team/c", *strict)
    assert r.returncode == 1 and "SIGNER_UNTRUSTED" in r.stderr, r.stderr
    # Signed and no key given to check it with: missing input.
    r = _stage(stranger, image, f"{registry.host}/team/c")
    assert r.returncode == 2 and "--trusted-key" in r.stderr, r.stderr

    # The manifest's publish.signed requires it without any flag.
    policy = Release(
        tmp_path / "policy",
        image,
        manifest_text=MANIFEST + "publish:\n  repository: x.invalid/y\n  signed: true\n",
    )
    r = _stage(policy, image, f"{registry.host}/team/d")
    assert r.returncode == 1 and "EVIDENCE_UNSIGNED" in r.stderr, r.stderr
    assert _repos(registry) == []  # nothing of any refused run reached the registry


def test_stage_takes_a_signed_summary_and_warns_on_an_unsigned_one(tmp_path, registry, image, keys):
    release = Release(tmp_path / "rel", image)
    summary = release.evidence / "verification_summary.json"
    r = _stage(release, image, f"{registry.host}/team/e")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "releasekit: warning:" in r.stderr and "NOT signed" in r.stderr

    sign_summary_file(load_signer(keys["private"]), summary, image)
    r = invoke(
        *("stage", "--image", image, "--lock", str(release.lock), "--staging", f"{registry.host}/team/e"),
        *("--trusted-key", str(keys["public"]), "--require-signed"),
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"summary signed by {keyid_of(load_public_key(keys['public']))[:16]}" in r.stdout
    assert "warning" not in r.stderr
    staged = json.loads((release.evidence / "staging.json").read_text())
    assert staged["image_id"] == image
