"""Signing keys: load a private key from a file, a descriptor or the environment, public keys to trust, make new ones.

Supported: ECDSA on P-256 with SHA-256 (DER signatures) and Ed25519. A key's ``keyid``
is the sha256 (hex) of its public key's DER SubjectPublicKeyInfo, so anyone holding the
public key computes the same id.

The private key's bytes never leave this module: error messages name the file or the
variable a key came from, never its content, and ``Signer``'s ``repr`` shows only the keyid.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from releasekit.bounded_read import read_bounded
from releasekit.errors import InputError

ENV_KEY = "RELEASEKIT_SIGNING_KEY"  # PEM text of the private key
ENV_KEY_FILE = "RELEASEKIT_SIGNING_KEY_FILE"  # path of a PEM private key file
PRIVATE_KEY_NAME = "releasekit.key"
PUBLIC_KEY_NAME = "releasekit.pub"

KeyType = Literal["ecdsa-p256", "ed25519"]
PrivateKey = ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey
PublicKey = ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey


def keyid_of(public: PublicKey) -> str:
    """sha256 hex of the DER SubjectPublicKeyInfo."""
    der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(der).hexdigest()


def key_type(key: PrivateKey | PublicKey) -> KeyType:
    if isinstance(key, ed25519.Ed25519PrivateKey | ed25519.Ed25519PublicKey):
        return "ed25519"
    return "ecdsa-p256"


def _check_supported(key: object, where: str) -> None:
    if isinstance(key, ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey):
        if not isinstance(key.curve, ec.SECP256R1):
            raise InputError(f"{where}: ECDSA key on {key.curve.name}; only P-256 (secp256r1) is supported")
        return
    if isinstance(key, ed25519.Ed25519PrivateKey | ed25519.Ed25519PublicKey):
        return
    raise InputError(
        f"{where}: unsupported key type {type(key).__name__.lstrip('_')}; use ECDSA P-256 or Ed25519"
    )


class Signer:
    """A loaded private key. Signs bytes; reveals nothing but its keyid and public key."""

    __slots__ = ("_key", "keyid", "public_key", "source", "type")

    def __init__(self, key: PrivateKey, source: str) -> None:
        self._key = key
        self.public_key: PublicKey = key.public_key()
        self.keyid = keyid_of(self.public_key)
        self.type: KeyType = key_type(key)
        self.source = source  # "file PATH" or "$VARIABLE": where it came from, never what it is

    def sign(self, data: bytes) -> bytes:
        if isinstance(self._key, ed25519.Ed25519PrivateKey):
            return self._key.sign(data)
        return self._key.sign(data, ec.ECDSA(hashes.SHA256()))

    def __repr__(self) -> str:
        return f"Signer(type={self.type}, keyid={self.keyid}, source={self.source})"

    __str__ = __repr__

    def __reduce__(self) -> str | tuple[object, ...]:  # never pickled into a cache or a subprocess
        raise TypeError("a Signer cannot be serialised")


def private_from_pem(data: bytes, where: str) -> PrivateKey:
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise InputError(f"{where}: the private key is encrypted; give an unencrypted PEM key") from None
    except (ValueError, UnsupportedAlgorithm):
        # cryptography's message may quote parts of the input: say only what went wrong.
        raise InputError(
            f"{where}: not a PEM private key (PKCS#8 or traditional), or a damaged one"
        ) from None
    _check_supported(key, where)
    return key  # type: ignore[return-value]


# A PEM key is a few hundred bytes; anything far larger is not one, and is never read whole.
KEY_MAX_BYTES = 64 * 1024


def read_key_file(path: Path, what: str) -> bytes:
    """A key file's bytes: a regular file (no FIFO, no device), at most ``KEY_MAX_BYTES``."""
    try:
        return read_bounded(path, KEY_MAX_BYTES)
    except FileNotFoundError:
        raise InputError(f"{what} {path} does not exist") from None
    except InputError as exc:
        raise InputError(f"{what} {exc}") from None
    except OSError as exc:
        raise InputError(f"{what} {path} cannot be read: {exc.strerror}") from None


def read_key_fd(fd: int) -> bytes:
    """The PEM key on descriptor ``fd`` (a pipe from a secret store, say), read to its end and closed."""
    where = f"signing key on descriptor {fd}"
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        raise InputError(f"{where}: not an open descriptor") from None
    if stat.S_ISDIR(mode):
        os.close(fd)
        raise InputError(f"{where}: a directory, not a key")
    chunks: list[bytes] = []
    size = 0
    try:
        while size <= KEY_MAX_BYTES and (chunk := os.read(fd, 8192)):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise InputError(f"{where}: cannot be read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if size > KEY_MAX_BYTES:
        raise InputError(f"{where}: over {KEY_MAX_BYTES} bytes, not a PEM key")
    return b"".join(chunks)


def refuse_key_in_environment(command: str, environ: Mapping[str, str] | None = None) -> None:
    """``build`` and ``verify-provenance`` run git, Docker and builds: a key in their environment is in
    ``/proc/<pid>/environ`` for the whole run (unsetting it does not remove it there), where a program
    they start can read it. Refuse to start at all (issue 34)."""
    env = os.environ if environ is None else environ
    for name in (ENV_KEY, ENV_KEY_FILE):
        if env.get(name):
            raise InputError(
                f"{command}: ${name} is set; {command} never holds a signing key (the programs it runs could "
                f"read it): unset it here and sign afterwards with `releasekit sign DIR`"
            )


def load_signer(
    key_file: Path | None = None,
    *,
    key_fd: int | None = None,
    environ: dict[str, str] | None = None,
    scrub: bool = True,
) -> Signer | None:
    """The signing key the user configured, or None when none is. Only ``releasekit sign`` calls it
    with the process environment: that command starts no other program.

    Order: ``key_file`` (``--key``) or ``key_fd`` (``--key-fd``), then ``$RELEASEKIT_SIGNING_KEY_FILE``,
    then ``$RELEASEKIT_SIGNING_KEY`` (PEM text). Two sources at once is ambiguous: an error. With
    ``scrub`` (the default, when reading ``os.environ``) the PEM variable is removed from this
    process's environment once read.
    """
    env = os.environ if environ is None else environ
    if key_file is not None and key_fd is not None:
        raise InputError("both --key and --key-fd are given; give one")
    if key_file is not None:
        return Signer(
            private_from_pem(read_key_file(key_file, "signing key"), f"signing key {key_file}"),
            f"file {key_file}",
        )
    if key_fd is not None:
        return Signer(
            private_from_pem(read_key_fd(key_fd), f"signing key on descriptor {key_fd}"), f"fd {key_fd}"
        )
    from_file, inline = env.get(ENV_KEY_FILE), env.get(ENV_KEY)
    if from_file and inline:
        raise InputError(f"both ${ENV_KEY} and ${ENV_KEY_FILE} are set; set one")
    if from_file:
        path = Path(from_file)
        return Signer(
            private_from_pem(read_key_file(path, f"${ENV_KEY_FILE}:"), f"${ENV_KEY_FILE} ({path})"),
            f"file {path}",
        )
    if inline:
        signer = Signer(private_from_pem(inline.encode("utf-8"), f"${ENV_KEY}"), f"${ENV_KEY}")
        if scrub and environ is None:
            os.environ.pop(ENV_KEY, None)
        return signer
    return None


def public_from_pem(data: bytes, where: str) -> PublicKey:
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm):
        if b"PRIVATE KEY" in data:
            raise InputError(
                f"{where}: is a private key; trust the public key (releasekit keys show-public)"
            ) from None
        raise InputError(f"{where}: not a PEM public key (SubjectPublicKeyInfo)") from None
    _check_supported(key, where)
    return key  # type: ignore[return-value]


def load_public_key(path: Path) -> PublicKey:
    return public_from_pem(read_key_file(path, "public key"), f"public key {path}")


@dataclass
class TrustedKeys:
    """The public keys whose signatures are accepted, by keyid."""

    keys: dict[str, PublicKey] = field(default_factory=dict)

    def add(self, key: PublicKey) -> str:
        keyid = keyid_of(key)
        self.keys[keyid] = key
        return keyid

    @property
    def keyids(self) -> list[str]:
        return sorted(self.keys)

    def __bool__(self) -> bool:
        return bool(self.keys)

    def verify(self, keyid: str, signature: bytes, data: bytes) -> bool:
        key = self.keys.get(keyid)
        if key is None:
            return False
        try:
            if isinstance(key, ed25519.Ed25519PublicKey):
                key.verify(signature, data)
            else:
                key.verify(signature, data, ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            return False
        return True


def load_trusted_keys(paths: list[Path]) -> TrustedKeys:
    trusted = TrustedKeys()
    for path in paths:
        trusted.add(load_public_key(path))
    return trusted


def generate(key_type_: KeyType = "ecdsa-p256") -> PrivateKey:
    if key_type_ == "ed25519":
        return ed25519.Ed25519PrivateKey.generate()
    if key_type_ == "ecdsa-p256":
        return ec.generate_private_key(ec.SECP256R1())
    raise InputError(f"unknown key type {key_type_!r} (ecdsa-p256 or ed25519)")


def public_pem(public: PublicKey) -> bytes:
    return public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def write_key_pair(out: Path, key_type_: KeyType = "ecdsa-p256") -> tuple[Path, Path, str]:
    """``OUT/releasekit.key`` (mode 0600, PKCS#8 PEM) and ``OUT/releasekit.pub``; never overwrites."""
    out.mkdir(parents=True, exist_ok=True)
    private_path, public_path = out / PRIVATE_KEY_NAME, out / PUBLIC_KEY_NAME
    for path in (private_path, public_path):
        if path.exists():
            raise InputError(f"{path} already exists; refusing to overwrite a key")
    key = generate(key_type_)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    try:
        fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise InputError(f"cannot create {private_path}: {exc.strerror}") from None
    with os.fdopen(fd, "wb") as handle:
        handle.write(pem)
    os.chmod(private_path, 0o600)  # whatever the umask
    public_path.write_bytes(public_pem(key.public_key()))
    return private_path, public_path, keyid_of(key.public_key())
