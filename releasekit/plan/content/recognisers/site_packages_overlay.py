"""``site-packages-overlay``: files copied into an interpreter's ``site-packages``, or the
component's own installed copy (``site-packages/vllm/...``, its ``dist-info``, its
``__editable__`` finder) replaced, removed or compared in place: the recipe works on the
installed tree instead of installing a built wheel. Other packages' installed files (a
platform image deleting a stale numpy) are not the component's overlay."""

from __future__ import annotations

import re
from collections.abc import Iterator

from releasekit.manifest.content_rules import ContentRule
from releasekit.plan.content.interface import Hit, Kind, ScannedFile
from releasekit.plan.content.reading import expand, simple_commands

_COPY_VERBS = {"COPY", "ADD", "cp", "rsync", "install", "ln", "mv"}
_SITE = re.compile(r"(?:site|dist)-packages(?:/|$)")


def _own(packages: tuple[str, ...]) -> re.Pattern[str] | None:
    if not packages:
        return None
    names = "|".join(re.escape(p) for p in packages)
    return re.compile(
        rf"(?:site|dist)-packages/(?:(?:{names})(?:/|$|-[^/\s]*\.dist-info)|__editable__[^/\s]*(?:{names}))"
    )


class SitePackagesOverlay:
    rule: ContentRule = "site-packages-overlay"
    kinds: frozenset[Kind] = frozenset({"dockerfile", "shell"})

    def find(self, source: ScannedFile) -> Iterator[Hit]:
        own = _own(source.packages)
        for command in source.commands:
            copied = next(
                (
                    (c[0][0], c[0][1], expand(c[-1][1], source.variables))
                    for c in simple_commands(command)
                    if c[0][1] in _COPY_VERBS
                    and len(c) > 2
                    and _SITE.search(expand(c[-1][1], source.variables))
                ),
                None,
            )
            if copied:
                yield Hit(source.path, copied[0], self.rule, f"{copied[1]} into {copied[2]}")
                continue
            for line, raw in command.words:
                word = expand(raw, source.variables)
                m = own.search(word) if own else None
                if m:
                    yield Hit(source.path, line, self.rule, f"names the installed copy {m.group(0)}")
                    break


RECOGNISER = SitePackagesOverlay()
