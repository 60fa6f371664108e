"""The manifest names who may sign a release: ``publish.trusted_keys`` (issue 36, "signed by default").

The public key lives in the repository beside the manifest; publish and promote use it when no
``--trusted-key`` is given, so the workflow runs them with ``--require-signed`` and nothing else.
Against a real registry on 127.0.0.1, with the evidence signed by ``releasekit sign``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_run import invoke
from publish_support import MANIFEST, Release, publish_args

from releasekit.registry import RegistryClient
from releasekit.signing.keys import keyid_of, load_public_key, write_key_pair

pytestmark = pytest.mark.docker


def _release(root: Path, image: str, target: str, public: Path) -> Release:
    (root / "keys").mkdir(parents=True)
    shutil.copy2(public, root / "keys" / "release.pub")
    section = f"publish:\n  repository: {target}\n  signed: true\n  trusted_keys: [keys/release.pub]\n"
    return Release(root, image, manifest_text=MANIFEST + section)


def _sign_in_order(release: Release, key: Path) -> None:
    """As the workflow's sign jobs do: the evidence once verified, then the receipts."""
    assert invoke("sign", str(release.evidence), "--key", str(key)).returncode == 0
    receipts = ("--receipts", str(release.receipts))
    assert invoke("sign", str(release.evidence), *receipts, "--key", str(key)).returncode == 0


def _tags(registry, repository: str) -> list[str]:
    with RegistryClient(registry.host) as client:
        return client.tags(repository)


def test_publish_and_promote_trust_the_key_the_manifest_names(tmp_path, registry, image):
    private, public, _ = write_key_pair(tmp_path / "release-key", "ecdsa-p256")
    stranger, stranger_pub, _ = write_key_pair(tmp_path / "stranger-key", "ed25519")
    repo = "team/manifest-keys"
    target = f"{registry.host}/{repo}"

    # Signed by another key: refused under --require-signed, nothing tagged.
    other = _release(tmp_path / "other", image, target, public)
    _sign_in_order(other, stranger)
    refused = invoke(*publish_args(other, image, target, "beta"), "--require-signed")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    codes = {f["code"] for f in json.loads(refused.stdout)["gate"]["findings"]["findings"]}
    assert "SIGNER_UNTRUSTED" in codes
    assert _tags(registry, repo) == []

    # Unsigned: refused the same way (publish.signed and --require-signed).
    unsigned = _release(tmp_path / "unsigned", image, target, public)
    r = invoke(*publish_args(unsigned, image, target, "beta"), "--require-signed")
    assert r.returncode == 1 and _tags(registry, repo) == []

    # Signed by the key the manifest names: published, no --trusted-key anywhere.
    good = _release(tmp_path / "good", image, target, public)
    _sign_in_order(good, private)
    r = invoke(*publish_args(good, image, target, "beta"), "--require-signed")
    assert r.returncode == 0, r.stdout + r.stderr
    keyid = keyid_of(load_public_key(public))
    assert set(json.loads(r.stdout)["signers"].values()) == {keyid}

    # Issue 43: another manifest naming the stranger's key as trusted is not a trust anchor: it is not
    # the manifest the lock was made from (LOCK_MANIFEST_MISMATCH, exit 1), and nothing is tagged.
    forged = tmp_path / "forged"
    (forged / "keys").mkdir(parents=True)
    shutil.copy2(stranger_pub, forged / "keys" / "release.pub")
    (forged / "manifest.yaml").write_text(
        good.manifest.read_text() + "# the same text, its keys/ the stranger's\n",
        encoding="utf-8",
    )
    other_manifest = invoke(
        "promote", "--from", f"{target}:beta", "--to", f"{target}:stable",
        "--manifest", str(forged / "manifest.yaml"), "--require-signed",
    )  # fmt: skip
    assert other_manifest.returncode == 1, other_manifest.stdout + other_manifest.stderr
    assert "LOCK_MANIFEST_MISMATCH" in other_manifest.stderr and other_manifest.stderr.count("\n") == 1
    assert "stable" not in _tags(registry, repo)

    promoted = invoke(
        "promote", "--from", f"{target}:beta", "--to", f"{target}:stable", "--json",
        "--manifest", str(good.manifest), "--require-signed",
    )  # fmt: skip
    assert promoted.returncode == 0, promoted.stdout + promoted.stderr
    assert set(json.loads(promoted.stdout)["signers"].values()) == {keyid}
    assert "stable" in _tags(registry, repo)
