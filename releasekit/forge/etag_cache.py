"""Conditional requests cached on disk: a re-read of an unchanged forge costs no rate limit.

An httpx transport under the githubkit client. A GET whose earlier answer carried an
``ETag`` is sent with ``If-None-Match``; a ``304 Not Modified`` (which GitHub does not count
against the rate limit) is answered from the cached body. One JSON file per URL, named by
the sha256 of the URL and ``Accept`` header, holding only the URL, the ETag, the body and
the ``Link``/``Content-Type`` headers: never a request header, so never a credential.

The cache is untrusted input. A ``304`` proves only that the server's object still has the
ETag the entry names, not that the entry's body is what the server sent: anyone who can write
the cache (a CI cache restored from another job, a shared ``$RELEASEKIT_CACHE``) could pair the
current ETag with an edited body (a draft PR recorded as ready). So each entry carries an
HMAC-SHA256 of everything it says, under a key that releasekit creates on first use *outside*
the cache: ``$RELEASEKIT_STATE/forge-cache.key`` (default ``$XDG_STATE_HOME/releasekit``, else
``~/.local/state/releasekit``), a directory of mode 0700 owned by this user, the key a regular
file of mode 0600 owned by this user. An entry whose HMAC does not verify, that is not a regular
file, or is over ``MAX_ENTRY_BYTES``, is ignored: the request goes out without
``If-None-Match`` and the fresh answer replaces it. A key that fails those checks is refused
(one line, exit 2) rather than trusted or silently replaced.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any

import httpx

from releasekit import atomic
from releasekit.bounded_read import UnsafeFileError, read_bounded
from releasekit.errors import InputError
from releasekit.forge.bounded_http import MAX_BODY_BYTES
from releasekit.records.base import strict_json

# An entry holds one answer (JSON-escaped, so up to about twice its bytes) and a few headers.
MAX_ENTRY_BYTES = 2 * MAX_BODY_BYTES + (1 << 20)
KEY_FILE = "forge-cache.key"
STATE_ENV = "RELEASEKIT_STATE"

_KEPT_HEADERS = ("content-type", "link", "etag")
_TRANSFER_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


class EtagCachingTransport(httpx.BaseTransport):
    def __init__(
        self, directory: Path, inner: httpx.BaseTransport | None = None, *, key: bytes | None = None
    ) -> None:
        self.directory = directory
        self.inner = inner or httpx.HTTPTransport()
        self.revalidated = 0  # answers served from the cache after a 304
        self._key = key if key is not None else cache_key()

    def _mac(self, entry: dict[str, Any]) -> str:
        signed = {k: v for k, v in entry.items() if k != "hmac"}
        text = json.dumps(signed, sort_keys=True, ensure_ascii=True)
        return hmac.new(self._key, text.encode("ascii"), hashlib.sha256).hexdigest()

    def _path(self, request: httpx.Request) -> Path:
        key = f"{request.url}\n{request.headers.get('accept', '')}"
        return self.directory / f"{hashlib.sha256(key.encode()).hexdigest()}.json"

    def _load(self, path: Path, url: str) -> dict | None:
        try:
            raw = read_bounded(path, MAX_ENTRY_BYTES)
            entry = strict_json(raw.decode("utf-8"), str(path))
        except (OSError, ValueError, InputError):
            return None  # absent, unreadable, a FIFO or device, oversize, not JSON: ask afresh
        if not isinstance(entry, dict) or not isinstance(entry.get("etag"), str):
            return None
        mac = entry.get("hmac")
        if not isinstance(mac, str) or not hmac.compare_digest(mac, self._mac(entry)):
            return None  # not written by this user's releasekit
        if entry.get("url") != url or not isinstance(entry.get("headers", {}), dict):
            return None
        return entry

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method != "GET":
            return self.inner.handle_request(request)
        path = self._path(request)
        entry = self._load(path, str(request.url))
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
        entry["hmac"] = self._mac(entry)
        # Whole or not at all (a killed or concurrent writer never leaves a torn entry): releasekit.atomic.
        data = json.dumps(entry, sort_keys=True).encode("utf-8")
        try:
            atomic.write_bytes(path, data)
        except (UnsafeFileError, OSError):
            # A FIFO, link or device planted where the entry goes: it is the cache's, so replace it;
            # a cache that cannot be written only costs the next run a full read.
            try:
                path.unlink()
                atomic.write_bytes(path, data)
            except (UnsafeFileError, OSError):
                return

    def close(self) -> None:
        self.inner.close()


def state_dir() -> Path:
    """Where releasekit keeps what must not live in the cache (the cache key)."""
    if os.environ.get(STATE_ENV):
        return Path(os.environ[STATE_ENV])
    root = os.environ.get("XDG_STATE_HOME")
    return (Path(root) if root else Path.home() / ".local" / "state") / "releasekit"


def _private_dir(directory: Path) -> None:
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(directory)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise InputError(
            f"{directory}: the forge cache key's directory must be a directory of mode 0700 "
            f"owned by this user (it is {oct(st.st_mode & 0o7777)}, uid {st.st_uid}); refused"
        )


def cache_key(directory: Path | None = None) -> bytes:
    """This user's forge-cache HMAC key, created (32 random bytes, mode 0600) on first use."""
    directory = directory or state_dir()
    _private_dir(directory)
    path = directory / KEY_FILE
    if not os.path.lexists(path):
        # Under the entry lock and written whole (releasekit.atomic): a concurrent first use
        # waits, then reads the winner's complete key, never a short one.
        try:
            with atomic.entry_lock(path):
                if not os.path.lexists(path):
                    atomic.write_atomic(path, secrets.token_bytes(32), mode=0o600)
        except OSError as exc:
            raise InputError(f"{path}: cannot create the forge cache key ({exc.strerror})") from None
    try:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            raise UnsafeFileError(f"{path}: a symbolic link, not the forge cache key; refused")
        key = read_bounded(path, 4096)
    except OSError as exc:
        raise InputError(f"{path}: cannot read the forge cache key ({exc.strerror})") from None
    if st.st_uid != os.geteuid() or st.st_mode & 0o077 or len(key) < 32:
        raise InputError(
            f"{path}: the forge cache key must be 32 bytes or more, mode 0600, owned by this user; refused"
        )
    return key


def default_cache_dir() -> Path:
    """``$RELEASEKIT_CACHE/forge`` (default ``~/.cache/releasekit/forge``)."""
    root = os.environ.get("RELEASEKIT_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "releasekit") / "forge"
