"""``releasekit sign``: the evidence of a release directory signed after verification, in a process of its own.

Issue 34 ("keys apart"): build and verify-provenance hold no key; this command, which starts no other
program, reads it only once every input was checked, from ``--key`` or ``--key-fd`` (issue 43: never the
environment; a key file others may read is refused; a descriptor is read bounded, within a deadline).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import pytest
from publish_support import Release, publish_args, staging_file
from signing_support import cli

from releasekit.records.intoto import VERIFICATION_SUMMARY_TYPE
from releasekit.records.provenance import SLSA_PROVENANCE_V1
from releasekit.records.sbom import SBOM_MEDIA
from releasekit.signing.dsse import verify_envelope
from releasekit.signing.keys import ENV_KEY, ENV_KEY_FILE, load_trusted_keys, write_key_pair
from releasekit.signing.verify import verify_statement_envelope

IMAGE = "sha256:" + "5" * 64
ENVELOPES = ("provenance.intoto.dsse.json", "sbom.cdx.dsse.json", "verification_summary.dsse.json")
SBOM_TEXT = '{"bomFormat": "CycloneDX", "specVersion": "1.6", "serialNumber": "urn:uuid:x"}\n'


def _release(tmp_path: Path) -> Release:
    """A release directory as verify-provenance leaves it: provenance, SBOM, the summary naming both, unsigned."""
    release = Release(tmp_path / "rel", IMAGE)
    (release.evidence / "sbom.cdx.json").write_text(SBOM_TEXT, encoding="utf-8")
    release.write_verification(sbom_sha256=hashlib.sha256(SBOM_TEXT.encode()).hexdigest())
    return release


def _envelopes(release: Release) -> dict[str, bytes]:
    return {
        name: (release.evidence / name).read_bytes()
        for name in ENVELOPES
        if (release.evidence / name).exists()
    }


def _verify_all(release: Release, public: Path) -> None:
    trusted = load_trusted_keys([public])
    out = release.evidence
    for name, statement, predicate in (
        ("provenance.intoto.dsse.json", "provenance.intoto.json", SLSA_PROVENANCE_V1),
        ("verification_summary.dsse.json", "verification_summary.json", VERIFICATION_SUMMARY_TYPE),
    ):
        verify_statement_envelope(
            (out / name).read_bytes(),
            trusted,
            where=name,
            predicate_type=predicate,
            image_id=IMAGE,
            copy=(out / statement).read_bytes(),
            copy_name=statement,
        )
    sbom = verify_envelope((out / "sbom.cdx.dsse.json").read_bytes(), trusted, payload_type=SBOM_MEDIA)
    assert sbom.payload == SBOM_TEXT.encode()


def _one_line_refusal(run: subprocess.CompletedProcess[str], *words: str) -> None:
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.count("\n") == 1, run.stderr
    for word in words:
        assert word in run.stderr, run.stderr


@pytest.mark.parametrize("source", ["--key", "--key-fd"])
def test_sign_signs_every_statement_from_each_key_source(tmp_path, keys, source):
    private, public = keys["private"], keys["public"]
    release = _release(tmp_path)
    pem = private.read_text()
    if source == "--key":
        run = cli("sign", str(release.evidence), "--key", str(private), "--json")
    else:
        read_end, write_end = os.pipe()
        os.write(write_end, pem.encode())
        os.close(write_end)
        try:
            # A child process: the descriptor is handed to it (pass_fds), as a user's shell does.
            run = cli(
                "sign", str(release.evidence), "--key-fd", str(read_end), "--json", pass_fds=(read_end,)
            )
        finally:
            os.close(read_end)
    assert run.returncode == 0, run.stdout + run.stderr
    told = json.loads(run.stdout)
    assert sorted(told["signed"]) == sorted(ENVELOPES) and told["image_id"] == IMAGE
    _verify_all(release, public)
    body = "".join(line for line in pem.splitlines() if "-----" not in line)
    assert body[:40] not in run.stdout + run.stderr


def test_a_second_run_writes_the_same_bytes(tmp_path, keys):
    """ECDSA signatures differ per run: an envelope this key already signed over the same bytes is kept."""
    private = keys["private"]
    release = _release(tmp_path)
    assert cli("sign", str(release.evidence), "--key", str(private)).returncode == 0
    first = _envelopes(release)
    again = cli("sign", str(release.evidence), "--key", str(private), "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["signed"] == [] and _envelopes(release) == first
    # A statement that changed since is signed again.
    release.write_verification(result="FAILED", sbom_sha256=hashlib.sha256(SBOM_TEXT.encode()).hexdigest())
    third = cli("sign", str(release.evidence), "--key", str(private), "--json")
    assert json.loads(third.stdout)["signed"] == ["verification_summary.dsse.json"]


def test_no_key_and_two_keys_are_refused_in_one_line(tmp_path, keys):
    private = keys["private"]
    release = _release(tmp_path)
    _one_line_refusal(cli("sign", str(release.evidence)), "no signing key", "--key")
    for variable, value in ((ENV_KEY, private.read_text()), (ENV_KEY_FILE, str(private))):
        # Issue 43: not even sign takes the key from its environment, and says where it does take it.
        refused = cli("sign", str(release.evidence), "--key", str(private), env={variable: value})
        _one_line_refusal(refused, f"${variable} is set", "--key FILE", "--key-fd")
    _one_line_refusal(cli("sign", str(release.evidence), "--key", str(private), "--key-fd", "0"), "both")
    assert _envelopes(release) == {}


def test_inputs_are_checked_before_the_key_is_read(tmp_path):
    """A bad directory is named, not the key: the key is read only once the evidence is known good."""
    bad_key = tmp_path / "bad.key"
    bad_key.write_text("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    _one_line_refusal(cli("sign", str(empty), "--key", str(bad_key)), "nothing to sign")
    _one_line_refusal(cli("sign", str(tmp_path / "none"), "--key", str(bad_key)), "not a release directory")
    release = _release(tmp_path)
    _one_line_refusal(cli("sign", str(release.evidence), "--key", str(bad_key)), f"signing key {bad_key}")
    assert _envelopes(release) == {}


def test_an_sbom_or_provenance_other_than_the_summary_names_is_not_signed(tmp_path, keys):
    private = keys["private"]
    release = _release(tmp_path)
    (release.evidence / "sbom.cdx.json").write_text(SBOM_TEXT.replace("x", "swapped"), encoding="utf-8")
    _one_line_refusal(cli("sign", str(release.evidence), "--key", str(private)), "sbom.cdx.json", "names")
    assert _envelopes(release) == {}

    release = _release(tmp_path / "b")
    provenance = release.evidence / "provenance.intoto.json"
    provenance.write_text(provenance.read_text().replace('"releasekit"', '"edited"'), encoding="utf-8")
    _one_line_refusal(cli("sign", str(release.evidence), "--key", str(private)), "provenance.intoto.json")
    assert _envelopes(release) == {}

    release = _release(tmp_path / "c")  # the summary about another image than the provenance
    release.write_verification(
        image_id="sha256:" + "6" * 64, sbom_sha256=hashlib.sha256(SBOM_TEXT.encode()).hexdigest()
    )
    _one_line_refusal(cli("sign", str(release.evidence), "--key", str(private)), "not about image")
    assert _envelopes(release) == {}


@pytest.mark.parametrize("planted", ["fifo", "link-out", "envelope-link"])
def test_hostile_files_are_refused_quickly(tmp_path, keys, planted):
    private = keys["private"]
    release = _release(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched\n")
    summary = release.evidence / "verification_summary.json"
    if planted == "fifo":
        summary.unlink()
        os.mkfifo(summary)
    elif planted == "link-out":
        summary.unlink()
        summary.symlink_to(victim)
    else:
        (release.evidence / "sbom.cdx.dsse.json").symlink_to(victim)
    started = time.monotonic()
    run = cli("sign", str(release.evidence), "--key", str(private))
    assert time.monotonic() - started < 30
    _one_line_refusal(run)
    assert victim.read_text() == "untouched\n"
    assert not [
        n for n in ENVELOPES if (release.evidence / n).is_file() and not (release.evidence / n).is_symlink()
    ]


def test_a_huge_key_is_not_read_whole(tmp_path):
    release = _release(tmp_path)
    huge = tmp_path / "huge.key"
    with huge.open("wb") as handle:
        handle.truncate(1 << 30)  # sparse: 1 GiB apparent
    _one_line_refusal(cli("sign", str(release.evidence), "--key", str(huge)), "over the limit")


def _links(release: Release, signed: Callable[[], object] = lambda: None) -> dict[str, Path]:
    """The links later steps write: staging.json, then a receipt per cell (--receipts) and a test
    receipt; ``signed`` runs after each step (the sign step after the one that wrote them)."""
    from releasekit.records.base import write_record
    from releasekit.records.test_receipt import TestReceipt

    signed()
    summary = (release.evidence / "verification_summary.json").read_bytes()
    staging = staging_file(
        release.evidence,
        IMAGE,
        lock_sha256=release.lock_sha256,
        summary_sha256=hashlib.sha256(summary).hexdigest(),
    )
    signed()
    receipt = release.write_receipt("tiny-tp1")
    tests = release.evidence / "tests"
    tests.mkdir()
    suite = TestReceipt.model_validate(
        {
            "component": "runtime",
            "suite": "unit",
            "image": "releasekit-test/publish",
            "image_id": IMAGE,
            "lock_sha256": release.lock_sha256,
            "status": "passed",
            "started_at": "2026-12-05T00:00:00Z",
        }
    )
    write_record(suite, tests / "runtime.unit.json")
    return {"staging": staging, "receipt": receipt, "test": tests / "runtime.unit.json"}


def test_sign_signs_the_later_links_each_as_its_record(tmp_path, keys):
    """staging.json, the receipts and the test receipts are signed by the step after the one that
    wrote them, each as its own record type and about the image the summary verified."""
    from releasekit.records.receipt import RECEIPT_PAYLOAD_TYPE
    from releasekit.records.staging import STAGING_PAYLOAD_TYPE
    from releasekit.records.test_receipt import TEST_RECEIPT_PAYLOAD_TYPE
    from releasekit.signing.statements import envelope_path

    private, public = keys["private"], keys["public"]
    release = _release(tmp_path)
    sign = ("sign", str(release.evidence), "--key", str(private), "--json")
    runs: list[subprocess.CompletedProcess[str]] = []
    links = _links(release, lambda: runs.append(cli(*sign)))  # the evidence, then staging.json
    runs.append(cli(*sign, "--receipts", str(release.receipts)))  # the receipts and test receipts
    assert [r.returncode for r in runs] == [0, 0, 0], [r.stderr for r in runs]
    signed = [json.loads(r.stdout)["signed"] for r in runs]
    assert signed[1] == ["staging.dsse.json"], signed
    assert {"runtime.unit.dsse.json", "tiny-tp1.dsse.json"} <= set(signed[2]), signed
    assert "staging.dsse.json" not in signed[2], signed
    trusted = load_trusted_keys([public])
    for name, kind in (
        ("staging", STAGING_PAYLOAD_TYPE),
        ("receipt", RECEIPT_PAYLOAD_TYPE),
        ("test", TEST_RECEIPT_PAYLOAD_TYPE),
    ):
        envelope = envelope_path(links[name]).read_bytes()
        assert verify_envelope(envelope, trusted, payload_type=kind).payload == links[name].read_bytes(), name

    # A receipt about another image, or a file in receipts/ that is no receipt: refused, nothing new signed.
    other = release.write_receipt("tiny-tp1-ngram", image_id="sha256:" + "6" * 64)
    before = sorted(p.name for p in release.receipts.iterdir())
    refusal = cli("sign", str(release.evidence), "--receipts", str(release.receipts), "--key", str(private))
    _one_line_refusal(refusal, other.name, "not sha256:555")
    other.write_text('{"schema": "not-a-receipt"}\n')
    _one_line_refusal(
        cli("sign", str(release.evidence), "--receipts", str(release.receipts), "--key", str(private))
    )
    assert sorted(p.name for p in release.receipts.iterdir()) == before
    other.unlink()
    os.mkfifo(other)
    started = time.monotonic()
    _one_line_refusal(
        cli("sign", str(release.evidence), "--receipts", str(release.receipts), "--key", str(private))
    )
    assert time.monotonic() - started < 30


def test_sign_signs_a_link_only_after_the_earlier_links_are_signed(tmp_path, keys):
    """Issue 43: sign what was checked, not what is there. A directory whose summary is unsigned
    while staging.json or a receipt is there (the summary rewritten after it was signed, or never
    signed) is refused whole: one line naming the unsigned link, exit 2, nothing signed. A link
    another host signed with a --trusted-key counts as signed."""
    private, public = keys["private"], keys["public"]
    release = _release(tmp_path)
    _links(release)
    sign = ("sign", str(release.evidence), "--receipts", str(release.receipts), "--key", str(private))
    _one_line_refusal(cli(*sign), "verification_summary.json", "not signed")
    assert (
        list(release.evidence.rglob("*.dsse.json")) == [] and list(release.receipts.glob("*.dsse.json")) == []
    )
    # In order: the evidence alone, then staging.json, then the receipts.
    receipts_aside = release.receipts.rename(tmp_path / "aside")
    staging = release.evidence / "staging.json"
    staging_bytes = staging.read_bytes()
    staging.unlink()
    tests = release.evidence / "tests"
    tests_aside = tests.rename(tmp_path / "tests-aside")
    assert cli("sign", str(release.evidence), "--key", str(private)).returncode == 0
    # A summary edited after it was signed: its envelope is no longer over its bytes.
    summary = release.evidence / "verification_summary.json"
    signed_summary = summary.read_bytes()
    staging.write_bytes(staging_bytes)
    summary.write_bytes(signed_summary.replace(b"}", b" }", 1))
    _one_line_refusal(cli("sign", str(release.evidence), "--key", str(private)), "verification_summary.json")
    summary.write_bytes(signed_summary)
    assert cli("sign", str(release.evidence), "--key", str(private)).returncode == 0
    # Another host's key signs the receipts: the earlier links count as signed when it trusts ours.
    receipts_aside.rename(release.receipts)
    tests_aside.rename(tests)
    other, _, _ = write_key_pair(tmp_path / "gpu-host", "ed25519")
    by_other = ("sign", str(release.evidence), "--receipts", str(release.receipts), "--key", str(other))
    _one_line_refusal(cli(*by_other), "not signed")
    assert cli(*by_other, "--trusted-key", str(public)).returncode == 0
    assert (release.receipts / "tiny-tp1.dsse.json").is_file()


def test_sign_refuses_links_of_two_runs(tmp_path, keys):
    """Issue 43: sign signs links that chain to one run. A staging.json that staged another summary
    (or names another lock), or a receipt of another lock, is one line, exit 2, and nothing is signed."""
    private = keys["private"]
    release = _release(tmp_path)
    links = _links(release)
    summary = hashlib.sha256((release.evidence / "verification_summary.json").read_bytes()).hexdigest()
    cases = (
        ({"lock_sha256": release.lock_sha256, "summary_sha256": "4" * 64}, "staged verification summary"),
        ({"lock_sha256": "2" * 64, "summary_sha256": summary}, "records of two runs"),
    )
    sign = ("sign", str(release.evidence), "--receipts", str(release.receipts), "--key", str(private))
    for fields, said in cases:
        staging_file(release.evidence, IMAGE, **fields)
        _one_line_refusal(cli(*sign), said)
        assert list(release.evidence.rglob("*.dsse.json")) == []
    links["staging"].unlink()
    release.write_receipt("tiny-tp1-ngram", lock_sha256="7" * 64)
    _one_line_refusal(cli(*sign), "tiny-tp1-ngram", "of lock 777777777777")
    assert list(release.evidence.rglob("*.dsse.json")) == []


@pytest.mark.parametrize("command", ["sign", "publish"])
def test_a_deeply_nested_record_is_one_line_not_a_recursion_error(tmp_path, keys, command):
    """200,000 nested arrays in a record: before the fix ``internal error: RecursionError``."""
    release = _release(tmp_path)
    # sign reads the summary first; publish the lock (before it asks the engine for the image).
    record = release.evidence / ("verification_summary.json" if command == "sign" else "lock.json")
    record.write_text('{"a": ' + "[" * 200_000 + "]" * 200_000 + "}\n", encoding="utf-8")
    if command == "sign":
        run = cli("sign", str(release.evidence), "--key", str(keys["private"]))
    else:
        run = cli(*publish_args(release, IMAGE, "127.0.0.1:9/team/nowhere", "beta"))
    _one_line_refusal(run, record.name, "nested deeper than")
    assert "RecursionError" not in run.stderr


def test_a_record_of_many_empty_arrays_is_refused_before_it_is_parsed(tmp_path, keys):
    """3 million empty arrays (9 MB) would build 3 million lists; refused on the count of ``[`` first."""
    release = _release(tmp_path)
    summary = release.evidence / "verification_summary.json"
    summary.write_text('{"a": [' + "[]," * 3_000_000 + "[]]}\n", encoding="utf-8")
    with mock.patch("json.loads", side_effect=AssertionError("parsed")):
        run = cli("sign", str(release.evidence), "--key", str(keys["private"]))
    _one_line_refusal(run, "verification_summary.json", "more than 2000000 JSON values")


def test_a_key_file_others_may_read_is_refused(tmp_path, keys):
    """Issue 43: a world- or group-readable key file is refused (exit 2, one line), not used without a word."""
    release = _release(tmp_path)
    for mode in (0o644, 0o640, 0o604):
        loose = tmp_path / f"loose-{mode:o}.key"
        loose.write_bytes(keys["private"].read_bytes())
        loose.chmod(mode)
        _one_line_refusal(cli("sign", str(release.evidence), "--key", str(loose)), "readable by", "chmod 600")
    assert _envelopes(release) == {}
    tight = tmp_path / "tight.key"
    tight.write_bytes(keys["private"].read_bytes())
    tight.chmod(0o400)
    assert cli("sign", str(release.evidence), "--key", str(tight)).returncode == 0


def test_a_key_pipe_never_closed_ends_within_seconds(tmp_path, keys):
    """Issue 43: ``--key-fd`` on a pipe whose writer keeps it open (a half of the key, then nothing)
    hung sign; now it gives up after its deadline with one line. A child process: the descriptor is
    handed over (pass_fds) and a hang is what a regression would cause."""
    release = _release(tmp_path)
    read_end, write_end = os.pipe()
    os.write(write_end, keys["private"].read_bytes()[:40])
    try:
        started = time.monotonic()
        run = cli("sign", str(release.evidence), "--key-fd", str(read_end), pass_fds=(read_end,))
        took = time.monotonic() - started
    finally:
        os.close(read_end)
        os.close(write_end)
    _one_line_refusal(run, "descriptor", "within")
    assert took < 60, took
    assert _envelopes(release) == {}
