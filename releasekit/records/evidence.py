"""One evidence file as the publish gate holds it: where it came from, its exact text, and its record.

The gate reads each evidence file once, here, into its typed record (``record``); the rules
then look at the record, never at raw JSON. A file that could not be read or is not JSON has
``problem``; a JSON file that is not the record it should be has ``invalid`` (the one-line
reason). ``text`` is the file's exact text: it is attached to the registry as is, so the
digests other stages recorded still match.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, Field

from releasekit.bounded_read import RECORD_MAX_BYTES, read_bounded
from releasekit.records.base import bounded_json

T = TypeVar("T")

# (parsed JSON, the file's name for messages, its sha256) -> the record; ValueError/TypeError: not one.
Parser = Callable[[Any, str, str], T]


class EvidenceFile(BaseModel, Generic[T]):
    path: str
    problem: str | None = None  # unreadable, or not JSON
    invalid: str | None = None  # JSON, but not the record: why
    sha256: str | None = None
    text: str | None = Field(default=None, exclude=True, repr=False)
    record: T | None = None

    @property
    def ok(self) -> bool:
        """Readable JSON (whether or not it is the record)."""
        return self.problem is None

    def raw(self) -> bytes | None:
        """The exact bytes to attach, when the file was readable JSON."""
        return self.text.encode("utf-8") if self.ok and self.text is not None else None


def missing(name: str, problem: str) -> EvidenceFile[Any]:
    return EvidenceFile(path=name, problem=problem)


def parse_evidence(name: str, raw: bytes, parse: Parser[T]) -> EvidenceFile[T]:
    try:
        text = raw.decode("utf-8")
        data = bounded_json(text, name)
    except (UnicodeDecodeError, ValueError) as exc:
        return EvidenceFile(path=name, problem=f"not valid JSON: {exc}")
    sha256 = hashlib.sha256(raw).hexdigest()
    found: EvidenceFile[T] = EvidenceFile(path=name, sha256=sha256, text=text)
    try:
        found.record = parse(data, name, sha256)
    except (ValueError, TypeError) as exc:
        found.invalid = str(exc)
    return found


def read_evidence(path: Path, parse: Parser[T]) -> EvidenceFile[T]:
    try:
        raw = read_bounded(path, RECORD_MAX_BYTES, within=path.parent)  # UnsafeFileError: exit 2
    except FileNotFoundError:
        return missing(str(path), "file not found")
    except OSError as exc:
        return missing(str(path), f"cannot read: {exc.strerror or exc}")
    return parse_evidence(str(path), raw, parse)
