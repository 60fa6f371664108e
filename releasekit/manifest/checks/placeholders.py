"""``to-be-locked`` only where a lock resolves the value; no other placeholder anywhere."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from releasekit.findings import Findings
from releasekit.manifest.checks.context import Located, ManifestContext
from releasekit.manifest.loader import Path_
from releasekit.manifest.models import LOCKABLE_KEYS, TO_BE_LOCKED

_PLACEHOLDER = re.compile(
    r"(?i)\b(TODO|TBD|FIXME|XXX)\b|<[A-Za-z_][A-Za-z0-9_ -]{0,30}>|\$\{[^}]*\}|\bto-be-locked\b|\bchangeme\b"
)


def _walk(data: Any, path: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    if isinstance(data, dict):
        for k, v in data.items():
            yield from _walk(v, (*path, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _walk(v, (*path, i))
    else:
        yield path, data


class NoPlaceholders:
    name = "no-placeholders"
    codes = ("UNRESOLVED_PLACEHOLDER",)

    def run(self, ctx: ManifestContext) -> Findings:
        out = Located(ctx)
        for path, value in _walk(ctx.raw):
            if not isinstance(value, str):
                continue
            key = path[-1] if path else ""
            if value == TO_BE_LOCKED and key in LOCKABLE_KEYS:
                continue
            match = _PLACEHOLDER.search(value)
            if match:
                out.add(
                    "UNRESOLVED_PLACEHOLDER",
                    f"placeholder {match.group(0)!r}; only {', '.join(sorted(LOCKABLE_KEYS))} may be '{TO_BE_LOCKED}'",
                    path,
                )
        return out.findings
