"""Where a component's pull requests live: an API base URL and ``owner/name``.

A github.com repository URL (https, ssh or scp-like) gives both; GitHub Enterprise, or a
repository whose URL says nothing (a local mirror), needs the manifest's ``forge:`` block.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

GITHUB_API = "https://api.github.com"

_GITHUB_URL = re.compile(
    r"^(?:https://(?:[^@/]+@)?github\.com/|ssh://git@github\.com/|git@github\.com:)"
    r"(?P<owner>[A-Za-z0-9_.-]+)/(?P<name>[A-Za-z0-9_.-]+?)(?:\.git)?/?$"
)


@dataclass(frozen=True)
class ForgeLocation:
    api_url: str
    owner: str
    name: str

    @property
    def repo(self) -> str:
        return f"{self.owner}/{self.name}"


def locate(repo_url: str, api_url: str | None = None, repo: str | None = None) -> ForgeLocation | None:
    """The forge of ``repo_url``; ``api_url``/``repo`` (owner/name) override. None: no forge known."""
    owner = name = None
    if repo:
        owner, _, name = repo.partition("/")
    else:
        found = _GITHUB_URL.match(repo_url.strip())
        if found:
            owner, name = found["owner"], found["name"]
    if not owner or not name:
        return None
    if api_url is None and not repo and not _GITHUB_URL.match(repo_url.strip()):
        return None
    return ForgeLocation(api_url=(api_url or GITHUB_API).rstrip("/"), owner=owner, name=name)
