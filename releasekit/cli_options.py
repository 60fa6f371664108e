"""The command-line options that several stages' commands share, each declared once.

Every ``<stage>/commands.py`` takes its shared options from here, rather than declaring them
again or importing another stage's commands module for them. Where a command words an
option's help its own way, the helper takes that text, so each command's ``--help`` stays
as it was. This module imports typer, so only commands modules import it: ``cli.py`` never
does, and ``releasekit --help``/``--version`` load neither typer's app nor any stage.
"""

from __future__ import annotations

from typing import Any

import typer

MIRROR_HELP = "URL=PATH: read repository URL from the local copy PATH (repeatable; also RELEASEKIT_MIRRORS)."


def json_flag(text: str | None = "machine-readable output") -> Any:
    """``--json``: print the result as JSON on stdout instead of the table."""
    return typer.Option(False, "--json", help=text)


def mirror_option(text: str = MIRROR_HELP) -> Any:
    """``--mirror URL=PATH`` (repeatable): read a repository from a local copy."""
    return typer.Option([], "--mirror", help=text)


def allow_local_flag(text: str) -> Any:
    """``--allow-local-repos``: accept file:// and local-path repositories (tests, the demo)."""
    return typer.Option(False, "--allow-local-repos", help=text)


OFFLINE_HELP = (
    "No repository, forge or wheel index over the network: every repository from its --mirror (a URL "
    "without one is named), the forge not asked (also RELEASEKIT_OFFLINE=1)."
)

JSON = json_flag()
MIRROR = mirror_option()
OFFLINE = typer.Option(False, "--offline", help=OFFLINE_HELP)

# The options by which a later stage (test, validate) on any host takes the staged candidate.
CANDIDATE_IMAGE = typer.Option(
    ...,
    "--image",
    help="The candidate image: ID or tag in the local Docker Engine, or REGISTRY/REPO@sha256:… with --staged.",
)
STAGED = typer.Option(
    None,
    "--staged",
    help="staging.json: pull --image by digest and refuse any image but the verified one.",
)

# build and verify-provenance no longer sign (issue 34: they run git, Docker and builds, which must not
# hold a key). The old option stays, hidden, only to say so in one line instead of "no such option".
REMOVED_SIGNING_KEY = typer.Option(None, "--signing-key", hidden=True)


def refuse_signing_key(given: object, command: str) -> None:
    if given is not None:
        from releasekit.errors import InputError

        raise InputError(
            f"{command} --signing-key was removed: {command} no longer signs; sign its output afterwards "
            "with `releasekit sign DIR --key FILE`"
        )


# The options of every command that takes signed evidence in (stage, publish, promote).
TRUSTED_KEY = typer.Option(
    [],
    "--trusted-key",
    help="public key (PEM) whose signatures on the evidence are accepted (repeatable); "
    "required when the evidence is signed",
)
REQUIRE_SIGNED = typer.Option(
    False,
    "--require-signed",
    help="refuse (exit 1) evidence that is not signed (DSSE envelopes); as the manifest's publish.signed does",
)

# Signing by the host that wrote a record (stage, validate, test): the key is read from the file
# only once the command's work is done, never from the environment (nothing it starts inherits it).
SIGNING_KEY_FILE = typer.Option(
    None,
    "--signing-key",
    help="private key (PEM file, mode 0600) to sign what this command writes (DSSE, <file>.dsse.json beside it); "
    "read only after the work is done",
)


def name_value_options(given: list[str], option: str, shape: str) -> dict[str, str]:
    """Repeated ``NAME=VALUE`` options as a mapping; anything else is bad input before any work
    (one line, exit 2) naming the option and the ``shape`` it expects (``COMPONENT=REF``)."""
    from releasekit.errors import InputError

    pairs: dict[str, str] = {}
    for item in given:
        name, eq, value = item.partition("=")
        if not eq or not name or not value:
            raise InputError(f"{option} {item!r}: expected {shape}")
        pairs[name] = value
    return pairs
