"""The environment of every program releasekit starts that is not git (git has its own, ``git/runner.py``).

A child process can read its parent's environment (``/proc/<ppid>/environ``) and its own; a build
backend, a hygiene tool or pip runs code releasekit did not write. So a child gets an allow-list of
releasekit's environment, never the whole of it, and a credential is never on that list, whatever a
manifest's ``pass_env`` or a caller's extra names ask for (issue 34, "keys apart").
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from releasekit.errors import InputError

# Every variable that carries a credential releasekit itself reads. The names are spelled out here
# (not imported) so that this module imports nothing but ``errors``; tests/test_child_env.py holds them to the
# constants of signing/keys.py, registry.py and forge/github.py.
SECRET_VARIABLES = frozenset(
    {
        "RELEASEKIT_SIGNING_KEY",
        "RELEASEKIT_SIGNING_KEY_FILE",
        "RELEASEKIT_REGISTRY_USERNAME",
        "RELEASEKIT_REGISTRY_PASSWORD",
        "RELEASEKIT_FORGE_TOKEN",
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "ACTIONS_RUNTIME_TOKEN",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    }
)

# What any program needs to start and find its tools, temporary space and locale; and, for those
# that reach a network (pip), the proxies and CA bundles.
BASE_INHERITED = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "TZ", "LANG", "LC_ALL", "LC_CTYPE", "TERM",
        "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
        "SSL_CERT_FILE", "SSL_CERT_DIR", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE",
        "http_proxy", "https_proxy", "no_proxy", "all_proxy",
        "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
    }
)  # fmt: skip


def is_secret(name: str) -> bool:
    """A credential's variable: one releasekit reads, or any of the signing key's family."""
    return name in SECRET_VARIABLES or name.startswith("RELEASEKIT_SIGNING_KEY")


def child_env(
    allowed: Iterable[str] = (),
    *,
    prefixes: tuple[str, ...] = (),
    set_: Mapping[str, str] | None = None,
    source: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """``source`` (default: ``os.environ``) cut to ``BASE_INHERITED``, ``allowed`` and the names that
    start with one of ``prefixes``, then ``set_`` on top; credentials are dropped from all three."""
    env_in = os.environ if source is None else source
    names = BASE_INHERITED | frozenset(allowed)
    env = {
        k: v
        for k, v in env_in.items()
        if (k in names or (prefixes and k.startswith(prefixes))) and not is_secret(k)
    }
    env.update({k: v for k, v in (set_ or {}).items() if not is_secret(k)})
    return env


def key_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """The signing key's variables set (non-empty) in ``environ`` (default: ``os.environ``), sorted."""
    env = os.environ if environ is None else environ
    return sorted(k for k, v in env.items() if v and k.startswith("RELEASEKIT_SIGNING_KEY"))


def refuse_key_in_environment(command: str, environ: Mapping[str, str] | None = None) -> None:
    """No command holds a signing key in its environment (issue 43, "keys live where component code
    never ran"). A variable stays in ``/proc/<pid>/environ`` for the whole run, unset or not, where
    any program of the same user can read it; and every command but ``sign`` starts programs. So the
    command line refuses to start (exit 2, one line naming the variable) before anything is read.
    ``sign`` reads the key only from ``--key FILE`` (mode 0600) or ``--key-fd N``, so a key in its
    environment is refused too, with that hint."""
    names = key_variables(environ)
    if not names:
        return
    name = names[0]
    if command == "sign":
        raise InputError(
            f"sign: ${name} is set; sign reads the key only from --key FILE (mode 0600) or --key-fd N, "
            "never from the environment (any program of this user can read it there): unset it"
        )
    raise InputError(
        f"{command}: ${name} is set; no command but `releasekit sign` may hold a signing key (the programs "
        f"{command} runs could read it from its environment): unset it here and sign afterwards with "
        "`releasekit sign DIR --key FILE`"
    )
