"""The narrow adapter to an OCI registry's HTTP API (distribution spec v2).

Only what staging, publishing and reproducing need: read a manifest by tag or digest, check
that an image's blobs exist and its config is the expected image ID, upload small blobs
(attachments), copy an image by digest from one repository to another (a cross-repository
mount in one registry, a streamed copy between two), put a manifest under a tag, list tags. Credentials
come from the environment or the Docker config; they are sent to the registry and never
put into an error message, a result model or a log line.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import os
import re
import tempfile
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from releasekit.docker_engine import config_credentials
from releasekit.errors import EnvironmentProblem, InputError
from releasekit.records.oci import Descriptor, ImageIndex, ImageManifest

MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)

ENV_USERNAME = "RELEASEKIT_REGISTRY_USERNAME"
ENV_PASSWORD = "RELEASEKIT_REGISTRY_PASSWORD"
# The registry host (``registry.example.com``, ``127.0.0.1:5000``) the two above belong to: they are
# sent to that host only, never to a host an input file names (staging.json, a manifest).
ENV_HOST = "RELEASEKIT_REGISTRY_HOST"
# Token services on another host than the registry's (Docker Hub's auth.docker.io), comma-separated
# host names: the credentials go to the registry's own host name and to these, over HTTPS, and to no
# realm a registry's challenge names otherwise.
ENV_TOKEN_SERVICES = "RELEASEKIT_REGISTRY_TOKEN_SERVICES"

_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_REPO = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


@dataclass(frozen=True)
class RegistryCredentials:
    username: str
    password: str

    def __repr__(self) -> str:  # never let a password reach a log through repr()
        return f"RegistryCredentials(username={self.username!r}, password=***)"


@dataclass(frozen=True)
class Reference:
    """``HOST[:PORT]/REPO[:TAG][@DIGEST]``. A registry host is required: publishing to an
    implicit Docker Hub is never what a release pipeline means."""

    host: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    @classmethod
    def parse(cls, text: str, *, want_tag: bool = False) -> Reference:
        rest, _, digest_part = text.partition("@")
        digest = digest_part if "@" in text else None
        host, sep, path = rest.partition("/")
        if not sep or not ("." in host or ":" in host or host == "localhost"):
            raise InputError(f"{text!r}: expected REGISTRY/REPO[:TAG] with an explicit registry host")
        tag = None
        if ":" in path:
            path, tag = path.rsplit(":", 1)
        if not _REPO.match(path):
            raise InputError(f"{text!r}: {path!r} is not a valid repository name")
        if tag is not None and not _TAG.match(tag):
            raise InputError(f"{text!r}: {tag!r} is not a valid tag")
        if digest is not None and not _DIGEST.match(digest):
            raise InputError(f"{text!r}: {digest!r} is not a sha256 digest")
        if want_tag and tag is None and digest is None:
            raise InputError(f"{text!r}: expected REGISTRY/REPO:TAG")
        return cls(host=host, repository=path, tag=tag, digest=digest)

    @property
    def name(self) -> str:
        return f"{self.host}/{self.repository}"

    def __str__(self) -> str:
        text = self.name
        if self.tag:
            text += f":{self.tag}"
        if self.digest:
            text += f"@{self.digest}"
        return text


def is_loopback(host: str) -> bool:
    hostname = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    if hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(hostname.strip("[]")).is_loopback
    except ValueError:
        return False


def resolve_credentials(host: str) -> RegistryCredentials | None:
    """The environment first (CI secrets, for the one host ``RELEASEKIT_REGISTRY_HOST`` names), then
    the Docker config (``docker login``, which keys credentials by host itself)."""
    user, password = os.environ.get(ENV_USERNAME), os.environ.get(ENV_PASSWORD)
    if user and password:
        bound = os.environ.get(ENV_HOST, "").strip()
        if not bound:
            raise InputError(
                f"{ENV_USERNAME}/{ENV_PASSWORD} are set but {ENV_HOST} is not: name the registry host "
                "they are for; they are sent to that host only"
            )
        if bound == host:
            return RegistryCredentials(user, password)
    stored = config_credentials(host)
    return RegistryCredentials(*stored) if stored else None


def _basic_header(credentials: RegistryCredentials) -> str:
    raw = f"{credentials.username}:{credentials.password}".encode()
    return "Basic " + base64.b64encode(raw).decode("ascii")


def _hostname(netloc: str) -> str:
    return netloc.rsplit(":", 1)[0] if netloc.count(":") == 1 else netloc


def token_service_refusal(realm: str, registry_host: str, named: str) -> str | None:
    """Why the credentials may not go to the token service ``realm`` a registry's challenge names (None
    when they may): it must be HTTPS (plain HTTP only on a loopback address, as for registries) and on
    the registry's own host name or one of ``named`` (``RELEASEKIT_REGISTRY_TOKEN_SERVICES``)."""
    try:
        url = httpx.URL(realm)
    except (httpx.InvalidURL, TypeError):
        return f"its token service {realm!r} is not a URL"
    host = url.host
    if url.scheme != "https" and not (url.scheme == "http" and is_loopback(host)):
        return f"its token service {realm} is not HTTPS"
    allowed = {_hostname(registry_host).lower()} | {n.strip().lower() for n in named.split(",") if n.strip()}
    if host.lower() not in allowed:
        return f"its token service {realm} is on another host and {ENV_TOKEN_SERVICES} does not name it"
    return None


class _RegistryAuth(httpx.Auth):
    """Answers a 401 challenge once: Basic (distribution's htpasswd) or a Bearer token
    service (Docker Hub, GHCR, Harbor). Sends nothing until challenged, and sends the credentials
    to no token service but the registry's own host and those ``RELEASEKIT_REGISTRY_TOKEN_SERVICES``
    names."""

    def __init__(self, credentials: RegistryCredentials | None, host: str) -> None:
        self.credentials = credentials
        self.host = host
        self._header: str | None = None

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        if self._header:
            request.headers["Authorization"] = self._header
        response = yield request
        if response.status_code != 401 or self.credentials is None:
            return
        challenge = response.headers.get("www-authenticate", "")
        scheme, _, params = challenge.partition(" ")
        if scheme.lower() == "basic":
            self._header = _basic_header(self.credentials)
        elif scheme.lower() == "bearer":
            fields = dict(re.findall(r'(\w+)="([^"]*)"', params))
            why = token_service_refusal(
                fields.get("realm", ""), self.host, os.environ.get(ENV_TOKEN_SERVICES, "")
            )
            if why is not None:
                raise EnvironmentProblem(f"registry {self.host}: {why}; the credentials were not sent")
            token = _fetch_token(
                fields.get("realm", ""),
                {k: v for k, v in fields.items() if k in ("service", "scope")},
                _basic_header(self.credentials),
            )
            if token is None:
                return
            self._header = f"Bearer {token}"
        else:
            return
        request.headers["Authorization"] = self._header
        yield request


@dataclass(frozen=True)
class ManifestBlob:
    data: bytes
    media_type: str
    digest: str


# OCI distribution: registries commonly refuse manifests over 4 MiB; an error body or tag list is smaller.
MANIFEST_MAX_BYTES = 4 << 20
ANSWER_MAX_BYTES = MANIFEST_MAX_BYTES
# A blob read into memory whose descriptor gives no size (an attachment: SBOM, DSSE envelope).
BLOB_MAX_BYTES = 256 << 20
_TRANSFER_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


# A token service's answer is a small JSON object (a token of a few KiB, its lifetime).
TOKEN_MAX_BYTES = 64 << 10
# One exchange, start to end: the socket timeout bounds each wait, not a server that sends a byte
# every few seconds. An answer gets ANSWER_SECONDS; a blob that too plus a floor of throughput.
ANSWER_SECONDS = 120.0
BLOB_MIN_BYTES_PER_SECOND = 256 << 10


def total_seconds(size: int) -> float:
    """How long one exchange of ``size`` bytes may take, start to end."""
    return ANSWER_SECONDS + size / BLOB_MIN_BYTES_PER_SECOND


def _chunks_capped(
    chunks: Iterator[bytes], limit: int, what: str, seconds: float, *, over: str = "an answer over"
) -> Iterator[bytes]:
    """``chunks`` until ``limit`` bytes or ``seconds`` from now: past either, EnvironmentProblem."""
    deadline = time.monotonic() + seconds
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise EnvironmentProblem(f"{what}: {over} {limit} bytes; refused")
        if time.monotonic() > deadline:
            raise EnvironmentProblem(f"{what}: still sending after {seconds:.0f} s; refused")
        yield chunk


def _read_capped(response: httpx.Response, limit: int, what: str) -> bytes:
    return b"".join(_chunks_capped(response.iter_bytes(), limit, what, total_seconds(limit)))


def _fetch_token(realm: str, params: dict[str, str], authorization: str) -> str | None:
    """Ask the token service ``realm`` for a Bearer token: its answer streamed, read bounded and parsed
    strictly (a client of its own: an auth flow's own responses are read whole by httpx)."""
    try:
        with (
            httpx.Client(timeout=30.0, follow_redirects=False) as client,
            client.stream("GET", realm, params=params, headers={"Authorization": authorization}) as response,
        ):
            if response.status_code != 200:
                return None
            body = _token_body(response)
    except httpx.TransportError as exc:
        raise EnvironmentProblem(f"token service {realm}: unreachable: {type(exc).__name__}") from None
    except httpx.HTTPError as exc:  # a realm that is no URL
        raise EnvironmentProblem(f"token service {realm!r}: {type(exc).__name__}") from None
    token = body.get("token") or body.get("access_token")
    return token if isinstance(token, str) and token else None


def _token_body(response: httpx.Response) -> dict[str, Any]:
    """The token service's JSON answer, read bounded and parsed strictly; {} when it is none."""
    from releasekit.records.base import strict_json

    what = f"token service {response.request.url.host}"
    try:
        raw = _read_capped(response, TOKEN_MAX_BYTES, what)
        body = strict_json(raw.decode("utf-8"), what)
    except (UnicodeDecodeError, InputError) as exc:
        raise EnvironmentProblem(f"{what}: not a token answer ({type(exc).__name__})") from None
    return body if isinstance(body, dict) else {}


class RegistryClient:
    """One registry host. Plain HTTP only for loopback hosts (as Docker itself allows)."""

    def __init__(
        self,
        host: str,
        credentials: RegistryCredentials | None = None,
        *,
        timeout: float = 30.0,
    ) -> None:
        self.host = host
        scheme = "http" if is_loopback(host) else "https"
        self._auth = _RegistryAuth(credentials, host)
        self._client = httpx.Client(
            base_url=f"{scheme}://{host}",
            auth=self._auth,
            timeout=timeout,
            follow_redirects=True,
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transport ---------------------------------------------------------------------

    def _request(
        self, method: str, url: str, *, max_bytes: int = ANSWER_MAX_BYTES, **kwargs: object
    ) -> httpx.Response:
        """One exchange whose body is read in chunks and refused past ``max_bytes``: a registry's
        answer (a manifest, an error, a tag list) is never held whole before it is judged."""
        try:
            request = self._client.build_request(method, url, **kwargs)  # type: ignore[arg-type]
            response = self._client.send(request, stream=True)
            try:
                body = _read_capped(
                    response, max_bytes, f"registry {self.host}: {method} {url.split('?')[0]}"
                )
            finally:
                response.close()
        except httpx.TransportError as exc:
            raise EnvironmentProblem(
                f"registry {self.host} unreachable: {type(exc).__name__}",
                hint="is it running, and is the address right?",
            ) from None
        response = httpx.Response(
            response.status_code,
            headers=[(k, v) for k, v in response.headers.multi_items() if k.lower() not in _TRANSFER_HEADERS],
            content=body,
            request=request,
        )
        if response.status_code == 401:
            if self._auth.credentials is None:
                raise EnvironmentProblem(
                    f"registry {self.host} requires credentials and none were found",
                    hint=f"docker login {self.host}, or set {ENV_USERNAME}/{ENV_PASSWORD} with {ENV_HOST}={self.host}",
                )
            raise EnvironmentProblem(
                f"registry {self.host} refused the credentials",
                hint=f"docker login {self.host}, or set {ENV_USERNAME}/{ENV_PASSWORD} with {ENV_HOST}={self.host}",
            )
        if response.status_code == 403:
            raise EnvironmentProblem(f"registry {self.host} denied {method} {url.split('?')[0]}")
        return response

    def _fail(self, response: httpx.Response, what: str) -> EnvironmentProblem:
        detail = response.text.strip().replace("\n", " ")[:200]
        return EnvironmentProblem(
            f"registry {self.host}: {what} failed with HTTP {response.status_code}: {detail}"
        )

    # -- API -----------------------------------------------------------------------------

    def ping(self) -> None:
        """Reachable and the credentials (if any are needed) are accepted."""
        response = self._request("GET", "/v2/")
        if response.status_code != 200:
            raise self._fail(response, "GET /v2/")

    def get_manifest(self, repository: str, reference: str) -> ManifestBlob | None:
        response = self._request(
            "GET",
            f"/v2/{repository}/manifests/{reference}",
            max_bytes=MANIFEST_MAX_BYTES,
            headers={"Accept": ", ".join(MANIFEST_TYPES)},
        )
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise self._fail(response, f"GET manifest {repository}:{reference}")
        data = response.content
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        if reference.startswith("sha256:") and digest != reference:
            raise EnvironmentProblem(
                f"registry {self.host} returned a manifest whose digest is not {reference}"
            )
        media_type = response.headers.get("content-type", "").split(";")[0].strip()
        return ManifestBlob(data=data, media_type=media_type, digest=digest)

    def put_manifest(self, repository: str, reference: str, data: bytes, media_type: str) -> str:
        response = self._request(
            "PUT",
            f"/v2/{repository}/manifests/{reference}",
            content=data,
            headers={"Content-Type": media_type},
        )
        if response.status_code not in (200, 201):
            raise self._fail(response, f"PUT manifest {repository}:{reference}")
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        returned = response.headers.get("docker-content-digest")
        if returned and returned != digest:
            raise EnvironmentProblem(f"registry {self.host} stored {returned}, expected {digest}")
        return digest

    def has_blob(self, repository: str, digest: str) -> bool:
        response = self._request("HEAD", f"/v2/{repository}/blobs/{digest}")
        if response.status_code == 404:
            return False
        if response.status_code != 200:
            raise self._fail(response, f"HEAD blob {digest}")
        return True

    def get_blob(self, repository: str, digest: str, size: int | None = None) -> bytes:
        """The blob's bytes, read at most to ``size`` (its descriptor's) or ``BLOB_MAX_BYTES``."""
        limit = size if size is not None and size >= 0 else BLOB_MAX_BYTES
        response = self._request("GET", f"/v2/{repository}/blobs/{digest}", max_bytes=limit)
        if response.status_code != 200:
            raise self._fail(response, f"GET blob {digest}")
        data = response.content
        if "sha256:" + hashlib.sha256(data).hexdigest() != digest:
            raise EnvironmentProblem(f"registry {self.host} returned blob bytes that do not hash to {digest}")
        return data

    def push_blob(self, repository: str, data: bytes) -> str:
        """Monolithic upload (POST then PUT); a blob already there is not sent again."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        if self.has_blob(repository, digest):
            return digest
        start = self._request("POST", f"/v2/{repository}/blobs/uploads/")
        if start.status_code != 202:
            raise self._fail(start, "start blob upload")
        location = start.headers["location"]
        joiner = "&" if "?" in location else "?"
        done = self._request(
            "PUT",
            f"{location}{joiner}digest={digest}",
            content=data,
            headers={"Content-Type": "application/octet-stream"},
        )
        if done.status_code != 201:
            raise self._fail(done, f"upload blob {digest}")
        return digest

    def mount_blob(self, repository: str, digest: str, source_repository: str) -> bool:
        """Cross-repository mount of a blob this registry holds in ``source_repository``; False when not mounted."""
        if self.has_blob(repository, digest):
            return True
        response = self._request(
            "POST", f"/v2/{repository}/blobs/uploads/", params={"mount": digest, "from": source_repository}
        )
        if response.status_code == 201:
            return True
        if response.status_code == 202:  # the registry opened an upload instead: cancel it
            location = response.headers.get("location")
            if location:
                self._request("DELETE", location)
            return False
        raise self._fail(response, f"mount blob {digest} from {source_repository}")

    def push_blob_file(self, repository: str, digest: str, path: str) -> None:
        """Monolithic upload of a blob from a file (POST then PUT), streamed."""
        start = self._request("POST", f"/v2/{repository}/blobs/uploads/")
        if start.status_code != 202:
            raise self._fail(start, "start blob upload")
        location = start.headers["location"]
        joiner = "&" if "?" in location else "?"
        with open(path, "rb") as fh:
            done = self._request(
                "PUT",
                f"{location}{joiner}digest={digest}",
                content=fh,
                headers={
                    "Content-Type": "application/octet-stream",
                    "Content-Length": str(os.fstat(fh.fileno()).st_size),
                },
            )
        if done.status_code != 201:
            raise self._fail(done, f"upload blob {digest}")

    def download_blob(self, repository: str, digest: str, directory: str, size: int | None = None) -> str:
        """Stream a blob into a file under ``directory``, checking its digest; returns the file's path.

        At most ``size`` bytes (the descriptor's; ``BLOB_MAX_BYTES`` without one) are written: an
        endless blob stops there, and the partial file is removed on any failure."""
        limit = size if size is not None and size >= 0 else BLOB_MAX_BYTES
        sha = hashlib.sha256()
        fd, path = tempfile.mkstemp(prefix="blob-", dir=directory)
        try:
            self._download(repository, digest, fd, sha, limit)
        except BaseException:
            os.unlink(path)
            raise
        if "sha256:" + sha.hexdigest() != digest:
            os.unlink(path)
            raise EnvironmentProblem(f"registry {self.host} returned blob bytes that do not hash to {digest}")
        return path

    def _download(self, repository: str, digest: str, fd: int, sha: hashlib._Hash, limit: int) -> None:
        try:
            with (
                os.fdopen(fd, "wb") as out,
                self._client.stream("GET", f"/v2/{repository}/blobs/{digest}") as r,
            ):
                if r.status_code != 200:
                    raise EnvironmentProblem(
                        f"registry {self.host}: GET blob {digest} failed with HTTP {r.status_code}"
                    )
                what = f"registry {self.host}: blob {digest}"
                chunks = _chunks_capped(
                    r.iter_bytes(), limit, what, total_seconds(limit), over="runs past its declared"
                )
                for chunk in chunks:
                    sha.update(chunk)
                    out.write(chunk)
        except httpx.TransportError as exc:
            raise EnvironmentProblem(f"registry {self.host} unreachable: {type(exc).__name__}") from None

    def image_manifest(self, repository: str, digest: str) -> tuple[ManifestBlob, ImageManifest]:
        """The manifest under ``digest``, its bytes and its parsed form; EnvironmentProblem when absent or not one."""
        blob = self.get_manifest(repository, digest)
        if blob is None:
            raise EnvironmentProblem(f"registry {self.host} has no manifest {digest} in {repository}")
        try:
            return blob, ImageManifest.parse(blob.data)
        except ValueError as exc:
            raise EnvironmentProblem(f"registry manifest {digest}: {exc}") from None

    def check_image(self, repository: str, digest: str, image_id: str) -> ManifestBlob:
        """The registry holds exactly this image under ``digest``: its config is ``image_id``, every blob is there."""
        blob, manifest = self.image_manifest(repository, digest)
        config = manifest.config
        if config is None or config.digest != image_id:
            raise EnvironmentProblem(
                f"registry manifest {digest} has config {config.digest if config else None}, not the image {image_id}"
            )
        for item in [config, *manifest.layers]:
            if not self.has_blob(repository, item.digest):
                raise EnvironmentProblem(f"registry {self.host} lacks blob {item.digest} of {digest}")
        return blob

    def tags(self, repository: str) -> list[str]:
        response = self._request("GET", f"/v2/{repository}/tags/list")
        if response.status_code == 404:
            return []
        if response.status_code != 200:
            raise self._fail(response, f"list tags of {repository}")
        return sorted(response.json().get("tags") or [])

    def referrers(self, repository: str, digest: str) -> list[Descriptor] | None:
        """OCI 1.1 referrers of ``digest`` (descriptors), or None when the registry has no referrers API."""
        response = self._request(
            "GET",
            f"/v2/{repository}/referrers/{digest}",
            headers={"Accept": "application/vnd.oci.image.index.v1+json"},
        )
        if response.status_code != 200:
            return None  # a registry with the API never answers 404 here (OCI distribution spec 1.1)
        try:
            return ImageIndex.parse(response.content).manifests
        except ValueError:
            return None


class RegistryOpener(Protocol):
    """Opens a client for one registry host with its credentials: ``RegistryClient`` itself, passed in
    by a command (the edge) so that no library module opens a connection of its own making."""

    def __call__(self, host: str, credentials: RegistryCredentials | None, /) -> RegistryClient: ...


def copy_image(
    source: RegistryClient,
    source_repository: str,
    digest: str,
    target: RegistryClient,
    target_repository: str,
) -> ManifestBlob:
    """The manifest ``digest`` and its blobs from one repository into another, byte for byte, by digest.

    In one registry each blob is mounted across repositories; between registries it is streamed
    through a temporary file. The manifest is put by digest, so the target holds the same digest.
    """
    blob, manifest = source.image_manifest(source_repository, digest)
    items = [d for d in [manifest.config, *manifest.layers] if d is not None]
    with tempfile.TemporaryDirectory(prefix="releasekit-copy-") as tmp:
        for item in items:
            if target.has_blob(target_repository, item.digest):
                continue
            if target.host == source.host and target.mount_blob(
                target_repository, item.digest, source_repository
            ):
                continue
            path = source.download_blob(source_repository, item.digest, tmp, item.size)
            target.push_blob_file(target_repository, item.digest, path)
            os.unlink(path)
    target.put_manifest(target_repository, digest, blob.data, blob.media_type)
    return blob
