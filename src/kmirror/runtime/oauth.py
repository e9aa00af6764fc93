"""A SASL listener's OAUTHBEARER token validation: Kafka's unsecured tokens, or signed JWTs
checked against the identity provider's JWK Set (Kafka's `OAuthBearerValidatorCallbackHandler`).

The JWK Set is fetched (http(s):// or file:) when the listener opens, every
`sasl.oauthbearer.jwks.endpoint.refresh.ms`, and, at most every `MIN_REFRESH_S`, when a token
names a key id the set does not hold (the provider rotated its keys). Fetches run on a worker
thread. A provider that cannot be reached is logged and retried; meanwhile signed tokens are
refused (Kafka's broker instead fails its start), so that an identity provider's outage does
not keep a broker from restarting.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping

from kmirror.client.oauth import open_url
from kmirror.security.jwt import (
    ClaimRules,
    JwtError,
    ValidatedToken,
    parse_jws,
    validate_signed,
    validate_unsecured,
)
from kmirror.security.listener_config import OAuthBearerServerSettings
from kmirror.security.oauthbearer import EndpointTrust, TokenValidator

log = logging.getLogger(__name__)

MIN_REFRESH_S = 10.0
RETRY_S = 5.0


def claim_rules(settings: OAuthBearerServerSettings) -> ClaimRules:
    return ClaimRules(clock_skew_ms=settings.clock_skew_ms, principal_claim=settings.principal_claim,
                      scope_claim=settings.scope_claim, expected_audience=settings.expected_audience,
                      expected_issuer=settings.expected_issuer, required_scopes=settings.required_scopes)


def fetch_jwks(url: str, trust: EndpointTrust) -> Mapping[str, object]:
    """The JWK Set at `url`; raises OSError or ValueError."""
    body = json.loads(open_url(url, trust))
    if not isinstance(body, dict) or not isinstance(body.get("keys"), list):
        raise ValueError(f"{url} is not a JWK Set (no 'keys' list)")
    return body


class JwksValidator:
    """Validates signed tokens with the latest JWK Set it fetched."""

    def __init__(self, settings: OAuthBearerServerSettings) -> None:
        assert settings.jwks_url is not None
        self.settings = settings
        self.rules = claim_rules(settings)
        self.url = settings.jwks_url
        self.jwks: Mapping[str, object] | None = None
        self._last_fetch = 0.0
        self._wanted = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._refresh_loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _refresh_loop(self) -> None:
        while True:
            self._last_fetch = time.monotonic()
            try:
                self.jwks = await asyncio.to_thread(fetch_jwks, self.url, self.settings.jwks_trust)
                wait = self.settings.jwks_refresh_ms / 1000
            except (OSError, ValueError) as exc:
                log.error("cannot fetch the OAUTHBEARER JWK Set from %s: %s (retrying in %.0f s)", self.url, exc,
                          RETRY_S)
                wait = RETRY_S
            self._wanted.clear()
            try:
                await asyncio.wait_for(self._wanted.wait(), wait)
                await asyncio.sleep(max(0.0, self._last_fetch + MIN_REFRESH_S - time.monotonic()))
            except TimeoutError:
                pass

    def __call__(self, token: str) -> ValidatedToken:
        if self.jwks is None:
            raise JwtError(f"the JWK Set of {self.url} is not fetched yet")
        try:
            return validate_signed(token, self.jwks, now_ms=int(time.time() * 1000), **self.rules)
        except JwtError:
            if self._unknown_kid(token):
                self._wanted.set()  # fetch again: the provider may have rotated its keys
            raise

    def _unknown_kid(self, token: str) -> bool:
        try:
            kid = parse_jws(token).kid
        except JwtError:
            return False
        keys = self.jwks.get("keys") if self.jwks is not None else None
        return kid is not None and isinstance(keys, list) and not any(
            isinstance(k, dict) and k.get("kid") == kid for k in keys)


def token_validator(settings: OAuthBearerServerSettings) -> TokenValidator | JwksValidator:
    """The listener's validation: a `JwksValidator` (to `start`) for signed tokens, else Kafka's
    unsecured tokens' rules."""
    if settings.jwks_url is not None:
        return JwksValidator(settings)

    rules = claim_rules(settings)

    def unsecured(token: str) -> ValidatedToken:
        return validate_unsecured(token, now_ms=int(time.time() * 1000), **rules)
    return unsecured
