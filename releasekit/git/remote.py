"""Which repository addresses and refs releasekit will hand to git, decided before git sees them.

git treats a URL or ref that starts with ``-`` as an option and ``ext::`` URLs as a
command to run, so everything that comes from a manifest or the command line passes
through here first. Credentials embedded in URLs are kept only in memory (for the fetch
itself) and stripped from everything releasekit writes.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from releasekit.errors import InputError

ALLOW_LOCAL_ENV = "RELEASEKIT_ALLOW_LOCAL_REPOS"

# git@host:owner/repo(.git): scp-like ssh. The user part must not start with "-".
_SCP_LIKE = re.compile(
    r"^(?P<user>[A-Za-z0-9_][A-Za-z0-9._-]*@)?(?P<host>[A-Za-z0-9][A-Za-z0-9.-]*):(?P<path>[^/\\].*|/.*)$"
)
# A ref git would accept and that cannot be read as an option or a revision expression.
_BAD_REF_CHARS = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")


def local_repos_allowed(flag: bool = False) -> bool:
    return flag or os.environ.get(ALLOW_LOCAL_ENV, "") in ("1", "true", "yes")


@dataclass(frozen=True)
class RemoteURL:
    """A checked repository address.

    ``url`` is what git is given (may carry credentials); ``public`` is what may be
    written anywhere (lock, logs, labels, findings).
    """

    url: str
    public: str
    scheme: str  # https | ssh | file

    @property
    def is_local(self) -> bool:
        return self.scheme == "file"


def strip_credentials(url: str) -> str:
    """The URL without user:password@ (https) — ssh user names like git@ are kept: they are not secrets."""
    if "://" not in url:
        return url
    parts = urlsplit(url)
    if parts.scheme in ("http", "https") and ("@" in parts.netloc):
        host = parts.netloc.rsplit("@", 1)[1]
        return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    if parts.scheme == "ssh" and "@" in parts.netloc:
        user, host = parts.netloc.rsplit("@", 1)
        # ssh://user:password@host: drop the password, keep the login name.
        user = user.split(":", 1)[0]
        return urlunsplit((parts.scheme, f"{user}@{host}", parts.path, parts.query, parts.fragment))
    return url


def check_remote(url: str, *, allow_local: bool = False, base_dir: Path | None = None) -> RemoteURL:
    """Accept https:// and ssh remotes; file:// and plain paths only when local repos are allowed."""
    text = url.strip()
    if not text:
        raise InputError("empty repository URL")
    if text.startswith("-"):
        raise InputError(f"refusing repository URL that starts with '-': {strip_credentials(text)!r}")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text):
        raise InputError("refusing repository URL with control characters")
    if "::" in text.split("/", 1)[0]:
        # git's transport::address syntax (ext::, fd::, remote helpers).
        raise InputError(f"refusing git transport syntax in repository URL: {text.split('::', 1)[0]}::")
    allowed_local = local_repos_allowed(allow_local)
    if "://" in text:
        parts = urlsplit(text)
        scheme = parts.scheme.lower()
        if scheme == "https":
            if not parts.hostname:
                raise InputError(f"repository URL has no host: {strip_credentials(text)}")
            return RemoteURL(text, strip_credentials(text), "https")
        if scheme == "ssh":
            if not parts.hostname or parts.hostname.startswith("-") or (parts.username or "").startswith("-"):
                raise InputError(f"refusing ssh URL: {strip_credentials(text)}")
            return RemoteURL(text, strip_credentials(text), "ssh")
        if scheme == "file":
            if not allowed_local:
                raise InputError(
                    f"local repository {text} refused",
                    hint=f"use --allow-local-repos or {ALLOW_LOCAL_ENV}=1 for local repositories",
                )
            path = Path(parts.path)
            return RemoteURL(path.as_uri(), path.as_uri(), "file")
        raise InputError(f"refusing repository URL scheme {scheme}:// (only https:// and ssh are allowed)")
    scp = _SCP_LIKE.match(text)
    if scp and not text.startswith((".", "/")) and "/" not in text.split(":", 1)[0]:
        return RemoteURL(text, text, "ssh")
    # A plain path.
    if not allowed_local:
        raise InputError(
            f"local repository path {text} refused",
            hint=f"use --allow-local-repos or {ALLOW_LOCAL_ENV}=1 for local repositories",
        )
    path = Path(text)
    if not path.is_absolute():
        path = (base_dir or Path.cwd()) / path
    path = path.resolve()
    return RemoteURL(path.as_uri(), path.as_uri(), "file")


def check_ref(ref: str) -> str:
    """A branch/ref name or a full/abbreviated SHA that cannot be mistaken for an option or a rev expression."""
    if not ref or ref.startswith("-"):
        raise InputError(f"refusing ref {ref!r}: empty or starts with '-'")
    if (
        _BAD_REF_CHARS.search(ref)
        or ".." in ref
        or ref.endswith((".", "/", ".lock"))
        or "@{" in ref
        or ref == "@"
    ):
        raise InputError(f"refusing ref {ref!r}: not a plain ref name")
    if "//" in ref or ref.startswith("/"):
        raise InputError(f"refusing ref {ref!r}: not a plain ref name")
    return ref


_HEX = re.compile(r"^[0-9a-f]{4,64}$")


def is_hex_sha(text: str) -> bool:
    return bool(_HEX.match(text))
