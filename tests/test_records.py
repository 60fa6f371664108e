"""Every file of the release directory round-trips through its record, and a renamed field is refused.

The files are made by the code that writes them (or from the same models, filled in as a real
run fills them); a renamed field must be a one-line input error (exit 2), never read as ``None``.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cli_run import invoke
from publish_support import Release

from releasekit.errors import InputError
from releasekit.findings import Findings, Severity
from releasekit.records.base import Record, RecordError, load_record, write_record
from releasekit.records.build import (
    BaseImageRecord,
    BuildRecord,
    CacheReport,
    ComponentRecord,
    ImageRecord,
    read_build_record,
)
from releasekit.records.lock import Lock, read_lock
from releasekit.records.plan_check import ComponentCheck, PlanCheckResult, PRStatus
from releasekit.records.provenance import Statement, read_statement, write_statement
from releasekit.records.publish import GateCheckOutcome, GateOutcome, PublishRecord
from releasekit.records.receipt import Receipt, read_receipt
from releasekit.records.summary import Aggregate
from releasekit.records.verification import VerificationStatement

IMAGE_ID = "sha256:" + "4" * 64
ROOT = Path(__file__).resolve().parent.parent


def build_record(release: Release) -> BuildRecord:
    lock = read_lock(release.lock)
    tiny = lock.git_components()["tiny"]
    return BuildRecord(
        name="pubtest",
        lock_sha256=release.lock_sha256,
        manifest_sha256=lock.manifest.sha256,
        image_id=IMAGE_ID,
        image_tag="releasekit-test/records:1",
        toolchain=lock.toolchain.model_dump(mode="json", exclude={"base_image"}),
        base_image=BaseImageRecord(name="scratch", image_id="sha256:" + "b" * 64),
        image=ImageRecord(
            created="2026-12-02T00:00:00Z",
            source_date_epoch=1_700_000_000,
            wheels_layer_digest="sha256:" + "c" * 64,
            wheels_layer_size=1234,
            base_layers_size=0,
        ),
        components=[
            ComponentRecord(
                name="tiny",
                kind="git",
                repo=tiny.repo,
                ref=tiny.canonical_branch,
                commit=tiny.commit,
                tree=tiny.tree,
                version="0.1.0",
                distribution="tiny",
                import_names=["tiny"],
                wheel_filename="tiny-0.1.0-py3-none-any.whl",
                wheel_sha256="d" * 64,
                built=True,
                cache="miss",
            )
        ],
        labels={"io.releasekit.lock.sha256": release.lock_sha256},
        cache=CacheReport(misses=["tiny"], layer="miss"),
        smoke={"passed": True},
        outputs={"build_record": "build.json"},
    )


def rename_field(path: Path, old: str, new: str) -> None:
    data = json.loads(path.read_text())
    data[new] = data.pop(old)
    path.write_text(json.dumps(data, indent=2))


def assert_one_line_refusal(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert "Traceback" not in lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]


def assert_round_trip(obj: Record, path: Path) -> None:
    write_record(obj, path)
    assert load_record(type(obj), path) == obj


# --- lock.json -----------------------------------------------------------------------------------


def test_lock_round_trips(release: Release) -> None:
    lock = read_lock(release.lock)  # written by write_lock, the writer plan lock uses
    assert_round_trip(lock, release.root / "again.json")
    assert read_lock(release.root / "again.json") == lock


def test_a_lock_with_a_renamed_field_is_refused_by_publish(release: Release) -> None:
    rename_field(release.lock, "toolchain", "toolChain")
    proc = invoke(
        "publish",
        "--image",
        IMAGE_ID,
        "--lock",
        release.lock,
        "--receipts",
        release.receipts,
        cwd=release.root,
    )
    assert_one_line_refusal(proc, str(release.lock), "toolChain", "toolchain")


def test_a_lock_of_another_schema_version_is_refused(release: Release) -> None:
    data = json.loads(release.lock.read_text())
    data["schema"] = "releasekit.lock/v2"
    release.lock.write_text(json.dumps(data))
    with pytest.raises(
        InputError, match=r"field 'schema' is 'releasekit.lock/v2', expected 'releasekit.lock/v1'"
    ):
        read_lock(release.lock)


# --- build.json ----------------------------------------------------------------------------------


def test_build_record_round_trips(release: Release) -> None:
    record = build_record(release)
    path = release.evidence / "build.json"
    record.write(path)  # the build stage's writer
    assert read_build_record(path) == record


def test_a_build_record_with_a_renamed_field_is_refused_by_verify_provenance(release: Release) -> None:
    path = release.evidence / "build.json"
    build_record(release).write(path)
    data = json.loads(path.read_text())
    data["components"][0]["wheel"] = data["components"][0].pop("wheel_sha256")
    path.write_text(json.dumps(data))
    proc = invoke(
        "verify-provenance",
        IMAGE_ID,
        "--lock",
        release.lock,
        "--artifacts",
        release.evidence,
        cwd=release.root,
    )
    assert_one_line_refusal(proc, str(path), "components.0.wheel")


# --- provenance.intoto.json ----------------------------------------------------------------------


def test_provenance_statement_made_by_the_build_round_trips(release: Release) -> None:
    from releasekit.builder.service import BuildOptions, provenance_statement

    lock = read_lock(release.lock)
    opts = BuildOptions(manifest=release.manifest, lock=release.lock, tag="releasekit-test/records:1")
    statement = provenance_statement(
        build_record(release), lock, opts, release.lock_sha256, datetime.now(UTC), finished=datetime.now(UTC)
    )
    path = release.evidence / "provenance.intoto.json"
    write_statement(statement, path)
    assert read_statement(path) == statement
    rename_field(path, "subject", "subjects")
    with pytest.raises(RecordError, match=r"unknown field 'subjects'") as caught:
        read_statement(path)
    assert "\n" not in caught.value.one_line()


# --- plan-check.json -----------------------------------------------------------------------------


def test_plan_check_result_round_trips_and_a_renamed_field_is_refused(
    release: Release, tmp_path: Path
) -> None:
    findings = Findings()
    findings.add("PR_NOT_MERGED", "tiny#7 is not on main", component="tiny", pr=7)
    result = PlanCheckResult(
        passed=False,
        manifest_sha256="0" * 64,
        lock_sha256=release.lock_sha256,
        components=[
            ComponentCheck(
                component="tiny",
                repo="https://example.invalid/tiny.git",
                canonical_branch="main",
                checked_commit="a" * 40,
                canonical_head="a" * 40,
                statuses=[
                    PRStatus(
                        component="tiny", pr=7, role="planned", state="not-merged", codes=["PR_NOT_MERGED"]
                    )
                ],
            )
        ],
        findings=findings,
    )
    path = tmp_path / "plan-check.json"
    assert_round_trip(result, path)
    assert load_record(PlanCheckResult, path).error_codes() == ["PR_NOT_MERGED"]
    rename_field(path, "passed", "ok")
    with pytest.raises(RecordError, match=r"(?=.*unknown field 'ok')(?=.*missing field 'passed')"):
        load_record(PlanCheckResult, path)


# --- verification_summary.json -------------------------------------------------------------------


def test_verification_summary_round_trips_and_a_renamed_field_is_refused(release: Release) -> None:
    path = release.evidence / "verification_summary.json"  # written by verify-provenance's writer
    statement = load_record(VerificationStatement, path)
    summary = statement.summary
    assert summary.resource_uri == IMAGE_ID and summary.result == "PASSED"
    assert statement.subject_sha256() == [IMAGE_ID.removeprefix("sha256:")] and statement.names_image(
        IMAGE_ID
    )
    provenance = (release.evidence / "provenance.intoto.json").read_bytes()
    assert summary.input_attestations["provenance.intoto.json"] == hashlib.sha256(provenance).hexdigest()
    assert_round_trip(statement, release.root / "again.json")
    data = json.loads(path.read_text())
    data["predicate"]["result"] = data["predicate"].pop("verificationResult")
    path.write_text(json.dumps(data))
    with pytest.raises(
        RecordError,
        match=r"(?=.*unknown field 'predicate.result')(?=.*missing field 'predicate.verificationResult')",
    ):
        load_record(VerificationStatement, path)


def test_a_bare_summary_predicate_is_refused(release: Release) -> None:
    """The file is always an in-toto Statement: the predicate alone (the old unsigned form) is not read."""
    path = release.evidence / "verification_summary.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps(data["predicate"]))
    with pytest.raises(RecordError, match=r"not a https://in-toto.io/Statement/v1 file \(no '_type' field\)"):
        load_record(VerificationStatement, path)
    for key, value in (("predicateType", "https://slsa.dev/provenance/v1"), ("subject", [])):
        path.write_text(json.dumps({**data, key: value}))
        with pytest.raises(RecordError, match=key):
            load_record(VerificationStatement, path)


def test_a_summary_finding_with_a_renamed_field_is_refused(release: Release) -> None:
    path = release.evidence / "verification_summary.json"
    data = json.loads(path.read_text())
    data["predicate"]["releasekit"]["findings"] = [{"code": "X", "severity": "error", "msg": "renamed"}]
    path.write_text(json.dumps(data))
    with pytest.raises(RecordError, match=r"predicate.releasekit.findings.0"):
        load_record(VerificationStatement, path)


@pytest.mark.parametrize("passed", [True, False])
def test_the_summary_parses_with_the_in_toto_attestation_bindings(tmp_path: Path, passed: bool) -> None:
    """The written file, read by the in-toto attestation framework's own Python bindings: a valid
    Statement v1 (their ``validate``), and a predicate that parses into their SLSA VSA v1 message
    with every field VSA v1 requires set (releasekit's extension fields are ignored, as VSA allows)."""
    from google.protobuf import json_format
    from in_toto_attestation.predicates.vsa.v1 import vsa_pb2
    from in_toto_attestation.v1 import statement_pb2
    from in_toto_attestation.v1.statement import Statement as InTotoStatement

    from releasekit.clock import SystemClock
    from releasekit.provenance.summary import make_summary, write_summary
    from releasekit.records.verification import ReleasekitBlock

    image_id = "sha256:" + "ab" * 32
    path = tmp_path / "verification_summary.json"
    block = ReleasekitBlock(lock_sha256="1" * 64, manifest_sha256="2" * 64)
    write_summary(
        make_summary(image_id=image_id, passed=passed, block=block, provenance=None, clock=SystemClock()),
        path,
    )
    data = json.loads(path.read_text())

    pb = json_format.ParseDict(data, statement_pb2.Statement())  # strict: an unknown top-level key fails
    statement = InTotoStatement.copy_from_pb(pb)
    statement.validate()
    assert pb.predicate_type == "https://slsa.dev/verification_summary/v1"
    assert [dict(s.digest) for s in pb.subject] == [{"sha256": "ab" * 32}]

    # VSA v1 makes verifiedLevels an array (of SlsaResult); bindings 0.9.3 declare it a single
    # string, so each level is parsed through that field on its own.
    levels = data["predicate"]["verifiedLevels"]
    assert isinstance(levels, list) and levels
    for level in levels:
        vsa = json_format.ParseDict(
            {**data["predicate"], "verifiedLevels": level},
            vsa_pb2.VerificationSummary(),
            ignore_unknown_fields=True,
        )
        assert re.fullmatch(r"SLSA_BUILD_LEVEL_[0-3]|FAILED", vsa.verified_levels)
    for name in ("verifier", "time_verified", "policy"):
        assert vsa.HasField(name), name
    assert vsa.verifier.id and vsa.policy.uri and vsa.resource_uri == image_id
    assert vsa.time_verified.seconds > 0  # an RFC 3339 timestamp
    assert vsa.verification_result == ("PASSED" if passed else "FAILED")
    assert levels == (["SLSA_BUILD_LEVEL_1"] if passed else ["FAILED"])
    assert vsa.slsa_version == "1.0"
    # What the bindings ignore is only releasekit's own extension: the VSA fields are all known.
    known = {f.json_name for f in vsa_pb2.VerificationSummary.DESCRIPTOR.fields}
    assert set(data["predicate"]) - known == {"schema", "releasekit"}

    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(data["predicate"]))
    with pytest.raises(json_format.ParseError):  # the old bare form is no statement to the bindings
        json_format.ParseDict(json.loads(bare.read_text()), statement_pb2.Statement())


# --- receipts/<cell>.json ------------------------------------------------------------------------


def test_receipt_round_trips_and_a_renamed_field_is_refused(release: Release) -> None:
    path = release.receipts / "tiny-tp1.json"  # written by write_receipt, the validate stage's writer
    receipt = read_receipt(path)
    assert receipt.cell_id == "tiny-tp1" and receipt.lock_sha256 == release.lock_sha256
    assert_round_trip(receipt, release.root / "again.json")
    rename_field(path, "lock_sha256", "lock")
    with pytest.raises(
        RecordError, match=r"(?=.*tiny-tp1.json: .*unknown field 'lock')(?=.*missing field 'lock_sha256')"
    ):
        read_receipt(path)


# --- publish.json --------------------------------------------------------------------------------


def test_publish_record_round_trips_and_a_renamed_field_is_refused(tmp_path: Path) -> None:
    findings = Findings()
    findings.add("RECEIPT_UNKNOWN_CELL", "no such cell", severity=Severity.warning, cell="retired")
    record = PublishRecord(
        published=True,
        image_id=IMAGE_ID,
        lock_sha256="1" * 64,
        repository="127.0.0.1:5000/releasekit-test/records",
        tags=["1.0"],
        digest="sha256:" + "e" * 64,
        gate=GateOutcome(
            passed=True,
            checks=[GateCheckOutcome(name="plan check passed for this lock", passed=True)],
            findings=findings,
            cells=["tiny-tp1"],
        ),
    )
    path = tmp_path / "publish.json"
    assert_round_trip(record, path)
    rename_field(path, "digest", "manifest_digest")
    with pytest.raises(RecordError, match=r"unknown field 'manifest_digest'"):
        load_record(PublishRecord, path)


# --- what every record refuses -------------------------------------------------------------------


@pytest.mark.parametrize(
    "record",
    [Lock, BuildRecord, Statement, PlanCheckResult, VerificationStatement, Receipt, PublishRecord, Aggregate],
)
def test_not_json_and_no_schema_are_one_line_input_errors(record: type[Record], tmp_path: Path) -> None:
    path = tmp_path / "file.json"
    path.write_text("{not json")
    with pytest.raises(RecordError, match=r"file.json: not JSON") as caught:
        load_record(record, path)
    assert caught.value.exit_code == 2 and "\n" not in caught.value.one_line()
    path.write_text("{}")
    with pytest.raises(RecordError, match=rf"not a {record.schema_version()} file"):
        load_record(record, path)


def test_publish_record_made_from_a_real_gate_report_round_trips(release: Release) -> None:
    from publish_support import IMAGE_CMD, IMAGE_ENV

    from releasekit.docker_engine import ImageFacts
    from releasekit.manifest import load_manifest
    from releasekit.publish.evidence import load_evidence
    from releasekit.publish.gate import evaluate_gate, policy_from_manifest
    from releasekit.publish.service import PublishResult, publish_record

    loaded = load_manifest(release.manifest)
    report = evaluate_gate(
        ImageFacts(id=IMAGE_ID, env=dict(IMAGE_ENV), cmd=list(IMAGE_CMD)),
        release.lock_sha256,
        load_evidence(release.evidence, release.receipts),
        policy_from_manifest(loaded.manifest),
        manifest_sha256=loaded.sha256,
        lock_manifest_sha256=read_lock(release.lock).manifest.sha256,
    )
    assert report.passed
    result = PublishResult(
        published=True,
        image_id=IMAGE_ID,
        lock_sha256=release.lock_sha256,
        repository="127.0.0.1:5000/releasekit-test/records",
        tags=["1.0"],
        digest="sha256:" + "e" * 64,
        gate=report,
    )
    record = publish_record(result)
    assert record.gate.cells == ["tiny-tp1", "tiny-tp1-ngram"]
    assert_round_trip(record, release.root / "publish.json")


# --- gate.json, the OCI and in-toto documents ----------------------------------------------------


def _gate_record(release: Release):
    from publish_support import IMAGE_CMD, IMAGE_ENV

    from releasekit.docker_engine import ImageFacts
    from releasekit.manifest import load_manifest
    from releasekit.publish.evidence import load_evidence
    from releasekit.publish.gate import evaluate_gate, policy_from_manifest
    from releasekit.records.gate import GateRecord

    loaded = load_manifest(release.manifest)
    policy = policy_from_manifest(loaded.manifest)
    report = evaluate_gate(
        ImageFacts(id=IMAGE_ID, env=dict(IMAGE_ENV), cmd=list(IMAGE_CMD)),
        release.lock_sha256,
        load_evidence(release.evidence, release.receipts),
        policy,
    )
    return GateRecord(
        image_id=IMAGE_ID,
        lock_sha256=release.lock_sha256,
        manifest_sha256=loaded.sha256,
        policy=policy,
        report=report,
    )


def test_gate_json_has_a_schema_and_reads_back(release: Release) -> None:
    from releasekit.records.gate import GATE_SCHEMA, gate_text, read_gate

    record = _gate_record(release)
    text = gate_text(record)
    assert json.loads(text)["schema"] == GATE_SCHEMA
    again = read_gate(text)
    # byte-identical when written again (a receipt's env and args are left out of the report)
    assert gate_text(again) == text and again.policy == record.policy
    assert sorted(r.cell for r in again.report.receipts) == ["tiny-tp1", "tiny-tp1-ngram"]


def test_a_gate_json_from_before_the_schema_field_is_read_as_v1(release: Release) -> None:
    from releasekit.records.gate import gate_text, read_gate

    record = _gate_record(release)
    # what publish attached before gate.json had a schema: the same fields, without it
    old = record.model_dump_json(by_alias=True, indent=2, exclude={"schema_"})
    assert "schema" not in json.loads(old)
    assert gate_text(read_gate(old)) == gate_text(record)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "not attached"),
        ("{not json", "not JSON"),
        ('{"schema": "releasekit.gate/v2"}', "expected 'releasekit.gate/v1'"),
        ('{"image_id": "x"}', "missing field"),
    ],
)
def test_an_unusable_gate_json_is_one_line(text: str | None, message: str) -> None:
    from releasekit.records.gate import read_gate

    with pytest.raises(RecordError, match=message) as caught:
        read_gate(text, "attached gate.json")
    assert "\n" not in caught.value.one_line()


def test_the_artifact_manifest_serialises_as_the_dict_it_replaced() -> None:
    from releasekit.records.oci import OCI_MANIFEST, TITLE, Descriptor, ImageManifest

    layer = {
        "mediaType": "text/markdown",
        "digest": "sha256:" + "1" * 64,
        "size": 3,
        "annotations": {TITLE: "R"},
    }
    as_dict = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "artifactType": "application/x",
        "config": {"mediaType": "application/x", "digest": "sha256:" + "2" * 64, "size": 2},
        "layers": [layer],
        "subject": {"mediaType": OCI_MANIFEST, "digest": "sha256:" + "3" * 64, "size": 9},
    }
    model = ImageManifest(
        mediaType=OCI_MANIFEST,
        artifactType="application/x",
        config=Descriptor(mediaType="application/x", digest="sha256:" + "2" * 64, size=2),
        layers=[Descriptor.model_validate(layer)],
        subject=Descriptor(mediaType=OCI_MANIFEST, digest="sha256:" + "3" * 64, size=9),
    )
    # the same bytes, so the same manifest digest as attachments made before the model
    assert model.to_bytes() == json.dumps(as_dict, indent=2, sort_keys=True).encode()
    again = ImageManifest.parse(model.to_bytes())
    assert again.layers[0].title == "R" and again.subject_digest == "sha256:" + "3" * 64


def test_registry_documents_keep_unknown_fields_and_refuse_garbage_in_one_line() -> None:
    from releasekit.records.oci import ImageIndex, ImageManifest

    docker = b'{"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json", '
    docker += b'"config": {"digest": "sha256:aa", "size": 1, "platform": {}}, "layers": [], "extra": 1}'
    manifest = ImageManifest.parse(docker)
    assert manifest.config is not None and manifest.config.digest == "sha256:aa"
    assert ImageManifest.parse(b'{"schemaVersion": 2, "manifests": []}').config is None
    with pytest.raises(ValueError, match="not an OCI image manifest") as caught:
        ImageManifest.parse(b'{"config": {"size": 1}}')
    assert "\n" not in str(caught.value)
    index = ImageIndex.parse(b'{"manifests": [{"digest": "sha256:bb", "artifactType": "t"}, 7]}')
    assert [(d.digest, d.artifactType) for d in index.manifests] == [("sha256:bb", "t")]


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"{", "not-json"),
        (b'{"_type": "https://in-toto.io/Statement/v0.1", "subject": [{}]}', "not-statement"),
        (b'{"_type": "https://in-toto.io/Statement/v1", "subject": []}', "no-subject"),
    ],
)
def test_a_payload_that_is_no_statement_says_why(payload: bytes, reason: str) -> None:
    from releasekit.records.intoto import StatementError, parse_statement

    with pytest.raises(StatementError) as caught:
        parse_statement(payload)
    assert caught.value.reason == reason


def test_a_signed_summary_statement_reads_back_with_its_subject_and_predicate() -> None:
    from releasekit.records.intoto import VERIFICATION_SUMMARY_TYPE, AnyStatement, parse_statement

    summary = b'{"b": 1, "a": [2]}'
    made = AnyStatement.wrapping(
        summary, predicate_type=VERIFICATION_SUMMARY_TYPE, image_id="sha256:" + "c" * 64, name="img"
    )
    back = parse_statement(made.to_bytes())
    assert back.subject_digests() == ["sha256:" + "c" * 64]
    assert back.predicateType == VERIFICATION_SUMMARY_TYPE and back.predicate_equals(summary.decode())
    assert not back.predicate_equals('{"b": 2}')
