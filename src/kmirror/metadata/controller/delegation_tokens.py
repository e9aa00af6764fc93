"""Delegation tokens (KIP-48; Kafka's DelegationTokenControlManager): create, renew, expire,
describe, and the removal of expired tokens.

The controller writes a `DelegationTokenRecord` (created, renewed or given a new expiry) or a
`RemoveDelegationTokenRecord` (expired at once, or found expired by the periodic check). A
token is found by its HMAC, as Kafka's: the request carries the HMAC, the controller derives
each token's from its id with the secret. Outcomes, as Kafka's:
- no `delegation.token.secret.key`: DELEGATION_TOKEN_AUTH_DISABLED;
- a renewer that is not a `User`: INVALID_PRINCIPAL_TYPE;
- no token with that HMAC: DELEGATION_TOKEN_NOT_FOUND;
- a token past its expiry or its max lifetime: DELEGATION_TOKEN_EXPIRED;
- renewing or expiring someone else's token (neither its owner nor a renewer):
  DELEGATION_TOKEN_OWNER_MISMATCH.
Who may ask at all (not over a token, not on PLAINTEXT, CREATE_TOKENS for another owner) is
the broker's check, before the request reaches the controller.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from kmirror.config.server import ServerConfig
from kmirror.metadata.controller.result import NONE, ApiError, ControllerResult
from kmirror.metadata.image import MetadataImage
from kmirror.metadata.records import DelegationTokenRecord, Record, RemoveDelegationTokenRecord
from kmirror.security.delegation_token import USER_TYPE, KafkaPrincipal, token_hmac, token_scram_credential
from kmirror.security.scram import ScramMechanism
from kmirror.security.scram_server import TokenCredential

DISABLED = ApiError(ErrorCode.delegation_token_auth_disabled, "Delegation Token feature is not enabled")
NOT_FOUND = ApiError(ErrorCode.delegation_token_not_found, "Delegation Token is not found on server.")
EXPIRED = ApiError(ErrorCode.delegation_token_expired, "Delegation Token is expired.")
OWNER_MISMATCH = ApiError(ErrorCode.delegation_token_owner_mismatch,
                          "Specified Principal is not valid Owner/Renewer.")
INVALID_RENEWER = ApiError(ErrorCode.invalid_principal_type, "Renewers must be User principals.")


@dataclass(frozen=True, slots=True)
class TokenSettings:
    secret_key: str | None  # delegation.token.secret.key; None: tokens disabled
    max_lifetime_ms: int  # delegation.token.max.lifetime.ms
    expiry_time_ms: int  # delegation.token.expiry.time.ms

    @classmethod
    def from_config(cls, config: ServerConfig) -> TokenSettings:
        return cls(config.get("delegation.token.secret.key") or None, int(config.get("delegation.token.max.lifetime.ms")),
                   int(config.get("delegation.token.expiry.time.ms")))


@dataclass(frozen=True, slots=True)
class CreatedToken:
    error: ApiError
    owner: str
    requester: str
    token: DelegationTokenRecord | None = None
    hmac: bytes = b""


@dataclass(frozen=True, slots=True)
class TokenExpiry:
    error: ApiError
    expiry_timestamp_ms: int = 0  # on an error, as Kafka (the field's default)


def token_by_hmac(image: MetadataImage, secret_key: str, mac: bytes) -> DelegationTokenRecord | None:
    for token in image.delegation_tokens.values():
        if hmac.compare_digest(token_hmac(secret_key, token.token_id), mac):
            return token
    return None


def create_token(image: MetadataImage, settings: TokenSettings, requester: str, owner: str | None,
                 renewers: Sequence[KafkaPrincipal], max_lifetime_ms: int, now_ms: int, token_id: str
                 ) -> ControllerResult[CreatedToken]:
    """`owner` None or empty: the requester (`User:name` both); `max_lifetime_ms` <= 0: the
    configured maximum, never more than it."""
    owner = owner or requester
    if settings.secret_key is None:
        return ControllerResult([], CreatedToken(DISABLED, owner, requester))
    if any(r.principal_type != USER_TYPE for r in renewers):
        return ControllerResult([], CreatedToken(INVALID_RENEWER, owner, requester))
    lifetime_ms = settings.max_lifetime_ms if max_lifetime_ms <= 0 else min(settings.max_lifetime_ms, max_lifetime_ms)
    max_timestamp = now_ms + lifetime_ms
    token = DelegationTokenRecord(owner, requester, tuple(str(r) for r in renewers), now_ms, max_timestamp,
                                  min(max_timestamp, now_ms + settings.expiry_time_ms), token_id)
    return ControllerResult([token], CreatedToken(NONE, owner, requester, token,
                                                  token_hmac(settings.secret_key, token_id)))


def _usable(image: MetadataImage, settings: TokenSettings, principal: str, mac: bytes, now_ms: int
            ) -> DelegationTokenRecord | ApiError:
    if settings.secret_key is None:
        return DISABLED
    token = token_by_hmac(image, settings.secret_key, mac)
    if token is None:
        return NOT_FOUND
    if token.max_timestamp < now_ms or token.expiration_timestamp < now_ms:
        return EXPIRED
    if principal != token.owner and principal not in token.renewers:
        return OWNER_MISMATCH
    return token


def renew_token(image: MetadataImage, settings: TokenSettings, principal: str, mac: bytes, renew_period_ms: int,
                now_ms: int) -> ControllerResult[TokenExpiry]:
    """`renew_period_ms` <= 0: `delegation.token.expiry.time.ms`; never past the max lifetime."""
    token = _usable(image, settings, principal, mac, now_ms)
    if isinstance(token, ApiError):
        return ControllerResult([], TokenExpiry(token))
    period_ms = settings.expiry_time_ms if renew_period_ms <= 0 else min(settings.expiry_time_ms, renew_period_ms)
    expiry = min(token.max_timestamp, now_ms + period_ms)
    return ControllerResult([_with_expiry(token, expiry)], TokenExpiry(NONE, expiry))


def expire_token(image: MetadataImage, settings: TokenSettings, principal: str, mac: bytes, expiry_period_ms: int,
                 now_ms: int) -> ControllerResult[TokenExpiry]:
    """A negative `expiry_period_ms` removes the token now; else it expires that much later
    (never past its max lifetime)."""
    token = _usable(image, settings, principal, mac, now_ms)
    if isinstance(token, ApiError):
        return ControllerResult([], TokenExpiry(token))
    if expiry_period_ms < 0:
        return ControllerResult([RemoveDelegationTokenRecord(token.token_id)], TokenExpiry(NONE, now_ms))
    expiry = min(token.max_timestamp, now_ms + expiry_period_ms)
    return ControllerResult([_with_expiry(token, expiry)], TokenExpiry(NONE, expiry))


def _with_expiry(token: DelegationTokenRecord, expiry: int) -> DelegationTokenRecord:
    return DelegationTokenRecord(token.owner, token.requester, token.renewers, token.issue_timestamp,
                                 token.max_timestamp, expiry, token.token_id)


def remove_expired_tokens(image: MetadataImage, now_ms: int) -> list[Record]:
    """The periodic check (`delegation.token.expiry.check.interval.ms`): every token past its
    expiry or its max lifetime goes."""
    return [RemoveDelegationTokenRecord(t.token_id) for t in image.delegation_tokens.values()
            if t.expiration_timestamp < now_ms or t.max_timestamp < now_ms]


def login_credential(image: MetadataImage, secret_key: str | None, token_id: str,
                     mechanism: ScramMechanism) -> TokenCredential | None:
    """What a SCRAM login with `tokenauth=true` and user name `token_id` is checked against:
    the token's credential, its owner's name, and when it stops being valid (its expiry, never
    past its max lifetime); None without such a token or without the secret."""
    token = image.delegation_tokens.get(token_id)
    if token is None or secret_key is None:
        return None
    return TokenCredential(token_scram_credential(mechanism, secret_key, token_id),
                           KafkaPrincipal.parse(token.owner).name,
                           min(token.expiration_timestamp, token.max_timestamp))


def describable_tokens(image: MetadataImage, owners: Sequence[str] | None) -> list[DelegationTokenRecord]:
    """The tokens of `owners` (None: every owner), oldest first; who may see which is the
    broker's check."""
    tokens = sorted(image.delegation_tokens.values(), key=lambda t: (t.issue_timestamp, t.token_id))
    return tokens if owners is None else [t for t in tokens if t.owner in owners]
