"""Admin methods for delegation tokens (Kafka Admin `createDelegationToken`,
`renewDelegationToken`, `expireDelegationToken`, `describeDelegationToken`; KIP-48).

`DelegationTokenAdmin` is mixed into `kmirror.client.admin.Admin`; it needs `self.cluster`.
A token authenticates a client as its owner: SCRAM with the token id as user name, the
base64 of its HMAC as password and `tokenauth="true"` in the ScramLoginModule's options
(`DelegationToken.jaas_config`).
"""

from __future__ import annotations

import base64
import datetime
from collections.abc import Iterable
from dataclasses import dataclass

from kmirror.client.cluster import Cluster
from kmirror.client.errors import check
from kmirror.protocol.entities import build, nested
from kmirror.security.delegation_token import KafkaPrincipal

CREATE, RENEW, EXPIRE, DESCRIBE = 38, 39, 40, 41


@dataclass(frozen=True, slots=True)
class DelegationToken:
    token_id: str
    hmac: bytes
    owner: str  # User:alice
    requester: str
    renewers: tuple[str, ...]
    issue_timestamp_ms: int
    expiry_timestamp_ms: int
    max_timestamp_ms: int

    @property
    def hmac_base64(self) -> str:
        return base64.b64encode(self.hmac).decode()

    def jaas_config(self) -> str:
        """`sasl.jaas.config` that authenticates with this token (with a SCRAM mechanism)."""
        return (f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{self.token_id}" '
                f'password="{self.hmac_base64}" tokenauth="true";')


def _principal(text: str) -> tuple[str, str]:
    principal = KafkaPrincipal.parse(text)
    return principal.principal_type, principal.name


def _ms(value: datetime.datetime | int) -> int:
    return int(value) if isinstance(value, int) else round(value.timestamp() * 1000)


class DelegationTokenAdmin:
    cluster: Cluster

    async def create_delegation_token(self, *, renewers: Iterable[str] = (), owner: str | None = None,
                                      max_lifetime_ms: int = -1) -> DelegationToken:
        """A token for the connection's principal, or for `owner` (`User:name`, needs
        CREATE_TOKENS on that user); renewers as `User:name`."""
        conn = await self.cluster.any_connection()
        rt = conn.request_type(CREATE)
        owner_type, owner_name = _principal(owner) if owner else (None, None)
        response = await conn.send(build(
            rt, owner_principal_type=owner_type, owner_principal_name=owner_name,
            renewers=tuple(build(nested(rt, "CreatableRenewers"), principal_type=k, principal_name=n)
                           for k, n in map(_principal, renewers)),
            max_lifetime=datetime.timedelta(milliseconds=max_lifetime_ms)))
        check(response.error_code, None, "CreateDelegationToken")
        requester = (f"{response.token_requester_principal_type}:{response.token_requester_principal_name}"
                     if hasattr(response, "token_requester_principal_type") else "")
        return DelegationToken(response.token_id, bytes(response.hmac),
                               f"{response.principal_type}:{response.principal_name}", requester, tuple(renewers),
                               _ms(response.issue_timestamp), _ms(response.expiry_timestamp),
                               _ms(response.max_timestamp))

    async def renew_delegation_token(self, hmac: bytes, renew_period_ms: int = -1) -> int:
        """The token's new expiry timestamp (ms)."""
        return await self._new_expiry(RENEW, "RenewDelegationToken", hmac, renew_period=renew_period_ms)

    async def expire_delegation_token(self, hmac: bytes, expiry_time_period_ms: int = -1) -> int:
        """The token's new expiry timestamp (ms); a negative period removes it now."""
        return await self._new_expiry(EXPIRE, "ExpireDelegationToken", hmac, expiry_time_period=expiry_time_period_ms)

    async def _new_expiry(self, api_key: int, api_name: str, hmac: bytes, **period_ms: int) -> int:
        conn = await self.cluster.any_connection()
        periods = {name: datetime.timedelta(milliseconds=ms) for name, ms in period_ms.items()}
        response = await conn.send(build(conn.request_type(api_key), hmac=hmac, **periods))
        check(response.error_code, None, api_name)
        return _ms(response.expiry_timestamp)

    async def describe_delegation_tokens(self, owners: Iterable[str] | None = None) -> list[DelegationToken]:
        """The tokens of `owners` (`User:name`; None: every owner) this principal may see."""
        conn = await self.cluster.any_connection()
        rt = conn.request_type(DESCRIBE)
        wanted = None if owners is None else tuple(
            build(nested(rt, "DescribeDelegationTokenOwner"), principal_type=k, principal_name=n)
            for k, n in map(_principal, owners))
        response = await conn.send(build(rt, owners=wanted))
        check(response.error_code, None, "DescribeDelegationToken")
        return [DelegationToken(
            t.token_id, bytes(t.hmac), f"{t.principal_type}:{t.principal_name}",
            f"{getattr(t, 'token_requester_principal_type', '')}:{getattr(t, 'token_requester_principal_name', '')}",
            tuple(f"{r.principal_type}:{r.principal_name}" for r in t.renewers),
            int(t.issue_timestamp), int(t.expiry_timestamp), int(t.max_timestamp)) for t in response.tokens]
