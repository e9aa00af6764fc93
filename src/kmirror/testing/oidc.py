"""An OAuth identity provider of its own for tests: an HTTP server on loopback with a token
endpoint (`POST /token`, the client credentials grant, HTTP Basic client authentication) that
signs RS256 JWTs, and the JWK Set that verifies them (`GET /jwks`).

Each client id has a secret; a token's `sub` is its client id, `aud` and `iss` are the
provider's, `scope` the requested scope. `rotate()` replaces the signing key (the old key is no
longer published), as a provider rotating its keys does. With a keystore it serves https://.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from kmirror.security.jwt_signing import public_jwk, signed_token

AUDIENCE = "kmirror-brokers"


def new_rsa_key() -> bytes:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


class IdentityProvider:
    def __init__(self, clients: dict[str, str], lifetime_s: int = 3600, tls_keystore: Path | None = None) -> None:
        """`tls_keystore`: a PEM key and certificate to serve https:// with."""
        self.clients = clients
        self.lifetime_s = lifetime_s
        self.key = new_rsa_key()
        self.kid = "key-1"
        self.tokens_issued = 0
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _answer(self, status: int, body: object) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if self.path != "/jwks":
                    self._answer(404, {"error": "not_found"})
                    return
                self._answer(200, {"keys": [public_jwk(provider.key, provider.kid)]})

            def do_POST(self) -> None:  # noqa: N802
                form = urllib.parse.parse_qs(self.rfile.read(int(self.headers.get("Content-Length", 0))).decode())
                client_id, secret = _basic(self.headers.get("Authorization", ""))
                if self.path != "/token" or form.get("grant_type") != ["client_credentials"]:
                    self._answer(400, {"error": "unsupported_grant_type"})
                elif provider.clients.get(client_id) != secret or not client_id:
                    self._answer(401, {"error": "invalid_client"})
                else:
                    self._answer(200, {"access_token": provider.token(client_id, form.get("scope", [""])[0]),
                                       "token_type": "Bearer", "expires_in": provider.lifetime_s})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls_keystore is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(tls_keystore)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        scheme = "https" if tls_keystore is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def issuer(self) -> str:
        return self.url

    @property
    def token_endpoint(self) -> str:
        return f"{self.url}/token"

    @property
    def jwks_url(self) -> str:
        return f"{self.url}/jwks"

    def token(self, subject: str, scope: str = "", **claims: object) -> str:
        now = int(time.time())
        self.tokens_issued += 1
        return signed_token({"sub": subject, "iss": self.issuer, "aud": AUDIENCE, "iat": now,
                             "exp": now + self.lifetime_s, "scope": scope, **claims}, self.key, self.kid)

    def rotate(self) -> None:
        self.key = new_rsa_key()
        self.kid = f"key-{int(self.kid.split('-')[1]) + 1}"

    def __enter__(self) -> IdentityProvider:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def _basic(header: str) -> tuple[str, str]:
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        return "", ""
    try:
        user, _, password = base64.b64decode(value).decode().partition(":")
    except ValueError:
        return "", ""
    return urllib.parse.unquote(user), urllib.parse.unquote(password)
