"""A GitHub-REST-shaped server on 127.0.0.1 for the forge tests.

It answers what the forge adapter asks, shaped from GitHub's REST reference: ``GET
/repos/{owner}/{repo}/pulls`` (``state``, ``per_page``, ``page``; newest first; a ``Link``
header with ``rel="next"``/``rel="last"``), ``GET /repos/{owner}/{repo}/pulls/{number}``
(404 ``{"message": "Not Found"}`` for an unknown number), an ``ETag`` on every 200 and a
304 for a matching ``If-None-Match``. Faults are queued: a 5xx, a 403 primary rate limit
with ``x-ratelimit-remaining: 0`` and ``x-ratelimit-reset``, a 429 with ``retry-after``.
Every request is logged with its status and whether it carried a token.

The API base is ``http://127.0.0.1:PORT/api/v3`` (GitHub Enterprise's layout), which a
manifest names as ``forge.api_url``: the client runs the same code path as for github.com.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

PREFIX = "/api/v3"


@dataclass
class PR:
    number: int
    head_sha: str
    title: str = ""
    state: str = "open"  # open | closed
    draft: bool = False
    base_ref: str = "main"
    merged_at: str | None = None
    merge_commit_sha: str | None = None
    updated_at: str = "2026-11-30T10:00:00Z"


@dataclass
class Logged:
    path: str
    status: int
    authorization: str | None


@dataclass
class GitHubServer:
    owner: str = "lab"
    repo: str = "vllm"
    max_per_page: int = 100
    pulls: dict[int, PR] = field(default_factory=dict)
    faults: list[tuple[int, dict[str, str]]] = field(default_factory=list)  # (status, headers), in order
    log: list[Logged] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                server._answer(self)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}{PREFIX}"

    def start(self) -> GitHubServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def add(self, pr: PR) -> PR:
        self.pulls[pr.number] = pr
        return pr

    def fail_next(self, status: int, headers: dict[str, str] | None = None, times: int = 1) -> None:
        self.faults.extend([(status, headers or {})] * times)

    def rate_limit_for(self, seconds: float) -> None:
        """The next request gets GitHub's primary rate-limit answer, resetting ``seconds`` from now."""
        reset = int(time.time() + seconds) + 1
        self.fail_next(
            403,
            {"x-ratelimit-limit": "60", "x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)},
        )

    def statuses(self) -> list[int]:
        return [entry.status for entry in self.log]

    # --- GitHub's JSON ----------------------------------------------------------------------

    def _pr_json(self, pr: PR) -> dict:
        base = f"{self.api_url}/repos/{self.owner}/{self.repo}"
        html = f"https://github.example/{self.owner}/{self.repo}/pull/{pr.number}"
        repo = {"id": 1, "name": self.repo, "full_name": f"{self.owner}/{self.repo}", "private": False}
        user = {"login": "dev", "id": 7, "type": "User"}
        return {
            "url": f"{base}/pulls/{pr.number}",
            "id": 1000 + pr.number,
            "node_id": f"PR_{pr.number}",
            "html_url": html,
            "number": pr.number,
            "state": pr.state,
            "locked": False,
            "title": pr.title or f"PR {pr.number}",
            "user": user,
            "body": None,
            "labels": [],
            "created_at": "2026-11-01T10:00:00Z",
            "updated_at": pr.updated_at,
            "closed_at": pr.merged_at if pr.state == "closed" else None,
            "merged_at": pr.merged_at,
            "merge_commit_sha": pr.merge_commit_sha,
            "draft": pr.draft,
            "head": {
                "label": f"dev:pr-{pr.number}",
                "ref": f"pr-{pr.number}",
                "sha": pr.head_sha,
                "repo": repo,
            },
            "base": {
                "label": f"{self.owner}:{pr.base_ref}",
                "ref": pr.base_ref,
                "sha": "0" * 40,
                "repo": repo,
            },
            "author_association": "MEMBER",
            "_links": {"self": {"href": f"{base}/pulls/{pr.number}"}, "html": {"href": html}},
        }

    # --- answering ---------------------------------------------------------------------------

    def _send(self, h: BaseHTTPRequestHandler, status: int, body: object, headers: dict[str, str]) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        h.send_response(status)
        h.send_header("content-type", "application/json; charset=utf-8")
        h.send_header("content-length", str(len(data)))
        for k, v in headers.items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)

    def _answer(self, h: BaseHTTPRequestHandler) -> None:
        url = urlsplit(h.path)
        with self._lock:
            fault = self.faults.pop(0) if self.faults else None
        auth = h.headers.get("authorization")
        if fault is not None:
            status, headers = fault
            message = "API rate limit exceeded" if status in (403, 429) else "Server Error"
            self.log.append(Logged(h.path, status, auth))
            self._send(
                h, status, {"message": message, "documentation_url": "https://docs.github.com/rest"}, headers
            )
            return
        prefix = f"{PREFIX}/repos/{self.owner}/{self.repo}/pulls"
        status, body, headers = 404, {"message": "Not Found"}, {}
        if url.path == prefix:
            query = parse_qs(url.query)
            per_page = min(int(query.get("per_page", ["30"])[0]), self.max_per_page)
            page = int(query.get("page", ["1"])[0])
            state = query.get("state", ["open"])[0]
            items = sorted(self.pulls.values(), key=lambda p: -p.number)
            items = [p for p in items if state == "all" or p.state == state]
            last = max(1, -(-len(items) // per_page))
            status, body = 200, [self._pr_json(p) for p in items[(page - 1) * per_page : page * per_page]]
            links = []
            link_base = (
                f"{self.api_url}/repos/{self.owner}/{self.repo}/pulls?state={state}&per_page={per_page}"
            )
            if page < last:
                links.append(f'<{link_base}&page={page + 1}>; rel="next"')
                links.append(f'<{link_base}&page={last}>; rel="last"')
            if links:
                headers["link"] = ", ".join(links)
        elif url.path.startswith(prefix + "/"):
            tail = url.path[len(prefix) + 1 :]
            if tail.isdigit() and int(tail) in self.pulls:
                status, body = 200, self._pr_json(self.pulls[int(tail)])
        if status == 200:
            etag = '"' + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:32] + '"'
            headers["etag"] = etag
            headers["x-ratelimit-remaining"] = "59"
            if h.headers.get("if-none-match") == etag:
                self.log.append(Logged(h.path, 304, auth))
                h.send_response(304)
                h.send_header("etag", etag)
                h.end_headers()
                return
        self.log.append(Logged(h.path, status, auth))
        self._send(h, status, body, headers)
