"""Conditional requests cached on disk: a re-read of an unchanged forge costs no rate limit.

An httpx transport under the githubkit client. A GET whose earlier answer carried an
``ETag`` is sent with ``If-None-Match``; a ``304 Not Modified`` (which GitHub does not count
against the rate limit) is answered from the cached body. One JSON file per URL, named by
the sha256 of the URL and ``Accept`` header, holding only the URL, the ETag, the body and
the ``Link``/``Content-Type`` headers: never a request header, so never a credential.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import httpx

from releasekit import atomic

_KEPT_HEADERS = ("content-type", "link", "etag")
_TRANSFER_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


class EtagCachingTransport(httpx.BaseTransport):
    def __init__(self, directory: Path, inner: httpx.BaseTransport | None = None) -> None:
        self.directory = directory
        self.inner = inner or httpx.HTTPTransport()
        self.revalidated = 0  # answers served from the cache after a 304

    def _path(self, request: httpx.Request) -> Path:
        key = f"{request.url}\n{request.headers.get('accept', '')}"
        return self.directory / f"{hashlib.sha256(key.encode()).hexdigest()}.json"

    def _load(self, path: Path) -> dict | None:
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return entry if isinstance(entry, dict) and isinstance(entry.get("etag"), str) else None

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method != "GET":
            return self.inner.handle_request(request)
        path = self._path(request)
        entry = self._load(path)
        if entry is not None:
            request.headers["If-None-Match"] = entry["etag"]
        response = self.inner.handle_request(request)
        if response.status_code == 304 and entry is not None:
            response.close()
            self.revalidated += 1
            kept = {k: v for k, v in entry.get("headers", {}).items() if k in _KEPT_HEADERS}
            return httpx.Response(
                200, headers=kept, content=str(entry.get("body", "")).encode(), request=request
            )
        etag = response.headers.get("etag")
        if response.status_code == 200 and etag:
            body = response.read()  # decoded: the copy served below carries no content-encoding
            self._store(path, str(request.url), etag, response.headers, body)
            headers = [
                (k, v) for k, v in response.headers.multi_items() if k.lower() not in _TRANSFER_HEADERS
            ]
            return httpx.Response(200, headers=headers, content=body, request=request)
        return response

    def _store(self, path: Path, url: str, etag: str, headers: httpx.Headers, body: bytes) -> None:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            return  # the forge's REST answers are JSON; anything else is not worth keeping
        entry = {
            "url": url,
            "etag": etag,
            "headers": {k: headers[k] for k in _KEPT_HEADERS if k in headers},
            "body": text,
        }
        # Whole or not at all (a killed or concurrent writer never leaves a torn entry): releasekit.atomic.
        atomic.write_bytes(path, json.dumps(entry, sort_keys=True).encode("utf-8"))

    def close(self) -> None:
        self.inner.close()


def default_cache_dir() -> Path:
    """``$RELEASEKIT_CACHE/forge`` (default ``~/.cache/releasekit/forge``)."""
    root = os.environ.get("RELEASEKIT_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "releasekit") / "forge"
