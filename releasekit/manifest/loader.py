"""YAML loading that remembers where every value came from.

Manifests are reviewed by people, so every error names file:line:column and the field
path. The loader also defends against hostile input: non-UTF-8 bytes, duplicate keys,
alias bombs ("billion laughs"), recursive aliases, custom tags and huge files are all
refused with one line, never a traceback or a hang.

A plain (unquoted) scalar ends at `` #``: ``description: Upstream PR #47979 experiments``
silently means ``Upstream PR``. The loader records every plain scalar followed on its line
by a comment that begins like a PR or issue number (``#123``); the manifest stage reports
each as ``SCALAR_CUT_BY_COMMENT`` (warning) at its file:line:column. Quote the value.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.tokens import CommentToken

from releasekit.bounded_read import read_bounded
from releasekit.errors import InputError
from releasekit.findings import Findings, Severity

MAX_BYTES = 4 * 1024 * 1024
# Nodes after alias expansion. A real manifest has a few thousand; a bomb has billions.
MAX_EXPANDED_NODES = 200_000
MAX_DEPTH = 64

Path_ = tuple[str | int, ...]


class ManifestError(InputError):
    """The manifest is unusable. ``details`` holds one ``file:line:col: field: message`` line per problem."""

    def __init__(self, message: str, details: list[str] | None = None) -> None:
        super().__init__(message, details=details)


@dataclass
class SourceMap:
    """Positions (1-based line, column) of every mapping key and sequence item."""

    file: str
    positions: dict[Path_, tuple[int, int]] = field(default_factory=dict)
    # (line, column, field path, comment text) of plain scalars a ``#123`` comment cut short.
    cut_scalars: list[tuple[int, int, Path_, str]] = field(default_factory=list)

    def locate(self, path: Path_) -> tuple[int | None, int | None]:
        # The longest prefix that has a position: a missing key points at its parent.
        for end in range(len(path), -1, -1):
            pos = self.positions.get(tuple(path[:end]))
            if pos:
                return pos
        return None, None

    def render(self, path: Path_) -> str:
        line, col = self.locate(path)
        if line is None:
            return self.file
        return f"{self.file}:{line}:{col}"


@dataclass
class LoadedYaml:
    data: Any
    source: SourceMap
    sha256: str
    raw: bytes


_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_./#-]+$")


def field_path(path: Path_) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.match(part):
            out += ("." if out else "") + part
        else:
            # Keys with spaces, newlines or quotes are shown escaped so a line stays one line.
            out += f"[{ascii(part)}]"
    return out or "(top level)"


def _line_of_offset(raw: bytes, offset: int) -> tuple[int, int]:
    before = raw[:offset]
    line = before.count(b"\n") + 1
    col = offset - (before.rfind(b"\n") + 1) + 1
    return line, col


def _expanded_size(node: Any, memo: dict[int, int], stack: set[int], depth: int) -> int:
    """Size of the tree with every alias expanded, in time linear in the graph (memoised)."""
    if not isinstance(node, dict | list):
        return 1
    key = id(node)
    if key in stack:
        raise InputError("recursive YAML alias (a node that contains itself)")
    if key in memo:
        return memo[key]
    if depth > MAX_DEPTH:
        raise InputError(f"YAML nested deeper than {MAX_DEPTH} levels")
    stack.add(key)
    children = node.values() if isinstance(node, dict) else node
    total = 1
    for child in children:
        total += _expanded_size(child, memo, stack, depth + 1)
        if total > MAX_EXPANDED_NODES:
            break
    stack.discard(key)
    memo[key] = total
    return total


_NUMBER_COMMENT = re.compile(r"#\d")


def _comment_tokens(entry: Any) -> Iterator[CommentToken]:
    if isinstance(entry, CommentToken):
        yield entry
    elif isinstance(entry, list):
        for item in entry:
            yield from _comment_tokens(item)


def _note_cut_scalars(
    node: CommentedMap | CommentedSeq, path: Path_, source: SourceMap, lines: list[str]
) -> None:
    """Record plain scalars whose line goes on with a ``#<digit>`` comment (the text YAML dropped)."""
    for key, entry in node.ca.items.items():
        for token in _comment_tokens(entry):
            text = str(token.value).lstrip()
            if not _NUMBER_COMMENT.match(text):
                continue
            line, col = token.start_mark.line, token.start_mark.column
            if line >= len(lines):
                continue
            before = lines[line][:col].rstrip()
            if (
                not before
                or before.endswith(('"', "'", ":", "-", "|", ">", "[", "{", ","))
                or before.lstrip().startswith("#")
            ):
                continue  # a quoted value, an empty value or a comment line: nothing was cut
            source.cut_scalars.append((line + 1, col + 1, (*path, key), text.splitlines()[0]))


def _plain(node: Any, path: Path_, source: SourceMap, depth: int = 0, lines: list[str] | None = None) -> Any:
    """Convert ruamel's round-trip objects to plain Python, recording positions."""
    if lines is not None and isinstance(node, CommentedMap | CommentedSeq):
        _note_cut_scalars(node, path, source, lines)
    if isinstance(node, CommentedMap):
        out: dict[str, Any] = {}
        for key in node:
            if not isinstance(key, str):
                raise InputError(
                    f"{source.render(path)}: {field_path(path)}: mapping key {key!r} is not a string (quote it)"
                )
            try:
                line, col = node.lc.key(key)
                source.positions[(*path, key)] = (line + 1, col + 1)
            except (KeyError, TypeError, AttributeError):
                pass
            out[key] = _plain(node[key], (*path, key), source, depth + 1, lines)
        return out
    if isinstance(node, CommentedSeq):
        items = []
        for i, item in enumerate(node):
            try:
                line, col = node.lc.item(i)
                source.positions[(*path, i)] = (line + 1, col + 1)
            except (KeyError, TypeError, AttributeError, IndexError):
                pass
            items.append(_plain(item, (*path, i), source, depth + 1, lines))
        return items
    if isinstance(node, dict):
        return {str(k): _plain(v, (*path, str(k)), source, depth + 1) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v, (*path, i), source, depth + 1) for i, v in enumerate(node)]
    if node is None or isinstance(node, bool):
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        return str(node)
    if isinstance(node, _dt.date | _dt.datetime):
        return node.isoformat()
    raise InputError(
        f"{source.render(path)}: {field_path(path)}: unsupported YAML value of type {type(node).__name__} "
        "(custom tags are not allowed)"
    )


def load_yaml(path: Path) -> LoadedYaml:
    """Read and parse one YAML document, refusing anything unsafe or ambiguous."""
    name = str(path)
    try:
        if path.is_dir():
            raise InputError(f"{name} is a directory, not a manifest file")
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise InputError(f"{name}: file is {size} bytes; manifests are limited to {MAX_BYTES} bytes")
        raw = read_bounded(path, MAX_BYTES)  # a FIFO or device is refused, never opened blocking
    except FileNotFoundError:
        raise InputError(f"{name}: no such file") from None
    except OSError as exc:
        raise InputError(f"{name}: cannot read: {exc.strerror or exc}") from None
    return parse_yaml(raw, name)


def parse_yaml(raw: bytes, name: str) -> LoadedYaml:
    if len(raw) > MAX_BYTES:
        raise InputError(f"{name}: {len(raw)} bytes; manifests are limited to {MAX_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, col = _line_of_offset(raw, exc.start)
        raise InputError(f"{name}:{line}:{col}: not UTF-8 (byte 0x{raw[exc.start]:02x})") from None
    if "\x00" in text:
        line, col = _line_of_offset(raw, raw.index(b"\x00"))
        raise InputError(f"{name}:{line}:{col}: NUL byte in YAML")
    yaml = YAML(typ="rt", pure=True)
    yaml.allow_duplicate_keys = False
    try:
        docs = list(yaml.load_all(text))
    except RecursionError:
        raise InputError(f"{name}: YAML nested too deeply") from None
    except Exception as exc:  # noqa: BLE001 - ruamel raises many types; all mean "does not parse"
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark is not None else name
        problem = (
            getattr(exc, "problem", None) or str(exc).strip().splitlines()[0]
            if str(exc).strip()
            else type(exc).__name__
        )
        raise InputError(f"{where}: invalid YAML: {' '.join(str(problem).split())}") from None
    if not docs:
        raise InputError(f"{name}: empty file; a manifest is a mapping at the top level")
    if len(docs) != 1:
        raise InputError(f"{name}: expected exactly one YAML document, found {len(docs)}")
    doc = docs[0]
    try:
        if _expanded_size(doc, {}, set(), 0) > MAX_EXPANDED_NODES:
            raise InputError(
                f"{name}: YAML expands to more than {MAX_EXPANDED_NODES} nodes through aliases (an alias bomb?)"
            )
        source = SourceMap(file=name)
        data = _plain(doc, (), source, 0, text.splitlines())
    except RecursionError:
        raise InputError(f"{name}: YAML nested too deeply") from None
    if not isinstance(data, dict):
        raise InputError(f"{name}:1:1: a manifest is a mapping at the top level, not {type(data).__name__}")
    return LoadedYaml(data=data, source=source, sha256=hashlib.sha256(raw).hexdigest(), raw=raw)


def scalar_comment_findings(source: SourceMap) -> Findings:
    """``SCALAR_CUT_BY_COMMENT`` (warning) for each plain scalar a ``#123`` comment cut short."""
    findings = Findings()
    for line, col, path, comment in source.cut_scalars:
        findings.add(
            "SCALAR_CUT_BY_COMMENT",
            f"the value ends before '{comment[:60]}': YAML reads ' #' as a comment; quote the whole value",
            severity=Severity.warning,
            file=source.file,
            line=line,
            column=col,
            field=field_path(path),
        )
    return findings


def _hint(err: Mapping[str, Any]) -> str:
    msg = str(err.get("msg", "invalid"))
    if (
        err.get("type") == "string_type"
        and isinstance(err.get("input"), int | float)
        and not isinstance(err.get("input"), bool)
    ):
        msg += ' (quote version-like numbers, e.g. "13.0")'
    if err.get("type") == "extra_forbidden":
        msg = "unknown key"
    return msg


# pydantic puts union member names into error locations; they are not keys of the YAML.
_UNION_TAGS = frozenset(
    {
        "str",
        "int",
        "float",
        "bool",
        "constrained-str",
        "git",
        "wheel",
        "gsm8k",
        "acceptance",
        "decode",
        "throughput",
        "long_context",
        "log_scan",
    }
)
_KEYLIKE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


def validation_error_lines(exc: ValidationError, source: SourceMap) -> list[str]:
    """One ``file:line:col: field: message`` line per pydantic error, deduplicated."""
    lines: list[str] = []
    seen: set[str] = set()
    for err in exc.errors():
        # Tagged unions put the tag into loc (e.g. "git"); drop the parts that are not keys of the YAML.
        loc = [p for p in err["loc"] if isinstance(p, int) or not str(p).startswith("function-")]
        path: list[str | int] = []
        for part in loc:
            candidate = (*path, part)
            if (
                isinstance(part, str)
                and candidate not in source.positions
                and (part in _UNION_TAGS or not _KEYLIKE.match(part))
            ):
                continue
            path.append(part)
        line = f"{source.render(tuple(path))}: {field_path(tuple(path))}: {_hint(err)}"
        if line not in seen:
            seen.add(line)
            lines.append(line)
    return lines
