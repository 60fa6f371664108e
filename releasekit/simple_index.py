"""Reading a PEP 503 simple-index project page: shared by ``plan lock`` and ``build``."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urlsplit

import httpx
from packaging.utils import canonicalize_name


class IndexLinks(HTMLParser):
    """The anchors of a simple-index project page: file name -> href."""

    def __init__(self) -> None:
        super().__init__()
        self.links: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if tag == "a" and href:
            self.links[urlsplit(href).path.rsplit("/", 1)[-1]] = href


def project_links(client: httpx.Client, index_url: str, distribution: str) -> tuple[str, dict[str, str]]:
    """GET the project page of ``distribution``: (page URL, file name -> href). Raises httpx errors."""
    page = f"{index_url.rstrip('/')}/{canonicalize_name(distribution)}/"
    listing = client.get(page)
    listing.raise_for_status()
    parser = IndexLinks()
    parser.feed(listing.text)
    return page, parser.links
