"""What a server-side SASL mechanism is to the connection's state machine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class AuthenticationFailed(Exception):
    """The client's credentials are refused; `str()` is the message sent back to it."""


@dataclass(frozen=True, slots=True)
class MechanismStep:
    challenge: bytes | None  # None: nothing to send after SaslHandshake v0 (Java's null), b"" in SaslAuthenticate
    complete: bool
    principal: str | None = None
    expires_ms: int | None = None  # when the credential itself expires (an OAUTHBEARER token's), wall clock
    token_authenticated: bool = False  # by a delegation token (SCRAM with tokenauth=true)


class MechanismServer(Protocol):
    def evaluate(self, token: bytes) -> MechanismStep:
        """The answer to one client token; raises `AuthenticationFailed`."""
        ...
