"""Reading a PEP 503 simple-index project page: shared by ``plan lock`` and ``build``."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urlsplit


class IndexLinks(HTMLParser):
    """The anchors of a simple-index project page: file name -> href."""

    def __init__(self) -> None:
        super().__init__()
        self.links: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if tag == "a" and href:
            self.links[urlsplit(href).path.rsplit("/", 1)[-1]] = href
