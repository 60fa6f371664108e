"""A small OpenAI-compatible client: completions, streamed with per-chunk timestamps.

Our own client (not a benchmark binary in the image) so that the same code measures
every engine, and so TTFT/ITL come from the bytes as they arrive.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence

import httpx
from pydantic import BaseModel, Field


class Completion(BaseModel):
    text: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    ttft_s: float | None = None
    latency_s: float = 0.0
    chunk_times_s: list[float] = Field(
        default_factory=list, description="arrival of each text chunk, from send"
    )
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def _payload(model: str, prompt: str | list[int], max_tokens: int, *, stream: bool, **extra: object) -> dict:
    body: dict[str, object] = {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    body.update({k: v for k, v in extra.items() if v is not None})
    return body


def absorb_event(data: str, out: Completion, t: float) -> None:
    event = json.loads(data)
    for choice in event.get("choices") or []:
        piece = choice.get("text") or ""
        if piece:
            if out.ttft_s is None:
                out.ttft_s = t
            out.chunk_times_s.append(t)
            out.text += piece
    usage = event.get("usage")
    if usage:
        out.prompt_tokens = usage.get("prompt_tokens")
        out.completion_tokens = usage.get("completion_tokens")


class EngineClient:
    def __init__(self, base_url: str, model: str, timeout_s: float = 300.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout_s = timeout_s

    def get_text(self, path: str) -> str:
        r = httpx.get(self.base_url + path, timeout=30)
        r.raise_for_status()
        return r.text

    def tokenize(self, text: str) -> list[int]:
        r = httpx.post(self.base_url + "/tokenize", json={"model": self.model, "prompt": text}, timeout=60)
        r.raise_for_status()
        return list(r.json()["tokens"])

    def complete(self, prompt: str | list[int], max_tokens: int, **extra: object) -> Completion:
        """Streamed completion at temperature 0; errors come back in the result, never raised."""
        return asyncio.run(self.acomplete_one(prompt, max_tokens, **extra))

    async def acomplete_one(self, prompt: str | list[int], max_tokens: int, **extra: object) -> Completion:
        async with httpx.AsyncClient(timeout=httpx.Timeout(self.timeout_s, connect=10)) as http:
            return await self.acomplete(http, prompt, max_tokens, **extra)

    async def acomplete(
        self, http: httpx.AsyncClient, prompt: str | list[int], max_tokens: int, **extra: object
    ) -> Completion:
        out = Completion()
        start = time.perf_counter()
        body = _payload(self.model, prompt, max_tokens, stream=True, **extra)
        try:
            async with asyncio.timeout(self.timeout_s):
                async with http.stream("POST", self.base_url + "/v1/completions", json=body) as resp:
                    if resp.status_code != 200:
                        detail = (await resp.aread()).decode("utf-8", "replace")[:300]
                        out.error = f"HTTP {resp.status_code}: {detail}"
                        return out
                    async for line in resp.aiter_lines():
                        if not line.startswith("data:"):
                            continue
                        data = line[5:].strip()
                        if data == "[DONE]":
                            break
                        absorb_event(data, out, time.perf_counter() - start)
        except TimeoutError:
            out.error = f"no complete answer within {self.timeout_s:.0f} s"
        except (httpx.HTTPError, json.JSONDecodeError) as exc:
            out.error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        out.latency_s = time.perf_counter() - start
        return out

    async def run_concurrent(
        self, prompts: Sequence[list[int] | str], max_tokens: int, concurrency: int, **extra: object
    ) -> tuple[list[Completion], float]:
        """All prompts with at most ``concurrency`` in flight; (results in order, wall seconds)."""
        gate = asyncio.Semaphore(concurrency)
        limits = httpx.Limits(max_connections=concurrency + 2, max_keepalive_connections=concurrency + 2)
        async with httpx.AsyncClient(
            timeout=httpx.Timeout(self.timeout_s, connect=10), limits=limits
        ) as http:

            async def one(p: list[int] | str) -> Completion:
                async with gate:
                    return await self.acomplete(http, p, max_tokens, **extra)

            start = time.perf_counter()
            results = await asyncio.gather(*(one(p) for p in prompts))
            return list(results), time.perf_counter() - start
