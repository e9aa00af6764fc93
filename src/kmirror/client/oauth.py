"""OAUTHBEARER tokens for kmirror's client: the OAuth client credentials grant against the
identity provider's token endpoint (Kafka's `OAuthBearerLoginCallbackHandler` with its client
credentials retriever), a token file (`file:` endpoint, Kafka's `FileTokenRetriever`), or
Kafka's unsecured token (`unsecuredLogin*` JAAS options). An https:// endpoint is trusted
through the JAAS options' `ssl.*` (`client_config.jaas_tls`), else the system CAs.

Blocking (an HTTP request): callers run `access_token` on a worker thread. A token is kept per
client configuration and fetched again once 80% of its lifetime has passed, as Kafka's login
refresh does (`sasl.login.refresh.window.factor` 0.8).
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from kmirror.client.tls import tls_context
from kmirror.security.client_config import OAuthClientSettings, TlsClientSettings
from kmirror.security.jwt import JwtError, parse_jws, unsecured_token

REFRESH_FACTOR = 0.8
TIMEOUT_S = 30.0

_tokens: dict[OAuthClientSettings, tuple[str, float]] = {}  # settings -> (token, monotonic refresh time)
_lock = threading.Lock()


class OAuthTokenError(Exception):
    """No token could be had; `str()` says why in one line."""


def open_url(request: urllib.request.Request | str, trust: TlsClientSettings) -> bytes:
    """The body at an http(s):// or file: URL; raises OSError (urllib's errors are OSErrors), or
    ValueError for a truststore that cannot be read."""
    url = request if isinstance(request, str) else request.full_url
    context = tls_context(trust) if url.lower().startswith("https:") else None
    with urllib.request.urlopen(request, timeout=TIMEOUT_S, context=context) as answer:  # noqa: S310 (operator's URL)
        body: bytes = answer.read()
    return body


def access_token(settings: OAuthClientSettings) -> str:
    with _lock:
        cached = _tokens.get(settings)
        if cached is not None and time.monotonic() < cached[1]:
            return cached[0]
    now = time.time()
    if settings.token_endpoint is not None and settings.token_endpoint.lower().startswith("file:"):
        token, lifetime = _token_file(settings.token_endpoint)
    elif settings.token_endpoint is None:
        claims: dict[str, object] = {"iat": int(now), "exp": int(now) + settings.unsecured_lifetime_s}
        claims.update({k: list(v) if isinstance(v, tuple) else v for k, v in settings.unsecured_claims})
        token, lifetime = unsecured_token(claims), float(settings.unsecured_lifetime_s)
    else:
        token, lifetime = _client_credentials(settings)
    with _lock:
        _tokens[settings] = (token, time.monotonic() + REFRESH_FACTOR * lifetime)
    return token


def _client_credentials(settings: OAuthClientSettings) -> tuple[str, float]:
    """RFC 6749 4.4: the client authenticates with HTTP Basic (RFC 6749 2.3.1's encoding)."""
    assert settings.token_endpoint is not None
    credentials = f"{urllib.parse.quote(settings.client_id)}:{urllib.parse.quote(settings.client_secret)}"
    form = {"grant_type": "client_credentials", **({"scope": settings.scope} if settings.scope else {})}
    request = urllib.request.Request(
        settings.token_endpoint, data=urllib.parse.urlencode(form).encode(), method="POST",
        headers={"Authorization": "Basic " + base64.b64encode(credentials.encode()).decode(),
                 "Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"})
    where = f"token endpoint {settings.token_endpoint}"
    try:
        body = json.loads(open_url(request, settings.trust))
    except urllib.error.HTTPError as exc:
        raise OAuthTokenError(f"{where} answered HTTP {exc.code}: {exc.read()[:200].decode(errors='replace')}") from None
    except (OSError, ValueError) as exc:
        raise OAuthTokenError(f"{where}: {exc}") from None
    token = body.get("access_token") if isinstance(body, dict) else None
    if not isinstance(token, str) or not token:
        raise OAuthTokenError(f"{where} answered no access_token")
    expires_in = body.get("expires_in")
    if isinstance(expires_in, (int, float)) and expires_in > 0:
        return token, float(expires_in)
    return token, _lifetime_s(token)


def _token_file(url: str) -> tuple[str, float]:
    """Kafka's `FileTokenRetriever`: a token written to a file by another process, read again
    once 80% of its life has passed."""
    try:
        token = open_url(url, TlsClientSettings()).decode().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise OAuthTokenError(f"token file {url}: {exc}") from None
    if not token:
        raise OAuthTokenError(f"token file {url} is empty")
    return token, _lifetime_s(token)


def _lifetime_s(token: str) -> float:
    """What is left of a JWT's life by its `exp` claim (60 s when it has none)."""
    try:
        exp = parse_jws(token).claims.get("exp")
    except JwtError:
        exp = None
    return max(0.0, float(exp) - time.time()) if isinstance(exp, (int, float)) else 60.0
