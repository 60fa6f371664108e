"""``publish.reproducer_keys``: a reproduction is signed by a key of its own, never a release key (issue 43).

The manifest refuses a path that is in both lists (``manifest validate``, exit 2); promote refuses
a reproducer key that is a release key under another name (compared by keyid, exit 2). Without
Docker: the promote flow itself is ``test_reproduce.py::test_reproduce_from_the_registry_with_every_source_gone``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cli_run import invoke
from publish_support import MANIFEST

from releasekit.errors import InputError
from releasekit.publish.reproduced import ReproductionPolicy, reproducer_keys
from releasekit.signing.keys import write_key_pair


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
