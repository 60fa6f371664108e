"""The forge adapter: the only place that speaks to GitHub (or GitHub Enterprise).

``GitHubForge(api_url).pulls(owner, name, numbers)`` returns what the forge says about
those pull requests (``PullFacts``), through the githubkit client: a token from
``GITHUB_TOKEN``/``GH_TOKEN`` (never printed, logged or stored), rate limits waited out up
to a bound, 5xx retried with backoff, pagination by ``Link`` headers, and conditional
requests whose ETags and bodies are cached on disk (``etag_cache``) so a re-read of an
unchanged forge costs no rate limit. A pull request the forge answers 404 for is reported
as missing, never raised.
"""

from __future__ import annotations

from releasekit.forge.errors import ForgeFailed, ForgeUnreachable
from releasekit.forge.github import GitHubForge, GitHubForges, PullFacts, PullsRead, token_from_env
from releasekit.forge.location import ForgeLocation, locate

__all__ = [
    "ForgeFailed",
    "ForgeLocation",
    "ForgeUnreachable",
    "GitHubForge",
    "GitHubForges",
    "PullFacts",
    "PullsRead",
    "locate",
    "token_from_env",
]
