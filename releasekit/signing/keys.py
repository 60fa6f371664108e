"""Signing keys: load a private key from a file or a descriptor, public keys to trust, make new ones.

Supported: ECDSA on P-256 with SHA-256 (DER signatures) and Ed25519. A key's ``keyid``
is the sha256 (hex) of its public key's DER SubjectPublicKeyInfo, so anyone holding the
public key computes the same id.

The private key's bytes never leave this module: error messages name the file or the
variable a key came from, never its content, and ``Signer``'s ``repr`` shows only the keyid.
"""

from __future__ import annotations

import hashlib
import os
import select
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from releasekit.bounded_read import read_bounded
from releasekit.errors import InputError

# Never read: the command line refuses a key in the environment of every command (issue 43);
# named here so that child_env's list and the refusal's tests are held to them.
ENV_KEY = "RELEASEKIT_SIGNING_KEY"
ENV_KEY_FILE = "RELEASEKIT_SIGNING_KEY_FILE"
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


def read_private_key_file(path: Path) -> bytes:
    """A private key file's bytes, refused when its group or others may read it (mode 0600, or 0400)."""
    data = read_key_file(path, "signing key")
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise InputError(f"signing key {path} cannot be read: {exc.strerror}") from None
    if mode & 0o077:
        raise InputError(
            f"signing key {path} is readable by its group or others (mode {stat.S_IMODE(mode):04o}); "
            f"make it private: chmod 600 {path}"
        )
    return data


# A pipe whose writer never closes it must not hang ``sign``: the whole key within this many seconds.
KEY_FD_DEADLINE_S = 5.0


def _read_ready(fd: int, deadline: float, where: str) -> bytes:
    """One read of ``fd`` once it is readable, or a refusal once ``deadline`` (monotonic) passed."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    left = deadline - time.monotonic()
    if left <= 0 or not poller.poll(left * 1000):
        raise InputError(
            f"{where}: no end of the key within {KEY_FD_DEADLINE_S:g}s (a pipe whose writer never closed it?)"
        )
    return os.read(fd, 8192)


def read_key_fd(fd: int) -> bytes:
    """The PEM key on descriptor ``fd`` (a pipe from a secret store, say), read to its end and closed:
    at most ``KEY_MAX_BYTES``, within ``KEY_FD_DEADLINE_S``."""
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
    deadline = time.monotonic() + KEY_FD_DEADLINE_S
    try:
        while size <= KEY_MAX_BYTES and (chunk := _read_ready(fd, deadline, where)):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise InputError(f"{where}: cannot be read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if size > KEY_MAX_BYTES:
        raise InputError(f"{where}: over {KEY_MAX_BYTES} bytes, not a PEM key")
    return b"".join(chunks)


def load_signer(key_file: Path | None = None, *, key_fd: int | None = None) -> Signer | None:
    """The signing key given, or None when none is: ``key_file`` (``--key``, a file only its owner may
    read) or ``key_fd`` (``--key-fd``, read bounded and within ``KEY_FD_DEADLINE_S``). Never the
    environment: a variable is readable in ``/proc/<pid>/environ`` for the process's whole life
    (issue 43); the command line refuses one before any command starts. Both at once: an error."""
    if key_file is not None and key_fd is not None:
        raise InputError("both --key and --key-fd are given; give one")
    if key_file is not None:
        return Signer(
            private_from_pem(read_private_key_file(key_file), f"signing key {key_file}"),
            f"file {key_file}",
        )
    if key_fd is not None:
        return Signer(
            private_from_pem(read_key_fd(key_fd), f"signing key on descriptor {key_fd}"), f"fd {key_fd}"
        )
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
