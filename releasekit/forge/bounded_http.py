"""Every forge answer read under two bounds: a size cap on the body and a total deadline.

httpx's ``timeout`` bounds each socket read, not a request: a server that sends one byte
every few seconds keeps a read alive forever, and a body of many GiB would be held whole in
memory. This transport sits under the client (and under the ETag cache) and reads the body
itself, in chunks, stopping past ``max_bytes`` (decoded bytes, so a compressed bomb counts at
its real size). The whole exchange (connect, headers, body) runs in a daemon thread that the
caller waits for at most ``deadline`` seconds: a socket read cannot be interrupted portably,
so a request past its deadline is abandoned (the thread dies with the process) and the read
fails with one line.
"""

from __future__ import annotations

import threading

import httpx

from releasekit.forge.errors import ForgeFailed, ForgeUnreachable
from releasekit.git.mirrors import OFFLINE_ENV, is_offline

# A page of 100 pull requests is 1-3 MB of JSON on github.com.
MAX_BODY_BYTES = 32 << 20
DEFAULT_DEADLINE = 60.0
_TRANSFER_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


class BoundedTransport(httpx.BaseTransport):
    def __init__(
        self,
        inner: httpx.BaseTransport | None = None,
        *,
        max_bytes: int = MAX_BODY_BYTES,
        deadline: float = DEFAULT_DEADLINE,
        origin: str | None = None,
    ) -> None:
        self.inner = inner or httpx.HTTPTransport()
        self.max_bytes = max_bytes
        self.deadline = deadline
        # ``scheme://host[:port]``: the one origin this transport talks to (the forge's API). A
        # redirect elsewhere is refused before it is asked: httpx would drop the token there, but
        # the answer of another origin would still be read as the forge's.
        self.origin = origin

    def _exchange(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        try:
            # A decoding view of the raw stream: the cap counts what would be held in memory.
            decoded = httpx.Response(
                response.status_code, headers=response.headers, stream=response.stream, request=request
            )
            chunks: list[bytes] = []
            size = 0
            for chunk in decoded.iter_bytes():
                size += len(chunk)
                if size > self.max_bytes:
                    raise ForgeFailed(
                        f"forge {request.url.host}: an answer over {self.max_bytes} bytes; refused"
                    )
                chunks.append(chunk)
        finally:
            response.close()
        headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in _TRANSFER_HEADERS]
        return httpx.Response(
            response.status_code,
            headers=headers,
            content=b"".join(chunks),
            request=request,
            extensions=response.extensions,
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        asked = f"{request.url.scheme}://{request.url.netloc.decode()}"
        if self.origin is not None and asked != self.origin:
            raise ForgeFailed(f"forge {self.origin}: sent to another origin ({asked}); refused")
        if is_offline():
            # --offline: no network at all; the forge is absent, as one that does not answer.
            raise ForgeUnreachable(
                f"forge {request.url.scheme}://{request.url.netloc.decode()}: not asked "
                f"(offline: --offline or {OFFLINE_ENV}=1)"
            )
        outcome: list[httpx.Response | BaseException] = []

        def run() -> None:
            try:
                try:
                    outcome.append(self._exchange(request))
                except (httpx.ReadError, httpx.RemoteProtocolError):
                    # A connection reset before any answer: a GET is asked once more (within the
                    # same deadline); a second reset is the forge's failure.
                    if request.method != "GET":
                        raise
                    outcome.append(self._exchange(request))
            except BaseException as exc:  # handed to the waiting thread, which raises it
                outcome.append(exc)

        worker = threading.Thread(target=run, name="releasekit-forge-request", daemon=True)
        worker.start()
        worker.join(self.deadline)
        if not outcome:
            raise ForgeFailed(
                f"forge {request.url.scheme}://{request.url.netloc.decode()}: "
                f"no complete answer within {self.deadline:g} s"
            )
        result = outcome[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def close(self) -> None:
        self.inner.close()
