"""What the manifest checks read, and the vocabulary they share (PR references, the dependency graph).

``ManifestContext`` is the typed manifest plus its raw data and source map, frozen: no check
changes it. A check collects its findings in a ``Located``, which turns a field path into
file:line:column.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from releasekit.findings import Findings, Severity
from releasekit.manifest.loader import Path_, SourceMap, field_path
from releasekit.manifest.models import GitComponent, Manifest


@dataclass(frozen=True)
class PRKey:
    component: str
    number: int

    def __str__(self) -> str:
        return f"{self.component}#{self.number}"


def parse_pr_reference(ref: int | str, component: str) -> PRKey:
    """``108`` means this component's PR 108; ``b12x#34`` names another component's."""
    if isinstance(ref, int):
        return PRKey(component, ref)
    if "#" in ref:
        comp, _, num = ref.partition("#")
        return PRKey(comp, int(num))
    return PRKey(component, int(ref))


@dataclass(frozen=True)
class ManifestContext:
    manifest: Manifest
    raw: dict[str, Any]
    source: SourceMap


class Located:
    """One check's findings, each placed at the file:line:column of its field path."""

    def __init__(self, ctx: ManifestContext) -> None:
        self.source = ctx.source
        self.findings = Findings()

    def add(
        self, code: str, message: str, path: Path_, *, severity: Severity = Severity.error, **where: Any
    ) -> None:
        line, col = self.source.locate(path)
        self.findings.add(
            code,
            message,
            severity=severity,
            file=self.source.file,
            line=line,
            column=col,
            field=field_path(path),
            **where,
        )


def git_components(ctx: ManifestContext) -> Iterator[tuple[str, GitComponent]]:
    yield from ctx.manifest.git_components().items()


def known_prs(ctx: ManifestContext) -> dict[PRKey, str]:
    """Every PR the manifest names, with what it is: planned, canonical, closed or superseded."""
    known: dict[PRKey, str] = {}
    for name, comp in git_components(ctx):
        for p in comp.merge_plan:
            known[PRKey(name, p.pr)] = "planned"
        for c in comp.already_canonical:
            if c.pr is not None:
                known[PRKey(name, c.pr)] = "already canonical"
        for closed in comp.closed:
            known.setdefault(PRKey(name, closed.pr), "closed")
        for entry in comp.superseding():
            for s in entry.supersedes:
                known.setdefault(PRKey(name, s), "superseded")
    return known


def dependency_graph(ctx: ManifestContext) -> dict[PRKey, list[PRKey]]:
    graph: dict[PRKey, list[PRKey]] = {}
    for name, comp in git_components(ctx):
        for planned in comp.merge_plan:
            graph[PRKey(name, planned.pr)] = [parse_pr_reference(r, name) for r in planned.after]
    return graph


def find_cycle(graph: dict[PRKey, list[PRKey]]) -> list[PRKey] | None:
    """A dependency cycle as a path that ends where it starts, or None."""
    white, grey, black = 0, 1, 2
    color = dict.fromkeys(graph, white)
    stack: list[PRKey] = []

    def visit(node: PRKey) -> list[PRKey] | None:
        color[node] = grey
        stack.append(node)
        for nxt in graph.get(node, []):
            if nxt not in graph:
                continue
            if color[nxt] == grey:
                return [*stack[stack.index(nxt) :], nxt]
            if color[nxt] == white:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        color[node] = black
        return None

    for node in sorted(graph, key=str):
        if color[node] == white:
            found = visit(node)
            if found:
                return found
    return None
