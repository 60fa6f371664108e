"""``pyproject.toml``: ``build-system.requires`` = build; project dependencies, optional
dependencies and dependency groups = runtime; ``tool.pixi`` tables as in ``pixi.toml``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from releasekit.plan.pins.interface import Found, InputFile, Scope
from releasekit.plan.pins.sources.pixi import pixi_requirements, toml_data


def _quoted_line(lines: list[str], text: str) -> int:
    for i, raw in enumerate(lines):
        if raw.lstrip().startswith("#"):
            continue
        if f'"{text}"' in raw or f"'{text}'" in raw:
            return i + 1
    return 1


class PyprojectFile:
    kind = "pyproject"

    def claims(self, path: str) -> bool:
        return path.rsplit("/", 1)[-1] == "pyproject.toml"

    def read(self, source: InputFile) -> Iterator[Found]:
        data = toml_data(source)
        if data is None:
            return
        groups: list[tuple[Scope, list[Any]]] = [
            ("build", list(data.get("build-system", {}).get("requires", [])))
        ]
        project = data.get("project", {})
        groups.append(("runtime", list(project.get("dependencies", []))))
        for extra in (project.get("optional-dependencies") or {}).values():
            groups.append(("runtime", list(extra)))
        for group in (data.get("dependency-groups") or {}).values():
            groups.append(("runtime", [g for g in group if isinstance(g, str)]))
        for scope, reqs in groups:
            for req in reqs:
                if isinstance(req, str):
                    yield Found(source.path, _quoted_line(source.lines, req), req, scope)
        pixi = data.get("tool", {}).get("pixi")
        if isinstance(pixi, dict):
            yield from pixi_requirements(source.path, source.lines, pixi, ("tool", "pixi"))


SOURCE = PyprojectFile()
