"""The command-line options of every command that takes signed evidence in (stage, publish, promote):
defined once, so that each says the same thing."""

from __future__ import annotations

import typer

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
