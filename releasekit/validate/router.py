"""releasekit's own prefill/decode router: a small OpenAI-API proxy run inside the releasekit process.

Why in the releasekit process and not in a container: it is harness code, like the client
that measures, not part of the candidate; it needs nothing from the image, and its state
(which backend failed, how) is right here. Engines that ship their own gateway (TokenSpeed's
``smg``) run that gateway as a process of the topology instead.

A completion request goes to a prefill worker first with ``max_tokens`` 1 and no streaming
(the prefill worker computes the prompt's KV cache and hands it over through the engine's
KV connector), then the original request goes to a decode worker, whose answer — streamed
or not — is passed through byte for byte. Workers are chosen round robin. ``/health`` is
200 only while every backend's ``/health`` is; every other path (``/v1/models``, ``/metrics``,
``/tokenize``, ...) is answered by a decode worker (``/metrics`` by a prefill worker when
the adapter says so). A backend that fails is answered with 502 and a JSON error naming it.
"""

from __future__ import annotations

import itertools
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from releasekit.validate.topology import RouterSpec

COMPLETION_PATHS = ("/v1/completions", "/v1/chat/completions")


class Router:
    """Listens on 127.0.0.1:``port``; ``backends`` maps process names to base URLs."""

    def __init__(
        self, spec: RouterSpec, backends: dict[str, str], port: int, *, timeout_s: float = 600
    ) -> None:
        self.spec = spec
        self.backends = backends
        self.port = port
        self.timeout_s = timeout_s
        self._prefill = itertools.cycle(spec.prefill)
        self._decode = itertools.cycle(spec.decode)
        self._lock = threading.Lock()
        self.requests = 0
        self.failures = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def pick(self, role: str) -> str:
        with self._lock:
            return next(self._prefill if role == "prefill" else self._decode)

    def start(self) -> None:
        router = self

        class Handler(_Handler):
            owner = router

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="releasekit-router", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()


class _Handler(BaseHTTPRequestHandler):
    owner: Router
    # HTTP/1.0: every response ends when the connection closes, so a stream passes through unchanged.
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        return

    def _json(self, status: int, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _fail(self, name: str, what: str) -> None:
        with self.owner._lock:
            self.owner.failures += 1
        self._json(
            502, {"error": {"message": f"router: {name} {what}", "type": "bad_gateway", "backend": name}}
        )

    relayed = False

    def _relay(self, response: httpx.Response) -> None:
        self.relayed = True
        self.send_response(response.status_code)
        self.send_header("Content-Type", response.headers.get("content-type", "application/json"))
        self.end_headers()
        for chunk in response.iter_raw():
            self.wfile.write(chunk)
            self.wfile.flush()

    def do_GET(self) -> None:  # noqa: N802 - the base class's name
        owner = self.owner
        if self.path == "/health":
            bad = []
            for name in [*owner.spec.prefill, *owner.spec.decode]:
                try:
                    if httpx.get(owner.backends[name] + "/health", timeout=5).status_code != 200:
                        bad.append(name)
                except httpx.HTTPError:
                    bad.append(name)
            if bad:
                self._json(503, {"unhealthy": bad})
            else:
                self._json(200, {"status": "ok"})
            return
        name = (
            owner.pick("prefill")
            if self.path == "/metrics" and owner.spec.metrics_from == "prefill"
            else owner.pick("decode")
        )
        self._pass_through(name, "GET", None)

    def _pass_through(self, name: str, method: str, body: bytes | None) -> None:
        """Anything but a completion (models, metrics, tokenize, ...) is answered by one worker."""
        owner = self.owner
        try:
            with httpx.stream(
                method,
                owner.backends[name] + self.path,
                content=body,
                timeout=owner.timeout_s,
                headers={"Content-Type": self.headers.get("Content-Type", "application/json")},
            ) as r:
                self._relay(r)
        except httpx.HTTPError as exc:
            if not self.relayed:
                self._fail(name, f"did not answer {method} {self.path}: {type(exc).__name__}")

    def do_POST(self) -> None:  # noqa: N802 - the base class's name
        owner = self.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path not in COMPLETION_PATHS:
            self._pass_through(owner.pick("decode"), "POST", raw)
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._json(400, {"error": {"message": "router: the request body is not JSON"}})
            return
        with owner._lock:
            owner.requests += 1
        prefill_body = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
        prefill_body.update({"max_tokens": 1, "stream": False, **owner.spec.prefill_fields})
        if "max_completion_tokens" in prefill_body:
            prefill_body["max_completion_tokens"] = 1
        prefill = owner.pick("prefill")
        try:
            r = httpx.post(owner.backends[prefill] + self.path, json=prefill_body, timeout=owner.timeout_s)
        except httpx.HTTPError as exc:
            self._fail(prefill, f"failed the prefill request: {type(exc).__name__}")
            return
        if r.status_code != 200:
            self._fail(prefill, f"answered the prefill request with {r.status_code}: {r.text[:200]}")
            return
        decode_body = dict(body)
        if owner.spec.handoff_field:
            handoff = r.json().get(owner.spec.handoff_field)
            if handoff is not None:
                decode_body[owner.spec.handoff_field] = handoff
        decode = owner.pick("decode")
        try:
            with httpx.stream(
                "POST", owner.backends[decode] + self.path, json=decode_body, timeout=owner.timeout_s
            ) as d:
                self._relay(d)
        except httpx.HTTPError as exc:
            # A stream cut mid-way: the status line is gone, the client sees the body end early.
            if not self.relayed:
                self._fail(decode, f"failed the decode request: {type(exc).__name__}")
            else:
                with owner._lock:
                    owner.failures += 1
