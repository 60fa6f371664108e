"""publish and promote against a registry with bearer-token auth, the scheme of Docker Hub/GHCR.

The registry is the real distribution v2.8 with ``auth.token``; the token service is a small
real HTTP server in this test that checks basic credentials and signs ES256 JWTs with a key
whose self-signed certificate the registry trusts. Both releasekit's registry client and
the Docker Engine go through it.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from cli_run import invoke
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.x509.oid import NameOID
from publish_support import Release, build_image, publish_args

from releasekit.demo.localregistry import TokenAuth, free_port, start_local_registry
from releasekit.registry import RegistryClient, RegistryCredentials

pytestmark = pytest.mark.docker

SERVICE = "releasekit-test-registry"
ISSUER = "releasekit-test-token-issuer"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class TokenService:
    """Issues a token for the scopes asked, to one user with one password."""

    def __init__(self, root: Path, username: str, password: str) -> None:
        self.username, self.password = username, password
        self.key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ISSUER)])
        now = dt.datetime.now(dt.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.bundle = root / "token-root.pem"
        self.bundle.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        self.requests: list[dict[str, object]] = []
        self.port = free_port()
        service = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output quiet
                pass

            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                query = parse_qs(urlparse(self.path).query)
                header = self.headers.get("Authorization", "")
                user = password = None
                if header.startswith("Basic "):
                    user, _, password = base64.b64decode(header[6:]).decode().partition(":")
                ok = user == service.username and password == service.password
                service.requests.append({"user": user, "ok": ok, "scope": query.get("scope", [])})
                if not ok:
                    self.send_response(401)
                    self.end_headers()
                    return
                body = json.dumps(
                    {"token": service.token(user, query.get("scope", [])), "expires_in": 300}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def realm(self) -> str:
        return f"http://127.0.0.1:{self.port}/token"

    def token(self, user: str, scopes: list[str]) -> str:
        access = []
        for scope in scopes:
            for item in scope.split(" "):
                kind, _, rest = item.partition(":")
                name, _, actions = rest.rpartition(":")
                access.append({"type": kind, "name": name, "actions": [a for a in actions.split(",") if a]})
        now = int(time.time())
        header = {
            "typ": "JWT",
            "alg": "ES256",
            "x5c": [base64.b64encode(self.cert.public_bytes(serialization.Encoding.DER)).decode()],
        }
        claims = {
            "iss": ISSUER,
            "sub": user,
            "aud": SERVICE,
            "exp": now + 300,
            "nbf": now - 10,
            "iat": now,
            "jti": uuid.uuid4().hex,
            "access": access,
        }
        signing_input = (
            f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}".encode()
        )
        r, s = decode_dss_signature(self.key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
        signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")  # JWS ES256 is raw r||s
        return f"{signing_input.decode()}.{_b64url(signature)}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_publish_and_promote_through_a_bearer_token_service(tmp_path, docker_client):
    image = build_image(
        docker_client, "releasekit-test/publish-small:1", {"hello.txt": b"small image for publish tests\n"}
    )
    secret = "tok-" + os.urandom(6).hex()
    tokens = TokenService(tmp_path, "releaser", secret)
    auth = TokenAuth(realm=tokens.realm, service=SERVICE, issuer=ISSUER, rootcertbundle=tokens.bundle)
    release = Release(tmp_path / "rel", image)
    try:
        with start_local_registry(tmp_path / "reg", token=auth) as reg:
            repo = "team/bearer"
            target = f"{reg.host}/{repo}"
            wrong = {
                "RELEASEKIT_REGISTRY_USERNAME": "releaser",
                "RELEASEKIT_REGISTRY_PASSWORD": "nope",
                "RELEASEKIT_REGISTRY_HOST": reg.host,
            }
            refused = invoke(*publish_args(release, image, target, "beta"), env=wrong)
            assert refused.returncode == 2
            assert "refused the credentials" in refused.stderr
            assert tokens.requests and not tokens.requests[-1]["ok"]

            right = {
                "RELEASEKIT_REGISTRY_USERNAME": "releaser",
                "RELEASEKIT_REGISTRY_PASSWORD": secret,
                "RELEASEKIT_REGISTRY_HOST": reg.host,
            }
            ok = invoke(*publish_args(release, image, target, "beta"), env=right)
            assert ok.returncode == 0, ok.stdout + ok.stderr
            digest = json.loads(ok.stdout)["digest"]
            # Both the engine's push and releasekit's own calls asked the token service for push rights.
            assert any(
                f"repository:{repo}:" in s and "push" in s
                for r in tokens.requests
                if r["ok"]
                for s in r["scope"]
            )

            promoted = invoke(
                "promote", "--from", f"{target}:beta", "--to", f"{target}:stable", "--json", env=right
            )
            assert promoted.returncode == 0, promoted.stdout + promoted.stderr

            with RegistryClient(reg.host, RegistryCredentials("releaser", secret)) as client:
                assert {"beta", "stable"} <= set(client.tags(repo))
                assert client.get_manifest(repo, "stable").digest == digest
            for text in (refused.stderr, ok.stdout, ok.stderr, promoted.stdout, promoted.stderr):
                assert secret not in text
    finally:
        tokens.close()
