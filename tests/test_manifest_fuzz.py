"""Fuzzing the manifest loader: whatever the input, a result or one clear error, never a crash."""

from __future__ import annotations

import io
from pathlib import Path

from cli_run import invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from releasekit.errors import InputError
from releasekit.manifest import validate_manifest_bytes

REPO = Path(__file__).resolve().parents[1]
FF_NEXT_BYTES = (REPO / "manifests" / "ff-next.yaml").read_bytes()

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(["to-be-locked", "TODO", "git", "wheel", "releasekit/v1", "b12x#34", "12.0a", "-x"]),
)
keys = st.one_of(
    st.sampled_from(
        [
            "schema",
            "name",
            "components",
            "kind",
            "repo",
            "merge_plan",
            "pr",
            "after",
            "supersedes",
            "toolchain",
            "validation",
            "cells",
            "checks",
            "defaults",
            "pins",
            "base_image",
            "digest",
            "commit",
        ]
    ),
    st.text(min_size=1, max_size=12),
)
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(keys, inner, max_size=6)),
    max_leaves=40,
)


def _accepts_or_refuses(raw: bytes) -> None:
    try:
        validate_manifest_bytes(raw, "fuzz.yaml")
    except InputError as exc:
        text = exc.one_line()
        assert text and "\n" not in text
        for line in exc.details:
            assert "\n" not in line


@FUZZ
@given(st.binary(max_size=400))
def test_random_bytes(raw):
    _accepts_or_refuses(raw)


@FUZZ
@given(documents)
def test_random_yaml_structures(doc):
    yaml = YAML(typ="safe", pure=True)
    buf = io.StringIO()
    yaml.dump(doc, buf)
    _accepts_or_refuses(buf.getvalue().encode())


@FUZZ
@given(st.integers(min_value=0, max_value=len(FF_NEXT_BYTES) - 1), st.binary(min_size=1, max_size=12))
def test_mutated_real_manifest(offset, junk):
    raw = FF_NEXT_BYTES[:offset] + junk + FF_NEXT_BYTES[offset + len(junk) :]
    _accepts_or_refuses(raw)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(documents)
def test_cli_never_prints_a_traceback(tmp_path, doc):
    yaml = YAML(typ="safe", pure=True)
    path = tmp_path / "fuzz.yaml"
    with path.open("w") as fh:
        yaml.dump(doc, fh)
    r = invoke("manifest", "validate", str(path), "--json")
    assert r.returncode in (0, 1, 2)
    assert "Traceback" not in r.stderr
    assert "internal error" not in r.stderr
