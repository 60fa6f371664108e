"""GitHub and GitHub Enterprise through githubkit: pull requests by number.

One listing of the repository's pull requests, newest first, 100 a page, following the
``Link: rel="next"`` header until every wanted number has been seen (or the pages go
below the smallest, or ``MAX_PAGES`` were read); each number still unseen is asked for
alone, and a 404 there makes it *missing*. Only the fields releasekit records are read from the JSON, so an Enterprise
server whose answers lack newer fields still works.

Errors: no answer at all is ``ForgeUnreachable``; a rate limit whose reset is further away
than ``max_wait`` seconds, a 5xx that outlasts the retries, or a refused token is
``ForgeFailed``. Messages name the API URL and never a credential.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from releasekit.forge.errors import ForgeFailed, ForgeUnreachable

if TYPE_CHECKING:
    import httpx
    from githubkit import GitHub
    from githubkit.exception import GitHubException
    from githubkit.typing import RetryOption

    from releasekit.forge.etag_cache import EtagCachingTransport

TOKEN_ENV = ("GITHUB_TOKEN", "GH_TOKEN")
MAX_WAIT_ENV = "RELEASEKIT_FORGE_MAX_WAIT"
DEADLINE_ENV = "RELEASEKIT_FORGE_DEADLINE"
DEFAULT_MAX_WAIT = 60.0  # seconds a rate limit may be waited out before the read fails
SERVER_RETRIES = 3
PER_PAGE = 100
MAX_PAGES = 10  # past this many pages (an old PR of a busy repository) each PR is asked for alone

PRState = Literal["open", "closed", "merged"]


def token_from_env() -> str | None:
    """``GITHUB_TOKEN``, else ``GH_TOKEN``; None: unauthenticated (60 requests an hour on github.com)."""
    for name in TOKEN_ENV:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


def max_wait_from_env() -> float:
    raw = os.environ.get(MAX_WAIT_ENV, "").strip()
    try:
        return max(0.0, float(raw)) if raw else DEFAULT_MAX_WAIT
    except ValueError:
        return DEFAULT_MAX_WAIT


def deadline_from_env() -> float:
    """Seconds one request (connect, headers, body) may take in all (``RELEASEKIT_FORGE_DEADLINE``)."""
    from releasekit.forge.bounded_http import DEFAULT_DEADLINE

    raw = os.environ.get(DEADLINE_ENV, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_DEADLINE
    except ValueError:
        return DEFAULT_DEADLINE
    return value if value > 0 else DEFAULT_DEADLINE


@dataclass(frozen=True)
class PullFacts:
    number: int
    title: str
    state: PRState
    draft: bool
    base_ref: str
    head_sha: str
    merged_at: str | None
    merge_commit_sha: str | None  # only for a merged PR
    updated_at: str | None


@dataclass(frozen=True)
class PullsRead:
    found: dict[int, PullFacts] = field(default_factory=dict)
    missing: frozenset[int] = frozenset()  # the forge answered 404
    requests: int = 0  # HTTP requests sent (retries included)
    revalidated: int = 0  # of them, answered 304 and served from the ETag cache


def _facts(data: Any) -> PullFacts | None:
    if not isinstance(data, dict) or not isinstance(data.get("number"), int):
        return None
    merged_at = data.get("merged_at") or None
    state: PRState = "merged" if merged_at else ("open" if data.get("state") == "open" else "closed")
    base = data["base"] if isinstance(data.get("base"), dict) else {}
    head = data["head"] if isinstance(data.get("head"), dict) else {}
    return PullFacts(
        number=data["number"],
        title=str(data.get("title") or ""),
        state=state,
        draft=bool(data.get("draft", False)),
        base_ref=str(base.get("ref") or ""),
        head_sha=str(head.get("sha") or ""),
        merged_at=str(merged_at) if merged_at else None,
        merge_commit_sha=(data.get("merge_commit_sha") or None) if merged_at else None,
        updated_at=data.get("updated_at") or None,
    )


def _json(resp: Any, where: str) -> Any:
    """The answer's JSON under the manifest loader's limits (depth, values, digits, unique keys)."""
    from releasekit.errors import InputError
    from releasekit.records.base import strict_json

    try:
        text = resp.content.decode("utf-8")
    except UnicodeDecodeError:
        raise ForgeFailed(f"{where}: the answer is not UTF-8 (HTTP {resp.status_code})") from None
    try:
        return strict_json(text, where)
    except InputError as exc:
        raise ForgeFailed(f"{exc} (HTTP {resp.status_code})") from None


def _next_link(header: str | None) -> str | None:
    """The ``rel="next"`` URL of a ``Link`` header (RFC 8288, as GitHub writes it)."""
    for part in (header or "").split(","):
        url, _, params = part.partition(";")
        if 'rel="next"' in params.replace(" ", ""):
            return url.strip().strip("<>")
    return None


class GitHubForge:
    def __init__(
        self,
        api_url: str,
        *,
        token: str | None = None,
        cache_dir: Path | None = None,
        max_wait: float | None = None,
        backoff: float = 1.0,
        timeout: float = 20.0,
        deadline: float | None = None,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self._token = token
        self._cache_dir = cache_dir
        self.max_wait = max_wait_from_env() if max_wait is None else max_wait
        self.backoff = backoff
        self.timeout = timeout
        self.deadline = deadline_from_env() if deadline is None else deadline
        self._requests = 0
        self._waited = 0.0  # seconds spent waiting out rate limits in this read
        self._transport: EtagCachingTransport | None = None

    # --- the client -----------------------------------------------------------------------

    def _retry(self, exc: GitHubException, count: int) -> RetryOption:
        from githubkit.exception import RateLimitExceeded, RequestFailed
        from githubkit.typing import RetryOption

        if isinstance(exc, RateLimitExceeded):
            # The bound is on the whole read: several short limits in a row add up.
            wait = max(exc.retry_after.total_seconds(), 0.05)
            if self._waited + wait <= self.max_wait and count < 3:
                self._waited += wait
                return RetryOption(True, timedelta(seconds=wait))
            return RetryOption(False)
        if isinstance(exc, RequestFailed) and exc.response.status_code >= 500 and count < SERVER_RETRIES:
            return RetryOption(True, timedelta(seconds=self.backoff * 2**count))
        return RetryOption(False)

    def _count(self, request: object) -> None:
        self._requests += 1

    def _client(self) -> GitHub:
        import httpx
        from githubkit import GitHub, TokenAuthStrategy, UnauthAuthStrategy

        from releasekit.forge.bounded_http import BoundedTransport
        from releasekit.forge.etag_cache import EtagCachingTransport

        # githubkit logs retries with tracebacks; with no handler Python would print them to stderr.
        logging.getLogger("githubkit").addHandler(logging.NullHandler())
        logging.getLogger("githubkit").propagate = False
        api = httpx.URL(self.api_url)  # as httpx writes it: the scheme and host lowercased
        transport: httpx.BaseTransport = BoundedTransport(
            deadline=self.deadline, origin=f"{api.scheme}://{api.netloc.decode()}"
        )
        if self._cache_dir is not None:
            transport = self._transport = EtagCachingTransport(self._cache_dir, transport)
        auth = TokenAuthStrategy(self._token) if self._token else UnauthAuthStrategy()
        return GitHub(
            auth,
            base_url=self.api_url + "/",
            user_agent="releasekit",
            timeout=self.timeout,
            trust_env=False,
            # A renamed repository answers 301 on the same origin; the transport refuses any other.
            follow_redirects=True,
            transport=transport,
            http_cache=False,  # the on-disk ETag cache above replaces githubkit's in-memory one
            auto_retry=self._retry,
            event_hooks={"request": [self._count]},
        )

    def _failure(self, exc: Exception, what: str) -> Exception:
        from githubkit.exception import RateLimitExceeded, RequestFailed, RequestTimeout

        where = f"forge {self.api_url}: {what}"
        if isinstance(exc.__cause__, (ForgeFailed, ForgeUnreachable)):
            return exc.__cause__  # a bound of releasekit's own transport, already one line
        if isinstance(exc, RateLimitExceeded):
            wait = int(exc.retry_after.total_seconds())
            hint = "" if self._token else "; set GITHUB_TOKEN for a higher limit"
            return ForgeFailed(
                f"{where}: rate limit exhausted, resets in {wait} s, more than the {self.max_wait:g} s "
                f"releasekit waits ({MAX_WAIT_ENV}){hint}"
            )
        if isinstance(exc, RequestFailed):
            code = exc.response.status_code
            if code == 401:
                return ForgeFailed(f"{where}: the token was refused (HTTP 401)")
            if code >= 500:
                return ForgeFailed(f"{where}: HTTP {code} after {SERVER_RETRIES} retries")
            return ForgeFailed(f"{where}: HTTP {code}")
        if isinstance(exc, RequestTimeout):
            return ForgeUnreachable(f"{where}: no answer within {self.timeout:g} s")
        cause = exc.__cause__ or exc
        return ForgeUnreachable(f"{where}: unreachable ({type(cause).__name__})")

    # --- reading --------------------------------------------------------------------------

    def _checked_url(self, url: str) -> str:
        """A pagination link must stay on the forge: the token goes with it."""
        ours, theirs = urlsplit(self.api_url), urlsplit(url)
        if (theirs.scheme, theirs.netloc) != (ours.scheme, ours.netloc) or not theirs.path.startswith(
            ours.path
        ):
            raise ForgeFailed(
                f"forge {self.api_url}: a pagination link leads off the forge ({theirs.netloc})"
            )
        return url

    def pulls(self, owner: str, name: str, numbers: Iterable[int]) -> PullsRead:
        """What the forge says about each wanted pull request of ``owner/name``."""
        wanted = set(numbers)
        found: dict[int, PullFacts] = {}
        if not wanted:
            return PullsRead()
        self._requests = 0
        self._waited = 0.0
        gh = self._client()
        with gh:
            self._list_pages(gh, owner, name, wanted, found)
            by_number, missing = self._read_one_by_one(gh, owner, name, sorted(wanted - found.keys()))
            found.update(by_number)
        revalidated = self._transport.revalidated if self._transport else 0
        return PullsRead(
            found=found, missing=frozenset(missing), requests=self._requests, revalidated=revalidated
        )

    def _list_pages(
        self, gh: GitHub, owner: str, name: str, wanted: set[int], found: dict[int, PullFacts]
    ) -> None:
        """The pull request list, newest first, page by page until nothing wanted can be on a later page."""
        from githubkit.exception import GitHubException

        what = f"list pull requests of {owner}/{name}"
        try:
            url: str | None = None
            first = True
            pages = 0
            while (first or url) and pages < MAX_PAGES:
                pages += 1
                if first:
                    resp = gh.rest.pulls.list(
                        owner, name, state="all", sort="created", direction="desc", per_page=PER_PAGE
                    )
                    first = False
                else:
                    assert url is not None
                    resp = gh.request("GET", self._checked_url(url))
                page = _json(resp, f"forge {self.api_url}: {what}")
                if not isinstance(page, list):
                    raise ForgeFailed(f"forge {self.api_url}: {what}: not a list of pull requests")
                numbers_seen = []
                for item in page:
                    facts = _facts(item)
                    if facts is None:
                        continue
                    numbers_seen.append(facts.number)
                    if facts.number in wanted:
                        found[facts.number] = facts
                if wanted <= found.keys() or (numbers_seen and min(numbers_seen) < min(wanted)):
                    break  # newest first: nothing wanted is on later pages
                url = _next_link(resp.headers.get("link"))
        except GitHubException as exc:
            raise self._failure(exc, what) from None

    def _read_one_by_one(
        self, gh: GitHub, owner: str, name: str, numbers: list[int]
    ) -> tuple[dict[int, PullFacts], set[int]]:
        """Each wanted pull request the list did not show, asked for by number; 404/410 is missing, not an error."""
        from githubkit.exception import GitHubException, RequestFailed

        found: dict[int, PullFacts] = {}
        missing: set[int] = set()
        for number in numbers:
            what = f"pull request {owner}/{name}#{number}"
            try:
                try:
                    one = gh.rest.pulls.get(owner, name, number)
                except RequestFailed as exc:
                    if exc.response.status_code in (404, 410):
                        missing.add(number)
                        continue
                    raise
                facts = _facts(_json(one, f"forge {self.api_url}: {what}"))
            except GitHubException as exc:
                raise self._failure(exc, what) from None
            if facts is None:
                raise ForgeFailed(f"forge {self.api_url}: {what}: not a pull request")
            found[number] = facts
        return found, missing


def _forge_cache_dir() -> Path:
    from releasekit.forge.etag_cache import default_cache_dir

    return default_cache_dir()


@dataclass(frozen=True)
class GitHubForges:
    """Opens the client of one API URL (``forges(api_url)``), every one with the same token and ETag cache:
    what a command makes at its edge and hands to the plan stage (docs/architecture.md, "Effects passed in").

    Made with no arguments, it takes the token from ``GITHUB_TOKEN``/``GH_TOKEN`` and the cache from
    ``$RELEASEKIT_CACHE/forge``, read when it is made. A client is made (not yet connected) per call.
    """

    token: str | None = field(default_factory=token_from_env, repr=False)  # never printed
    cache_dir: Path | None = field(default_factory=_forge_cache_dir)

    def __call__(self, api_url: str) -> GitHubForge:
        return GitHubForge(api_url, token=self.token, cache_dir=self.cache_dir)
