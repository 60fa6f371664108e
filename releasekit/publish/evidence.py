"""The files the publish gate reads, and how it reads them.

The contract with the earlier stages (see docs/publish.md):

``--evidence DIR`` holds
  * ``plan-check.json``  what ``releasekit plan check --json`` printed for this lock:
    ``findings`` (the findings list, or an object with one), ``passed`` (optional: derived
    from the findings' severities when absent) and ``lock_sha256`` (or ``lock.sha256``),
    the sha256 of the lock file's bytes it checked;
  * ``verification_summary.json``  the SLSA Verification Summary that ``verify-provenance``
    wrote, bare or wrapped in an in-toto Statement: ``resourceUri`` ending in the image ID,
    ``verificationResult`` ``PASSED``/``FAILED``, optional releasekit ``findings``;
  * ``provenance.intoto.json``  the provenance statement of the build (attached as is);
  * ``RELEASE.md``  (optional) the build's release notes, folded into the published notes.

``--receipts DIR`` holds one JSON receipt per validation cell (any ``*.json`` file there).

Unreadable files do not crash the gate: they become "missing" for the check that needs
them, with the reason in the finding's message.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

PLAN_CHECK_FILE = "plan-check.json"
VERIFICATION_SUMMARY_FILE = "verification_summary.json"
PROVENANCE_FILE = "provenance.intoto.json"
BUILD_NOTES_FILE = "RELEASE.md"
RECEIPT_SCHEMA = "releasekit.receipt/v1"

# Receipt statuses that mean the cell passed (today's tool writes "qualified").
_PASSING = {"passed", "pass", "qualified", "ok", "success"}


class LoadedJson(BaseModel):
    """A JSON file read for the gate: the data, or why it could not be read."""

    path: str
    data: Any = None
    problem: str | None = None
    sha256: str | None = None
    # The file's exact text: attached as is, so digests other stages recorded still match.
    text: str | None = Field(default=None, exclude=True, repr=False)

    @property
    def ok(self) -> bool:
        return self.problem is None


def read_json(path: Path) -> LoadedJson:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return LoadedJson(path=str(path), problem="file not found")
    except OSError as exc:
        return LoadedJson(path=str(path), problem=f"cannot read: {exc.strerror or exc}")
    return parse_json(str(path), raw)


def parse_json(name: str, raw: bytes) -> LoadedJson:
    import hashlib

    try:
        text = raw.decode("utf-8")
        data = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return LoadedJson(path=name, problem=f"not valid JSON: {exc}")
    return LoadedJson(path=name, data=data, sha256=hashlib.sha256(raw).hexdigest(), text=text)


class PlanCheckEvidence(BaseModel):
    passed: bool
    lock_sha256: str | None
    error_codes: list[str] = Field(default_factory=list)

    @classmethod
    def from_json(cls, data: Any) -> PlanCheckEvidence:
        if not isinstance(data, dict):
            raise ValueError("expected a JSON object")
        raw_findings = data.get("findings", [])
        if isinstance(raw_findings, dict):
            raw_findings = raw_findings.get("findings", [])
        if not isinstance(raw_findings, list):
            raise ValueError("'findings' is not a list")
        errors = [
            str(f.get("code", "?"))
            for f in raw_findings
            if isinstance(f, dict) and f.get("severity", "error") == "error"
        ]
        passed = data.get("passed")
        if passed is None:
            passed = not errors
        lock = data.get("lock")
        lock_sha = data.get("lock_sha256") or (lock.get("sha256") if isinstance(lock, dict) else None)
        # A file that says "passed" while listing errors is not trusted.
        return cls(passed=bool(passed) and not errors, lock_sha256=lock_sha, error_codes=errors)


class VerificationSummary(BaseModel):
    """The fields of an SLSA Verification Summary (v1) the gate relies on.

    ``verify-provenance`` writes it bare, with a ``releasekit`` block (lock_sha256,
    findings) and the provenance it verified under ``inputAttestations``; an in-toto
    Statement wrapping the same predicate is read too.
    """

    verifier: str | None = None
    time_verified: str | None = None
    resource_uri: str
    result: str
    policy: Any = None
    subject_sha256: list[str] = Field(default_factory=list)
    lock_sha256: str | None = None
    error_codes: list[str] = Field(default_factory=list)
    input_attestations: dict[str, str] = Field(default_factory=dict)  # file name -> sha256

    @classmethod
    def from_json(cls, data: Any) -> VerificationSummary:
        if not isinstance(data, dict):
            raise ValueError("expected a JSON object")
        subjects: list[str] = []
        body = data
        if "predicate" in data:  # an in-toto Statement around the summary
            body = data["predicate"]
            for subject in data.get("subject") or []:
                digest = (subject or {}).get("digest", {}).get("sha256")
                if digest:
                    subjects.append(str(digest))
        if not isinstance(body, dict):
            raise ValueError("the summary is not a JSON object")
        if "resourceUri" not in body or "verificationResult" not in body:
            raise ValueError("missing resourceUri or verificationResult")
        block = body.get("releasekit") if isinstance(body.get("releasekit"), dict) else {}
        verifier = body.get("verifier")
        raw_findings = body.get("findings", block.get("findings", data.get("findings", [])))
        if isinstance(raw_findings, dict):
            raw_findings = raw_findings.get("findings", [])
        errors = [
            str(f.get("code", "?"))
            for f in raw_findings or []
            if isinstance(f, dict) and f.get("severity", "error") == "error"
        ]
        attestations: dict[str, str] = {}
        for item in body.get("inputAttestations") or []:
            if isinstance(item, dict) and item.get("uri") and (item.get("digest") or {}).get("sha256"):
                attestations[str(item["uri"]).rsplit("/", 1)[-1]] = str(item["digest"]["sha256"])
        return cls(
            verifier=verifier.get("id") if isinstance(verifier, dict) else verifier,
            time_verified=body.get("timeVerified"),
            resource_uri=str(body["resourceUri"]),
            result=str(body["verificationResult"]),
            policy=body.get("policy"),
            subject_sha256=subjects,
            lock_sha256=body.get("lock_sha256") or block.get("lock_sha256") or data.get("lock_sha256"),
            error_codes=errors,
            input_attestations=attestations,
        )

    def names_image(self, image_id: str) -> bool:
        hex_id = image_id.removeprefix("sha256:")
        return self.resource_uri.endswith(image_id) or (bool(self.subject_sha256) and hex_id in self.subject_sha256)


class ReceiptView(BaseModel):
    """What the gate reads from a validation receipt, whatever else the receipt holds.

    A ``releasekit.receipt/v1`` receipt is validated strictly against the validate stage's
    model (``releasekit.validate.receipt.Receipt``); a receipt of today's tool (``status:
    qualified``, no schema) is read for the few facts the gate needs, so old releases can
    be checked too.
    """

    path: str
    sha256: str
    cell: str | None
    cell_sha256: str | None = None
    image_id: str | None
    lock_sha256: str | None
    passed: bool
    # What the server ran with: read by the gate, left out of reports (an env may hold a token).
    env: dict[str, str] = Field(default_factory=dict, exclude=True)
    args: list[str] = Field(default_factory=list, exclude=True)
    metrics: list[dict[str, Any]] = Field(default_factory=list)

    @classmethod
    def from_loaded(cls, loaded: LoadedJson) -> ReceiptView:
        data = loaded.data
        if not isinstance(data, dict):
            raise ValueError("expected a JSON object")
        if data.get("schema") == RECEIPT_SCHEMA:
            return cls._from_v1(loaded)
        if "schema" in data:
            raise ValueError(f"unknown receipt schema {data['schema']!r}")
        return cls._from_legacy(loaded)

    @classmethod
    def _from_v1(cls, loaded: LoadedJson) -> ReceiptView:
        from pydantic import ValidationError

        from releasekit.validate.receipt import Receipt

        try:
            receipt = Receipt.model_validate(loaded.data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ValueError(f"not a valid {RECEIPT_SCHEMA} receipt: {where}: {first['msg']}") from None
        headlines: list[dict[str, Any]] = [
            {"name": g.metric, "value": g.candidate, "baseline": g.baseline_value, "passed": g.passed}
            for g in receipt.gates
        ]
        gated = {g.metric for g in receipt.gates}
        headlines += [
            {"name": name, "value": m.value, "unit": m.unit} for name, m in receipt.metrics.items() if name not in gated
        ]
        invocation = receipt.invocation
        return cls(
            path=loaded.path,
            sha256=loaded.sha256 or "",
            cell=receipt.cell_id,
            cell_sha256=receipt.cell_sha256,
            image_id=receipt.image_id,
            lock_sha256=receipt.lock_sha256,
            passed=receipt.passed and receipt.status == "passed",
            env=dict(invocation.env) if invocation else {},
            args=list(invocation.argv) if invocation else [],
            metrics=headlines,
        )

    @classmethod
    def _from_legacy(cls, loaded: LoadedJson) -> ReceiptView:
        data = loaded.data
        cell = data.get("cell") or data.get("cell_id")
        if isinstance(cell, dict):
            cell = cell.get("id")
        lock = data.get("lock")
        lock_sha = data.get("lock_sha256") or (lock.get("sha256") if isinstance(lock, dict) else None)
        passed = data.get("passed")
        if passed is None:
            passed = str(data.get("status", "")).lower() in _PASSING
        runtime = data.get("runtime") if isinstance(data.get("runtime"), dict) else {}
        env = runtime.get("env", data.get("env", {})) or {}
        args = runtime.get("args", data.get("args", [])) or []
        if not isinstance(env, dict) or not isinstance(args, list):
            raise ValueError("runtime.env must be an object and runtime.args a list")
        metrics = data.get("metrics") or []
        return cls(
            path=loaded.path,
            sha256=loaded.sha256 or "",
            cell=str(cell) if cell else None,
            image_id=str(data["image_id"]) if data.get("image_id") else None,
            lock_sha256=str(lock_sha) if lock_sha else None,
            passed=passed is True,
            env={str(k): str(v) for k, v in env.items()},
            args=[str(a) for a in args],
            metrics=[m for m in metrics if isinstance(m, dict)] if isinstance(metrics, list) else [],
        )


class Evidence(BaseModel):
    """Everything the gate looks at besides the image and the policy."""

    plan_check: LoadedJson
    verification_summary: LoadedJson
    provenance: LoadedJson
    build_notes: str | None = None
    receipts: list[LoadedJson] = Field(default_factory=list)


def load_evidence(evidence_dir: Path, receipts_dir: Path) -> Evidence:
    notes_path = evidence_dir / BUILD_NOTES_FILE
    receipts = (
        [read_json(p) for p in sorted(receipts_dir.glob("*.json")) if p.is_file()] if receipts_dir.is_dir() else []
    )
    return Evidence(
        plan_check=read_json(evidence_dir / PLAN_CHECK_FILE),
        verification_summary=read_json(evidence_dir / VERIFICATION_SUMMARY_FILE),
        provenance=read_json(evidence_dir / PROVENANCE_FILE),
        build_notes=notes_path.read_text(encoding="utf-8") if notes_path.is_file() else None,
        receipts=receipts,
    )
