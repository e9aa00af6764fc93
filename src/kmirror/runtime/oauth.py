"""A SASL listener's OAUTHBEARER token validation: Kafka's unsecured tokens, or signed JWTs
checked against the identity provider's JWK Set (Kafka's `OAuthBearerValidatorCallbackHandler`).

The JWK Set is fetched (http(s):// or file:) when the listener opens, every
`sasl.oauthbearer.jwks.endpoint.refresh.ms`, and, at most every `MIN_REFRESH_MS`, when a token
names a key id the set does not hold (the provider rotated its keys). Fetches run on a worker
thread. A provider that cannot be reached is logged and retried; meanwhile signed tokens are
refused (Kafka's broker instead fails its start), so that an identity provider's outage does
not keep a broker from restarting.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping

from kmirror.client.oauth import open_url
from kmirror.ports import Clock
from kmirror.security.client_config import TlsClientSettings
from kmirror.security.jwt import (
    ClaimRules,
    JwtError,
    ValidatedToken,
    names_unknown_key,
    validate_signed,
    validate_unsecured,
)
from kmirror.security.listener_config import OAuthBearerServerSettings
from kmirror.security.oauthbearer import TokenValidator

log = logging.getLogger(__name__)

MIN_REFRESH_MS = 10_000
RETRY_S = 5.0


def claim_rules(settings: OAuthBearerServerSettings) -> ClaimRules:
    return ClaimRules(clock_skew_ms=settings.clock_skew_ms, principal_claim=settings.principal_claim,
                      scope_claim=settings.scope_claim, expected_audience=settings.expected_audience,
                      expected_issuer=settings.expected_issuer, required_scopes=settings.required_scopes)


def fetch_jwks(url: str, trust: TlsClientSettings) -> Mapping[str, object]:
    """The JWK Set at `url`; raises OSError or ValueError."""
    body = json.loads(open_url(url, trust))
    if not isinstance(body, dict) or not isinstance(body.get("keys"), list):
        raise ValueError(f"{url} is not a JWK Set (no 'keys' list)")
    return body


class JwksValidator:
    """Validates signed tokens with the latest JWK Set it fetched."""

    def __init__(self, settings: OAuthBearerServerSettings, clock: Clock) -> None:
        assert settings.jwks_url is not None
        self.clock = clock
        self.settings = settings
        self.rules = claim_rules(settings)
        self.url = settings.jwks_url
        self.jwks: Mapping[str, object] | None = None
        self._last_fetch_ms = 0
        self._wanted = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._refresh_loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _refresh_loop(self) -> None:
        while True:
            self._last_fetch_ms = self.clock.monotonic_ms()
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
                await asyncio.sleep(max(0, self._last_fetch_ms + MIN_REFRESH_MS - self.clock.monotonic_ms()) / 1000)
            except TimeoutError:
                pass

    def __call__(self, token: str) -> ValidatedToken:
        jwks = self.jwks
        if jwks is None:
            raise JwtError(f"the JWK Set of {self.url} is not fetched yet")
        try:
            return validate_signed(token, jwks, now_ms=self.clock.now_ms(), **self.rules)
        except JwtError:
            if names_unknown_key(token, jwks):
                self._wanted.set()  # fetch again: the provider may have rotated its keys
            raise


def token_validator(settings: OAuthBearerServerSettings, clock: Clock) -> TokenValidator | JwksValidator:
    """The listener's validation: a `JwksValidator` (to `start`) for signed tokens, else Kafka's
    unsecured tokens' rules."""
    if settings.jwks_url is not None:
        return JwksValidator(settings, clock)

    rules = claim_rules(settings)

    def unsecured(token: str) -> ValidatedToken:
        return validate_unsecured(token, now_ms=clock.now_ms(), **rules)
    return unsecured
