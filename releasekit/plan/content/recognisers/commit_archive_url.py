"""``commit-archive-url``: a download of a repository archive of one commit
(``github.com/o/r/archive/<sha>.tar.gz``, ``codeload.github.com/o/r/tar.gz/<sha>``, GitLab's
``/-/archive/<sha>/``), the commit written out or taken from the file's variables."""

from __future__ import annotations

import re
from collections.abc import Iterator

from releasekit.manifest.content_rules import ContentRule
from releasekit.plan.content.interface import Hit, Kind, ScannedFile
from releasekit.plan.content.reading import expand

_ARCHIVE = re.compile(
    r"https?://[^\s\"']*?/(?:-/)?(?:archive|tarball|zipball|tar\.gz|zip|legacy\.tar\.gz)/"
    r"(?:refs/[a-z]+/)?(?P<sha>[0-9a-f]{7,40})(?=[./\s\"']|$)"
)


class CommitArchiveUrl:
    rule: ContentRule = "commit-archive-url"
    kinds: frozenset[Kind] = frozenset({"dockerfile", "shell"})

    def find(self, source: ScannedFile) -> Iterator[Hit]:
        for command in source.commands:
            for line, word in command.words:
                m = _ARCHIVE.search(expand(word, source.variables))
                if m and any(c.isdigit() for c in m.group("sha")):
                    yield Hit(
                        source.path, line, self.rule, f"downloads the archive of commit {m.group('sha')[:12]}"
                    )


RECOGNISER = CommitArchiveUrl()
