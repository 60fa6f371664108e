"""``pixi.toml`` (and, through ``toml_data``/``pixi_requirements``, ``pyproject.toml``'s ``tool.pixi``).

``[dependencies]``, ``[pypi-dependencies]``, ``[host-dependencies]`` and ``[build-dependencies]``
(build), in features and targets too; ``name = "==0.1.11"`` or ``name = { version = "..." }``;
a bare conda version ``0.1.12`` means ``==0.1.12``; ``git``/``url`` tables are URL dependencies.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from typing import Any

from releasekit.plan.pins.interface import Found, InputFile, Scope

_TABLES: dict[str, Scope] = {
    "dependencies": "runtime",
    "pypi-dependencies": "runtime",
    "host-dependencies": "build",
    "build-dependencies": "build",
}


def toml_data(source: InputFile) -> dict[str, Any] | None:
    """The parsed file, or None with the reason in ``source.unreadable``."""
    try:
        return tomllib.loads(source.text)
    except tomllib.TOMLDecodeError as exc:
        source.unreadable.append(f"{source.path} is not valid TOML ({exc}); its pins were not checked")
        return None


def _tables(
    data: dict[str, Any], prefix: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], Scope, dict[str, Any]]]:
    for key, scope in _TABLES.items():
        if isinstance(data.get(key), dict):
            yield (*prefix, key), scope, data[key]
    for holder in ("feature", "target", "environments"):
        sub = data.get(holder)
        if isinstance(sub, dict):
            for name, table in sub.items():
                if isinstance(table, dict):
                    yield from _tables(table, (*prefix, holder, name))
            if holder == "feature":
                for name, table in sub.items():
                    if isinstance(table, dict) and isinstance(table.get("target"), dict):
                        for tname, ttable in table["target"].items():
                            if isinstance(ttable, dict):
                                yield from _tables(ttable, (*prefix, holder, name, "target", tname))


def _header_matches(header: str, path: tuple[str, ...]) -> bool:
    parts = [p.strip().strip("\"'") for p in re.findall(r"\"[^\"]*\"|'[^']*'|[^.]+", header)]
    return tuple(parts) == path


def _key_line(lines: list[str], path: tuple[str, ...], key: str) -> int:
    header: str | None = None
    for i, raw in enumerate(lines):
        stripped = raw.strip()
        m = re.match(r"^\[\s*([^\[\]]+?)\s*\]", stripped)
        if m:
            header = m.group(1)
            continue
        if (
            header is not None
            and _header_matches(header, path)
            and re.match(rf"^[\"']?{re.escape(key)}[\"']?\s*=", stripped)
        ):
            return i + 1
    return 1


def _spec(spec: str) -> str:
    spec = spec.strip()
    if spec in ("", "*"):
        return ""
    parts = []
    for part in spec.split(","):
        part = part.strip()
        parts.append(f"=={part}" if re.match(r"^[0-9]", part) else part)
    return ",".join(parts)


def pixi_requirements(
    rel: str, lines: list[str], data: dict[str, Any], prefix: tuple[str, ...] = ()
) -> Iterator[Found]:
    """The requirements of pixi tables found at ``prefix`` (``("tool", "pixi")`` in a pyproject)."""
    for path, scope, table in _tables(data, prefix):
        for name, value in table.items():
            line = _key_line(lines, path, name)
            if isinstance(value, dict):
                url = value.get("git") or value.get("url")
                if url:
                    yield Found(rel, line, f"{name} @ {url}", scope, name=name, spec="", url=str(url))
                    continue
                if value.get("path"):
                    continue
                spec = value.get("version", "")
            else:
                spec = str(value)
            yield Found(rel, line, f"{name} {spec}".strip(), scope, name=name, spec=_spec(str(spec)))


class PixiFile:
    kind = "pixi"

    def claims(self, path: str) -> bool:
        return path.rsplit("/", 1)[-1] == "pixi.toml"

    def read(self, source: InputFile) -> Iterator[Found]:
        data = toml_data(source)
        if data is not None:
            yield from pixi_requirements(source.path, source.lines, data)


SOURCE = PixiFile()
