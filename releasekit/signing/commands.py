"""``releasekit keys``: make a signing key pair, show a key's public half and keyid; ``releasekit sign``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from releasekit.cli_options import JSON
from releasekit.errors import InputError
from releasekit.signing.keys import (
    KeyType,
    Signer,
    key_type,
    keyid_of,
    private_from_pem,
    public_from_pem,
    public_pem,
    read_key_file,
    write_key_pair,
)

if TYPE_CHECKING:
    from releasekit.signing.release import SignResult

keys_app = typer.Typer(help="Signing keys for the evidence (DSSE envelopes).", no_args_is_help=True)


def _print(as_json: bool, data: Mapping[str, object], text: str) -> None:
    if as_json:
        import json

        typer.echo(json.dumps(data, indent=2))
    else:
        typer.echo(text)


@keys_app.command("generate")
def generate_cmd(
    out: Path = typer.Option(
        ..., "--out", help="directory for releasekit.key (mode 0600) and releasekit.pub"
    ),
    type_: str = typer.Option("ecdsa-p256", "--type", help="ecdsa-p256 or ed25519"),
    as_json: bool = JSON,
) -> None:
    """Create a new key pair; prints its keyid. The private key is written, never printed."""
    if type_ not in ("ecdsa-p256", "ed25519"):
        raise InputError(f"--type {type_!r}: expected ecdsa-p256 or ed25519")
    kind: KeyType = "ed25519" if type_ == "ed25519" else "ecdsa-p256"
    private_path, public_path, keyid = write_key_pair(out, kind)
    _print(
        as_json,
        {"keyid": keyid, "type": kind, "private_key": str(private_path), "public_key": str(public_path)},
        f"keyid {keyid} ({kind})\nprivate key {private_path} (keep it secret)\npublic key {public_path}",
    )


@keys_app.command("show-public")
def show_public_cmd(
    file: Path = typer.Argument(..., help="a PEM private or public key file", show_default=False),
    as_json: bool = JSON,
) -> None:
    """Print the public key (PEM) and keyid of a private or public key file."""
    data = read_key_file(file, "key file")
    if b"PRIVATE KEY" in data:
        public = private_from_pem(data, f"key file {file}").public_key()
    else:
        public = public_from_pem(data, f"key file {file}")
    pem = public_pem(public).decode("ascii")
    _print(
        as_json,
        {"keyid": keyid_of(public), "type": key_type(public), "public_key_pem": pem},
        f"keyid {keyid_of(public)} ({key_type(public)})\n{pem.rstrip()}",
    )


def sign_cmd(
    directory: Path | None = typer.Argument(
        None, help="the release directory (build's output, verify-provenance's artifacts)", show_default=False
    ),
    key: Path | None = typer.Option(
        None, "--key", help="PEM private key file (ECDSA P-256 or Ed25519), mode 0600"
    ),
    key_fd: int | None = typer.Option(
        None,
        "--key-fd",
        help="read the PEM private key from this open file descriptor (a pipe), then close it",
    ),
    receipts: Path | None = typer.Option(
        None, "--receipts", help="the validation receipts to sign, when not in DIRECTORY/receipts"
    ),
    trusted_key: list[Path] = typer.Option(
        [],
        "--trusted-key",
        help="public key (PEM) whose envelopes on the earlier links count as signed (another host's; "
        "repeatable); this key's always do",
    ),
    reproduce_receipt: Path | None = typer.Option(
        None,
        "--reproduce-receipt",
        help="sign this reproduce receipt (`reproduce --receipt`) instead of a release directory, with the "
        "reproducer's own key",
    ),
    as_json: bool = JSON,
) -> None:
    """Sign a release directory's evidence once verification ended, and each later link once written.

    provenance.intoto.json, verification_summary.json, sbom.cdx.json, staging.json, receipts/*.json
    and tests/*.json in DIRECTORY each get a *.dsse.json envelope beside them, in the chain's order: a
    later link is signed only when the earlier ones in DIRECTORY are signed already (by this key or a
    --trusted-key), and all of them name one image and lock.

    The key comes from --key (a file only its owner may read) or --key-fd (a pipe, read within a few
    seconds), never from the environment, and is read only after every input was checked. This
    command starts no other program."""
    from releasekit.signing.keys import load_signer, load_trusted_keys
    from releasekit.signing.release import sign_release

    def load_key() -> Signer:
        signer = load_signer(key, key_fd=key_fd)
        if signer is None:
            raise InputError("no signing key: pass --key FILE (mode 0600) or --key-fd N")
        return signer

    if (directory is None) == (reproduce_receipt is None):
        raise InputError("name either a release DIRECTORY or --reproduce-receipt FILE")
    if reproduce_receipt is not None:
        return _sign_reproduction(reproduce_receipt, load_key, as_json)
    result = sign_release(
        directory or Path(), load_key, receipts=receipts, trusted=load_trusted_keys(list(trusted_key))
    )
    _print_signed(result, as_json)


def _print_signed(result: SignResult, as_json: bool) -> None:
    envelopes = sorted([*result.signed, *result.kept])
    _print(
        as_json,
        {
            "directory": result.directory,
            "image_id": result.image_id,
            "keyid": result.keyid,
            "signed": result.signed,
            "kept": result.kept,
        },
        f"signed by {result.keyid[:16]}: {', '.join(envelopes)}"
        + (f" ({len(result.kept)} already signed by this key, kept)" if result.kept else ""),
    )


def _sign_reproduction(receipt: Path, load_key: Callable[[], Signer], as_json: bool) -> None:
    """The receipt checked to be one (exit 2 otherwise), then the key read, then its envelope written."""
    from releasekit.bounded_read import read_bounded
    from releasekit.records.base import record_from_bytes
    from releasekit.records.reproduce_receipt import ReproduceReceipt
    from releasekit.signing.statements import envelope_path, sign_reproduce_receipt_file

    try:
        raw = read_bounded(receipt, ReproduceReceipt.max_bytes, within=receipt.parent)
    except FileNotFoundError:
        raise InputError(f"--reproduce-receipt {receipt}: no such file") from None
    record = record_from_bytes(ReproduceReceipt, raw, str(receipt))
    signer = load_key()
    sign_reproduce_receipt_file(signer, receipt)
    envelope = envelope_path(receipt)
    _print(
        as_json,
        {"receipt": str(receipt), "envelope": str(envelope), "keyid": signer.keyid, "digest": record.digest},
        f"signed by {signer.keyid[:16]}: {envelope.name} (reproduction of {record.digest})",
    )


def register(app: typer.Typer) -> None:
    """Add ``releasekit keys ...`` and ``releasekit sign`` to the root app."""
    app.add_typer(keys_app, name="keys")
    app.command("sign")(sign_cmd)
