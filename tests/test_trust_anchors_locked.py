"""Issue 43, "trust anchors bound to the locked manifest": stage, validate --staged and test --staged
(promote: tests/test_manifest_trusted_keys.py, against a registry) take trusted keys only from
``--trusted-key`` or from the manifest whose sha256 the lock records. Another manifest, naming an
attacker's key in its ``publish.trusted_keys``, is ``LOCK_MANIFEST_MISMATCH`` (exit 1, one line),
refused before Docker is reached (DOCKER_HOST points at nothing here) and before anything is read
with that key.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cli_run import invoke
from publish_support import MANIFEST, Release, staging_file

from releasekit.errors import InputError, LockManifestMismatch
from releasekit.manifest import load_manifest, trusted_key_files_for_lock
from releasekit.signing.keys import write_key_pair

IMAGE = "sha256:" + "6" * 64
NO_DOCKER = {"DOCKER_HOST": "unix:///nonexistent/docker.sock"}


def _keyed(root: Path, public: Path, extra: str = "") -> Path:
    """A manifest whose publish.trusted_keys names ``public`` (copied beside it as keys/release.pub)."""
    (root / "keys").mkdir(parents=True, exist_ok=True)
    shutil.copy2(public, root / "keys" / "release.pub")
    manifest = root / "manifest.yaml"
    section = (
        "publish:\n  repository: 127.0.0.1:1/team/x\n  signed: true\n  trusted_keys: [keys/release.pub]\n"
    )
    manifest.write_text(MANIFEST + section + extra, encoding="utf-8")
    return manifest


@pytest.fixture
def scene(tmp_path):
    """The release (its lock made from a manifest naming the release key) and another manifest, naming
    the attacker's key, that the lock was not made from."""
    _, release_pub, _ = write_key_pair(tmp_path / "release-key", "ed25519")
    _, attacker_pub, _ = write_key_pair(tmp_path / "attacker-key", "ed25519")
    good = _keyed(tmp_path / "good", release_pub)
    release = Release(tmp_path / "good", IMAGE, manifest_text=good.read_text())
    other = _keyed(tmp_path / "attacker", attacker_pub, "# the attacker's copy\n")
    return release, other


def _refused(run) -> None:
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stderr.count("\n") == 1 and "LOCK_MANIFEST_MISMATCH" in run.stderr, run.stderr
    assert "Docker" not in run.stderr


def test_stage_with_another_manifest_is_refused(scene, tmp_path):
    release, other = scene
    out = tmp_path / "staged"
    run = invoke(
        "stage", "--image", IMAGE, "--lock", str(release.lock), "--manifest", str(other),
        "--require-signed", "-o", str(out), env=NO_DOCKER,
    )  # fmt: skip
    _refused(run)
    assert not (out / "staging.json").exists()


def test_validate_staged_with_another_manifest_is_refused(scene, tmp_path):
    release, other = scene
    staged = staging_file(tmp_path / "stg", IMAGE)
    run = invoke(
        "validate", str(other), "--image", IMAGE, "--staged", str(staged), "--lock", str(release.lock),
        "--require-signed", "-o", str(tmp_path / "receipts"), env=NO_DOCKER,
    )  # fmt: skip
    _refused(run)


def test_test_staged_with_another_manifest_is_refused(scene, tmp_path):
    release, other = scene
    staged = staging_file(tmp_path / "stg", IMAGE)
    run = invoke(
        "test", str(other), "--image", IMAGE, "--staged", str(staged), "--lock", str(release.lock),
        "--require-signed", "-o", str(tmp_path / "tests"), env=NO_DOCKER,
    )  # fmt: skip
    _refused(run)


def test_the_keys_come_from_the_locked_manifest_or_trusted_key_only(scene, tmp_path):
    release, other = scene
    locked = load_manifest(release.manifest)
    lock_sha = locked.sha256
    assert trusted_key_files_for_lock(locked, lock_sha, [], "t") == locked.trusted_key_files()
    given = [tmp_path / "given.pub"]
    assert trusted_key_files_for_lock(locked, lock_sha, given, "t") == given
    with pytest.raises(LockManifestMismatch, match="LOCK_MANIFEST_MISMATCH"):
        trusted_key_files_for_lock(load_manifest(other), lock_sha, given, "t")
    # No lock to bind the manifest to: its keys are not trusted; --trusted-key still is.
    with pytest.raises(InputError, match="--lock"):
        trusted_key_files_for_lock(load_manifest(other), None, [], "t")
    assert trusted_key_files_for_lock(load_manifest(other), None, given, "t") == given
