"""``publish.reproducer_keys``: a reproduction is signed by a key of its own, never a release key (issue 43).

The manifest refuses a path that is in both lists (``manifest validate``, exit 2); promote refuses
a reproducer key that is a release key under another name (compared by keyid, exit 2). Without
Docker: the promote flow itself is ``test_reproduce.py::test_reproduce_from_the_registry_with_every_source_gone``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_run import invoke
from publish_support import MANIFEST

from releasekit.errors import InputError
from releasekit.publish.reproduction import (
    ReproductionPolicy,
    ReproductionSubject,
    read_subject,
    reproducer_keys,
    reproduction_checks,
)
from releasekit.records.reproduce_receipt import ReproducedBuild, ReproduceExamined, ReproduceReceipt
from releasekit.signing.keys import load_trusted_keys, write_key_pair


def _manifest(root: Path, publish: str) -> Path:
    path = root / "manifest.yaml"
    path.write_text(MANIFEST + "publish:\n  repository: 127.0.0.1/team/app\n" + publish, encoding="utf-8")
    return path


def test_a_reproducer_key_that_is_a_release_key_is_refused(tmp_path):
    own = _manifest(
        tmp_path,
        "  trusted_keys: [keys/release.pub]\n  require_reproduced: true\n"
        "  reproducer_keys: [keys/reproducer.pub]\n",
    )
    r = invoke("manifest", "validate", str(own))
    assert r.returncode == 0, r.stdout + r.stderr

    shared = _manifest(
        tmp_path,
        "  trusted_keys: [keys/release.pub]\n  require_reproduced: true\n"
        "  reproducer_keys: [./keys/release.pub]\n",
    )
    r = invoke("manifest", "validate", str(shared))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "reproducer_keys names keys/release.pub, which trusted_keys names too" in r.stderr
    assert "Traceback" not in r.stderr

    none = _manifest(tmp_path, "  require_reproduced: true\n")
    r = invoke("manifest", "validate", str(none))
    assert r.returncode == 2 and "require_reproduced needs reproducer_keys" in r.stderr, r.stderr

    # The same key under two names: promote compares keyids and refuses it (exit 2).
    _, release_pub, _ = write_key_pair(tmp_path / "release")
    copy = tmp_path / "reproducer.pub"
    shutil.copyfile(release_pub, copy)
    policy = ReproductionPolicy(
        required=True, channels=frozenset({"stable"}), keys=(copy,), release_keys=(release_pub,)
    )
    with pytest.raises(InputError, match="also a release key"):
        reproducer_keys(policy, [])
    alone = ReproductionPolicy(required=True, channels=frozenset({"stable"}), keys=(copy,))
    with pytest.raises(InputError, match="also a release key"):
        reproducer_keys(alone, [release_pub])  # a --trusted-key
    assert reproducer_keys(alone, []).keyids


def _receipt(path: Path) -> Path:
    ReproduceReceipt(
        digest=f"127.0.0.1:5000/team/app@sha256:{'a' * 64}",
        published_image_id=f"sha256:{'b' * 64}",
        rebuilt_image_id=f"sha256:{'b' * 64}",
        reproduced=True,
        build=ReproducedBuild(
            lock_sha256="c" * 64, manifest_sha256="d" * 64, provenance_sha256="e" * 64, runner="builder-1"
        ),
        reproducer="reproducer-1",
        examined=ReproduceExamined(layers=3, archive_files=4),
    ).write(path)
    return path


def test_sign_reproduce_receipt_signs_a_receipt_only_and_promote_reads_whose_key(tmp_path):
    reproducer, reproducer_pub, _ = write_key_pair(tmp_path / "reproducer")
    release, _, _ = write_key_pair(tmp_path / "release")
    receipt = _receipt(tmp_path / "receipt.json")
    base = ReproductionSubject(
        path=str(receipt),
        digest=f"sha256:{'a' * 64}",
        image_id=f"sha256:{'b' * 64}",
        build_runner="builder-1",
    )
    keys = load_trusted_keys([reproducer_pub])
    unsigned = read_subject(receipt, keys, base)
    assert unsigned.receipt is not None and not unsigned.signed
    assert {f.code for f in reproduction_checks().run(unsigned).findings} == {"REPRODUCTION_UNSIGNED"}

    r = invoke("sign", "--reproduce-receipt", str(receipt), "--key", str(release))
    assert r.returncode == 0, r.stdout + r.stderr
    by_release = read_subject(receipt, keys, base)
    assert by_release.signed and by_release.signer is None
    assert {f.code for f in reproduction_checks().run(by_release).findings} == {"REPRODUCTION_UNTRUSTED"}

    r = invoke("sign", "--reproduce-receipt", str(receipt), "--key", str(reproducer))
    assert r.returncode == 0, r.stdout + r.stderr
    signed = read_subject(receipt, keys, base)
    assert signed.signer == keys.keyids[0] and reproduction_checks().run(signed).passed

    # Not a reproduce receipt (a staging record's shape): one line, exit 2, nothing signed.
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schema": "releasekit.staging/v1", "image_id": "sha256:x"}))
    r = invoke("sign", "--reproduce-receipt", str(other), "--key", str(reproducer))
    assert r.returncode == 2 and "other.json" in r.stderr, r.stdout + r.stderr
    assert not (tmp_path / "other.dsse.json").exists()
    r = invoke("sign", str(tmp_path), "--reproduce-receipt", str(receipt), "--key", str(reproducer))
    assert r.returncode == 2 and "name either a release DIRECTORY or --reproduce-receipt" in r.stderr
