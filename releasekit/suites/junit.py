"""JUnit XML reports (pytest's xunit1 family, or any tool's) -> test cases with stable ids."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

from releasekit.errors import InputError

_OUTPUT_LIMIT = 4_000


@dataclass(frozen=True)
class Case:
    id: str
    outcome: str  # passed | failed | error | skipped
    message: str | None = None
    output: str | None = None
    seconds: float = 0.0


def _node_id(case: ET.Element) -> str:
    name = case.get("name", "")
    classname = case.get("classname", "")
    file = case.get("file")
    if file and file.endswith(".py"):
        module = file[:-3].replace("/", ".")
        rest = classname[len(module) + 1 :] if classname.startswith(module + ".") else ""
        return "::".join(p for p in (file, *rest.split("."), name) if p)
    return f"{classname}::{name}" if classname else name


def _clip(text: str | None) -> str | None:
    if not text:
        return None
    text = text.strip()
    return text if len(text) <= _OUTPUT_LIMIT else "…" + text[-_OUTPUT_LIMIT:]


def parse_junit(data: bytes) -> list[Case]:
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise InputError(f"not a JUnit XML report: {exc}") from None
    cases: list[Case] = []
    for case in root.iter("testcase"):
        outcome, message, output = "passed", None, None
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed" if child.tag == "failure" else "error"
                message = child.get("message")
                output = child.text
                break
            if child.tag == "skipped":
                outcome = "skipped"
                message = child.get("message") or (child.text or "").strip() or None
                break
        extra = "\n".join(e.text or "" for e in case if e.tag in ("system-out", "system-err") and e.text)
        if outcome in ("failed", "error") and extra:
            output = (output or "") + "\n" + extra
        cases.append(
            Case(
                id=_node_id(case),
                outcome=outcome,
                message=_clip(message),
                output=_clip(output),
                seconds=float(case.get("time") or 0.0),
            )
        )
    return cases
