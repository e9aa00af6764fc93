"""Option `kmirror.delegationToken`: the tasks log in with a delegation token of the driver's
user (KIP-48), never with the driver's own credentials, as Spark's Kafka connector hands its
executors a token (`spark.kafka.clusters.*`, a JVM feature).

The driver plans with its configured login (SCRAM, PLAIN, Kerberos, OAuth). The first time it
plans tasks it creates a token with that login; each task gets the token as its login (SCRAM,
`kmirror.delegationToken.mechanism`, default SCRAM-SHA-512 as Spark's
`sasl.token.mechanism`), in the task's partition object. The driver renews the token when half
of its time to expiry is gone, and creates a new one when it cannot be renewed (its max
lifetime is near or reached): a streaming query outlives any one token. What is pickled for
the executors (the reader, the data source's options) carries no driver credential
(`without_credentials`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping

from kmirror.client.admin import Admin
from kmirror.client.delegation_tokens import DelegationToken
from kmirror.client.errors import KafkaError
from kmirror.security.client_config import client_security

# The driver's login: what tasks must never receive when they log in with a token.
CREDENTIAL_KEYS = ("sasl.jaas.config", "sasl.oauthbearer.client.credentials.client.secret",
                   "sasl.oauthbearer.client.credentials.client.id", "sasl.oauthbearer.token.endpoint.url",
                   "sasl.oauthbearer.scope", "sasl.kerberos.service.name", "sasl.login.callback.handler.class",
                   "ssl.keystore.location", "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.key.password",
                   "ssl.keystore.password")


def without_credentials(configs: Mapping[str, str]) -> dict[str, str]:
    """`configs` less the driver's login (trust settings, TLS included, stay)."""
    return {k: v for k, v in configs.items() if k not in CREDENTIAL_KEYS}


def task_configs(driver_configs: Mapping[str, str], token: DelegationToken, mechanism: str) -> dict[str, str]:
    return {**without_credentials(driver_configs), "sasl.mechanism": mechanism, "sasl.jaas.config": token.jaas_config()}


def token_plan(token: DelegationToken | None, renewed_at_ms: int, now_ms: int) -> str:
    """What to do with the driver's token at `now_ms`: "keep", "renew" once half of the time
    between the last renewal (or creation) and the expiry is gone, "replace" when the max
    lifetime comes before the next renewal would be due or the token is gone."""
    if token is None or now_ms >= token.expiry_timestamp_ms:
        return "replace"
    half = (token.expiry_timestamp_ms - renewed_at_ms) // 2
    if now_ms < renewed_at_ms + half:
        return "keep"
    return "replace" if token.max_timestamp_ms - now_ms <= half else "renew"


_SHARED: dict[tuple[tuple[str, str], ...], DriverToken] = {}


def driver_token(driver_configs: Mapping[str, str], mechanism: str) -> DriverToken:
    """The token of this driver process for these configs: readers planned in the same
    Python worker share one (Spark reuses its workers), so a job of many reads does not leave
    a token per read in the metadata log."""
    key = (*sorted(driver_configs.items()), ("mechanism", mechanism))
    found = _SHARED.get(key)
    if found is None:
        found = _SHARED[key] = DriverToken(driver_configs, mechanism)
    return found


class DriverToken:
    """The driver's token for one reader or writer; `task_configs()` on the driver only."""

    def __init__(self, driver_configs: Mapping[str, str], mechanism: str,
                 clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self._driver_configs = dict(driver_configs)
        self.mechanism = mechanism
        self._clock_ms = clock_ms
        self.token: DelegationToken | None = None
        self.renewed_at_ms = 0

    def task_configs(self) -> dict[str, str]:
        """The tasks' client configs, with a token that is valid for at least half its renewal period."""
        action = token_plan(self.token, self.renewed_at_ms, self._clock_ms())
        if action != "keep":
            asyncio.run(self._refresh(action))
        assert self.token is not None
        return task_configs(self._driver_configs, self.token, self.mechanism)

    async def _refresh(self, action: str) -> None:
        configs = self._driver_configs
        async with await Admin.connect(configs["bootstrap.servers"], security=client_security(configs),
                                       client_id="kmirror-spark-driver") as admin:
            if action == "renew" and self.token is not None:
                try:
                    expiry = await admin.renew_delegation_token(self.token.hmac)
                except KafkaError:  # expired or removed meanwhile: a new one
                    action = "replace"
                else:
                    self.token = _with_expiry(self.token, expiry)
            if action == "replace":
                self.token = await admin.create_delegation_token()
        self.renewed_at_ms = self._clock_ms()


def _with_expiry(token: DelegationToken, expiry_ms: int) -> DelegationToken:
    return DelegationToken(token.token_id, token.hmac, token.owner, token.requester, token.renewers,
                           token.issue_timestamp_ms, expiry_ms, token.max_timestamp_ms)
