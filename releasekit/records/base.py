"""The strict base of every record and the one way to read and write a record file.

A record forbids fields it does not know and carries a schema-version field whose value is a
fixed literal, so a renamed field, a missing one or a file of another version is refused with
one line naming the file and the field, never read as ``None``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from releasekit.atomic import write_atomic
from releasekit.bounded_read import RECORD_MAX_BYTES, read_bounded
from releasekit.errors import InputError


class Strict(BaseModel):
    """A part of a record: unknown fields are an error."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Record(Strict):
    """A whole file of the release directory.

    Subclasses declare their schema-version field (a ``Literal`` with a default) and name it in
    ``schema_field`` (the name as written in the file); ``kind`` says what the file is, for messages.
    """

    schema_field: ClassVar[str] = "schema"
    kind: ClassVar[str] = "record"
    # The largest file of this kind that is read at all (checked on stat, before reading).
    max_bytes: ClassVar[int] = RECORD_MAX_BYTES

    @classmethod
    def schema_version(cls) -> str:
        for name, field in cls.model_fields.items():
            if (field.alias or name) == cls.schema_field:
                return str(field.default)
        raise TypeError(f"{cls.__name__} declares no {cls.schema_field!r} field")

    @classmethod
    def from_json(cls: type[R], data: Any, source: str | None = None) -> R:
        """Validate parsed JSON; a mismatch raises :class:`RecordError` with one line."""
        return parse_record(cls, data, source or cls.kind)


R = TypeVar("R", bound=Record)


class RecordError(InputError, ValueError):
    """A file that is not the record it should be (exit 2). Also a ``ValueError``, for gates that
    turn an unusable file into a finding."""


def _where(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(p) for p in loc) or "(top level)"


def describe(exc: ValidationError, limit: int = 3) -> str:
    """The validation errors as one line: ``unknown field 'x'; missing field 'y'``."""
    parts: list[str] = []
    for err in exc.errors()[:limit]:
        where = _where(tuple(err["loc"]))
        if err["type"] == "extra_forbidden":
            parts.append(f"unknown field '{where}'")
        elif err["type"] == "missing":
            parts.append(f"missing field '{where}'")
        else:
            parts.append(f"field '{where}': {' '.join(str(err['msg']).split())}")
    more = exc.error_count() - limit
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)


def parse_record(cls: type[R], data: Any, source: str) -> R:
    version = cls.schema_version()
    if not isinstance(data, dict):
        raise RecordError(f"{source}: not a {version} file (expected a JSON object)")
    found = data.get(cls.schema_field)
    if found is None:
        raise RecordError(f"{source}: not a {version} file (no '{cls.schema_field}' field)")
    if found != version:
        raise RecordError(f"{source}: field '{cls.schema_field}' is {found!r}, expected {version!r}")
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise RecordError(f"{source}: not a valid {version} file: {describe(exc)}") from None


def load_record(cls: type[R], path: Path, *, within: Path | None = None) -> R:
    """Read and validate one record file; anything wrong raises :class:`RecordError` (exit 2).

    The file must be a regular file (a symbolic link only when it stays inside ``within``, by
    default the file's own directory) of at most ``cls.max_bytes`` bytes, checked before reading."""
    try:
        raw = read_bounded(path, cls.max_bytes, within=within or path.parent)
    except FileNotFoundError:
        raise RecordError(f"{path}: no such file (expected a {cls.schema_version()} file)") from None
    except OSError as exc:
        raise RecordError(f"cannot read {path}: {exc.strerror or exc}") from None
    return record_from_bytes(cls, raw, str(path))


def record_from_bytes(cls: type[R], raw: bytes, source: str) -> R:
    """The record in ``raw`` (bytes read once, e.g. to check a signature over the same bytes)."""
    try:
        data = bounded_json(raw.decode("utf-8"), source)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RecordError(f"{source}: not JSON ({exc})") from None
    return parse_record(cls, data, source)


def dump_record(obj: Record, *, exclude_none: bool = False) -> str:
    """The file's text: by alias, sorted keys, two-space indent, trailing newline."""
    data = obj.model_dump(mode="json", by_alias=True, exclude_none=exclude_none)
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def write_record(obj: Record, path: Path, *, exclude_none: bool = False) -> str:
    """Write the record (``atomic.write_atomic``: a fresh temporary file, fsync, rename; a symbolic link
    or other non-regular file at ``path`` is refused) and return the text written."""
    text = dump_record(obj, exclude_none=exclude_none)
    write_atomic(path, text)
    return text


class JsonLimits:
    """What a JSON document from outside may hold (the manifest loader's limits): keys once per
    object, nesting at most ``depth``, at most ``nodes`` values, numbers of at most ``digits``
    characters, no NaN or Infinity."""

    depth = 64
    nodes = 200_000
    digits = 64


def strict_json(text: str, source: str, limits: type[JsonLimits] = JsonLimits) -> Any:
    """``text`` parsed under ``limits``; anything beyond them is one line (``InputError``, exit 2)."""
    count = 0

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal count
        count += len(items) + 1
        if count > limits.nodes:
            raise InputError(f"{source}: more than {limits.nodes} JSON values")
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise InputError(f"{source}: duplicate key {key[:80]!r} in one JSON object")
            out[key] = value
        return out

    def number(kind: type) -> Any:
        def parse(literal: str) -> Any:
            if len(literal) > limits.digits:
                raise InputError(f"{source}: a number of {len(literal)} characters (at most {limits.digits})")
            return kind(literal)

        return parse

    def constant(name: str) -> Any:
        raise InputError(f"{source}: {name} is not a JSON number")

    check_json_shape(text, source, limits)
    try:
        data = json.loads(
            text,
            object_pairs_hook=pairs,
            parse_int=number(int),
            parse_float=number(float),
            parse_constant=constant,
        )
    except RecursionError:
        raise InputError(f"{source}: JSON nested deeper than {limits.depth} levels") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{source}: not JSON: {exc}") from None
    _check_shape(data, source, limits)
    return data


def _check_shape(data: Any, source: str, limits: type[JsonLimits]) -> None:
    """Depth and the values of arrays (objects were counted as they were parsed), without recursion."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    seen = 0
    while stack:
        value, depth = stack.pop()
        seen += 1
        if seen > limits.nodes:
            raise InputError(f"{source}: more than {limits.nodes} JSON values")
        if depth > limits.depth:
            raise InputError(f"{source}: JSON nested deeper than {limits.depth} levels")
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        stack.extend((child, depth + 1) for child in children)


class RecordLimits(JsonLimits):
    """What a record file (or another JSON file releasekit wrote, read back) may hold: the nesting of
    any document from outside, more values (an SBOM or provenance of a large image)."""

    nodes = 2_000_000


# A JSON string (escapes included): what the shape scan skips.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


def check_json_shape(text: str, source: str, limits: type[JsonLimits] = JsonLimits) -> None:
    """Refuse ``text`` before it is parsed when it holds more values or deeper nesting than ``limits``.

    Every ``[``, ``{`` and ``,`` outside strings opens or separates a value, so their counts are lower
    bounds of the values a parser would build (an array of empty arrays included): a document over
    the limit is refused without building one object, in time linear in its size. The nesting depth
    is counted over the brackets alone (at most twice the bounded count), so a deep document never
    reaches the parser's recursion either. Anything malformed is left to the parser to name."""
    bare = _STRING.sub("", text)
    opens = bare.count("[") + bare.count("{")
    if max(opens, bare.count(",")) > limits.nodes:
        raise InputError(f"{source}: more than {limits.nodes} JSON values")
    depth = 0
    for match in _BRACKET.finditer(bare):
        depth += 1 if match.group() in "[{" else -1
        if depth > limits.depth:
            raise InputError(f"{source}: JSON nested deeper than {limits.depth} levels")
        if depth < 0:
            return


def bounded_json(text: str, source: str, limits: type[JsonLimits] = RecordLimits) -> Any:
    """``json.loads(text)`` after :func:`check_json_shape` (over a limit: :class:`RecordError`, one
    line; not JSON: ``json.JSONDecodeError`` as ``json.loads`` raises it) -- every reader of a record
    file, a signed payload or an attachment parses through here."""
    try:
        check_json_shape(text, source, limits)
        return json.loads(text)
    except InputError as exc:
        raise RecordError(str(exc)) from None
    except RecursionError:
        raise RecordError(f"{source}: JSON nested deeper than {limits.depth} levels") from None
