"""The controller's delegation tokens (KIP-48), a part of `MetadataService`: each operation
runs its sans-IO core from `kmirror.metadata.controller.delegation_tokens` under the service's
lock, with the current `delegation.token.*` configs, and commits the records before it answers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from kmirror.config.server import ServerConfig
from kmirror.metadata.controller import delegation_tokens as token_ops
from kmirror.metadata.controller.result import ControllerResult, NotControllerError, Rng, random_kafka_uuid
from kmirror.metadata.image import MetadataImage
from kmirror.metadata.records import Record
from kmirror.ports import Clock
from kmirror.security.delegation_token import KafkaPrincipal

R = TypeVar("R")


class DelegationTokenControl:
    # Provided by `MetadataService`.
    _config: ServerConfig
    _clock: Clock
    _rng: Rng

    async def _run(self, op: Callable[[MetadataImage], ControllerResult[R]], *, large: bool = False) -> R:
        raise NotImplementedError

    def _token_settings(self) -> token_ops.TokenSettings:
        return token_ops.TokenSettings.from_config(self._config)

    async def create_delegation_token(self, requester: str, owner: str | None, renewers: Sequence[KafkaPrincipal],
                                      max_lifetime_ms: int) -> token_ops.CreatedToken:
        token_id = random_kafka_uuid(self._rng)
        return await self._run(lambda image: token_ops.create_token(
            image, self._token_settings(), requester, owner, renewers, max_lifetime_ms, self._clock.now_ms(),
            token_id))

    async def renew_delegation_token(self, principal: str, mac: bytes, renew_period_ms: int) -> token_ops.TokenExpiry:
        return await self._run(lambda image: token_ops.renew_token(
            image, self._token_settings(), principal, mac, renew_period_ms, self._clock.now_ms()))

    async def expire_delegation_token(self, principal: str, mac: bytes, expiry_period_ms: int) -> token_ops.TokenExpiry:
        return await self._run(lambda image: token_ops.expire_token(
            image, self._token_settings(), principal, mac, expiry_period_ms, self._clock.now_ms()))

    async def remove_expired_delegation_tokens(self) -> int:
        """A periodic task (`delegation.token.expiry.check.interval.ms`): how many expired tokens
        went; nothing on a controller that is not the active one."""
        try:
            return await self._run(lambda image: _removals(token_ops.remove_expired_tokens(image, self._clock.now_ms())))
        except NotControllerError:
            return 0


def _removals(records: list[Record]) -> ControllerResult[int]:
    return ControllerResult(records, len(records))
