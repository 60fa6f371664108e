"""In-toto Statement v1: the envelope-free form every attestation of the release takes.

``records/provenance.py`` is the build's statement (its predicate typed as SLSA Provenance
v1); this module holds the parts every statement shares (``ResourceDescriptor``, the
statement type) and ``AnyStatement``, the statement whose predicate is any JSON value: the
one ``releasekit sign`` wraps a verification summary in, and the one the publish gate reads
back out of a signed envelope before it knows which predicate it carries.
"""

from __future__ import annotations

import json
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from releasekit.records.base import Strict, bounded_json

STATEMENT_TYPE: Final = "https://in-toto.io/Statement/v1"
VERIFICATION_SUMMARY_TYPE: Final = "https://slsa.dev/verification_summary/v1"


class ResourceDescriptor(Strict):
    """An in-toto ResourceDescriptor: something named by URI and/or name, and its digests."""

    name: str | None = None
    uri: str | None = None
    digest: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, Any] | None = None


class Subject(BaseModel):
    """A statement's subject as read back from another signer: other descriptor fields are kept."""

    model_config = ConfigDict(extra="allow")

    name: Any = None
    digest: dict[str, Any] = Field(default_factory=dict)


class AnyStatement(BaseModel):
    """An in-toto Statement v1 with any predicate."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    type_: Literal["https://in-toto.io/Statement/v1"] = Field(default=STATEMENT_TYPE, alias="_type")
    subject: list[Subject]
    predicateType: Any = None  # noqa: N815 - in-toto's field name (any value: the gate names what it got)
    predicate: Any = None

    @classmethod
    def wrapping(
        cls, predicate_json: bytes, *, predicate_type: str, image_id: str, name: str
    ) -> AnyStatement:
        """A statement about the image whose predicate is the given JSON file, unchanged."""
        return cls(
            subject=[Subject(name=name, digest={"sha256": image_id.removeprefix("sha256:")})],
            predicateType=predicate_type,
            predicate=bounded_json(predicate_json.decode("utf-8"), name),
        )

    def to_bytes(self) -> bytes:
        data = self.model_dump(mode="json", by_alias=True)
        return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8")

    def subject_digests(self) -> list[str]:
        """Every subject's sha256, as ``sha256:<hex>``."""
        return [
            "sha256:" + s.digest["sha256"] for s in self.subject if isinstance(s.digest.get("sha256"), str)
        ]

    def predicate_equals(self, text: str) -> bool:
        """The predicate is the JSON of ``text`` (an unsigned copy beside the envelope)."""
        try:
            return bool(bounded_json(text, "predicate") == self.predicate)
        except ValueError:
            return False


class StatementError(ValueError):
    """Why a payload is not a statement: ``not-json``, ``not-statement`` or ``no-subject``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def parse_statement(payload: bytes) -> AnyStatement:
    """The statement in a signed payload; :class:`StatementError` says why it is not one."""
    try:
        data = bounded_json(payload.decode("utf-8"), "statement")
    except ValueError:
        raise StatementError("not-json") from None
    if not isinstance(data, dict) or data.get("_type") != STATEMENT_TYPE:
        raise StatementError("not-statement")
    subjects = data.get("subject")
    if not isinstance(subjects, list) or not subjects:
        raise StatementError("no-subject")
    # A subject that is not an object names no digest: kept out, as it names nothing.
    data = {**data, "subject": [s for s in subjects if isinstance(s, dict)]}
    try:
        return AnyStatement.model_validate(data)
    except ValidationError:
        raise StatementError("not-statement") from None


class StatementSubjects(BaseModel):
    """What the publish gate reads of the provenance file: the sha256 of each subject it names.

    Deliberately lenient (any JSON object): the provenance file's full model is
    ``records.provenance.Statement``, and verify-provenance checked the file against it; the
    gate only asks whether the image is among the subjects of the very file that was verified.
    """

    named: bool  # the file lists subjects (objects or not)
    sha256: list[str]  # the digest.sha256 of each subject that is an object ("None" where it has none)

    @classmethod
    def from_json(cls, data: Any) -> StatementSubjects:
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        subjects = data.get("subject") or []
        return cls(
            named=bool(subjects),
            sha256=[str((s or {}).get("digest", {}).get("sha256")) for s in subjects if isinstance(s, dict)],
        )

    def names(self, image_id: str) -> bool:
        """True when the image is a subject, or when the file names no subject at all."""
        return not self.named or image_id.removeprefix("sha256:") in self.sha256
