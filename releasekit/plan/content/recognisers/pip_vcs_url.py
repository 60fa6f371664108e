"""``pip-vcs-url``: a pip/uv install of a version-control URL (``git+https://...@<ref>``)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from releasekit.manifest.content_rules import ContentRule
from releasekit.plan.content.interface import Hit, Kind, ScannedFile
from releasekit.plan.content.reading import INSTALL, expand

_VCS = re.compile(r"(?:^|@\s*|=)(git|hg|svn|bzr)\+[a-z]+://", re.IGNORECASE)


class PipVcsUrl:
    rule: ContentRule = "pip-vcs-url"
    kinds: frozenset[Kind] = frozenset({"dockerfile", "shell"})

    def find(self, source: ScannedFile) -> Iterator[Hit]:
        for command in source.commands:
            if not INSTALL.search(command.text):
                continue
            for line, word in command.words:
                value = expand(word, source.variables)
                if _VCS.search(value):
                    yield Hit(source.path, line, self.rule, f"installs {value}")


RECOGNISER = PipVcsUrl()
