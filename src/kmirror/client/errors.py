"""Client-side errors, each with a one-line message fit for a CLI's `Error: ...` line.

`KafkaError` carries a Kafka error code from a response and its Kafka name
(`TOPIC_ALREADY_EXISTS`); `KafkaConnectionError` is a transport failure (refused, reset,
timed out); `KafkaProtocolError` is a broker reply the client cannot use (undecodable
frame, unknown correlation id, no common API version).
"""

from __future__ import annotations

from kmirror.kip1279.errors import error_name, is_retriable

__all__ = [
    "KafkaAuthenticationError", "KafkaClientError", "KafkaConnectionError", "KafkaError", "KafkaProtocolError",
    "KafkaTimeoutError", "check", "error_name", "is_retriable",
]


class KafkaClientError(Exception):
    """Base of every error this client raises for an expected failure."""


class KafkaConnectionError(KafkaClientError):
    pass


class KafkaProtocolError(KafkaClientError):
    pass


class KafkaTimeoutError(KafkaConnectionError):
    pass


class KafkaError(KafkaClientError):
    def __init__(self, error_code: int, message: str | None = None, context: str | None = None) -> None:
        self.error_code = int(error_code)
        self.error_name = error_name(error_code)
        self.error_message = message
        self.context = context
        text = self.error_name
        if context:
            text = f"{context}: {text}"
        if message:
            text = f"{text}: {message}"
        super().__init__(text)

    @property
    def retriable(self) -> bool:
        return is_retriable(self.error_code)


def check(error_code: int, message: str | None = None, context: str | None = None) -> None:
    """Raise `KafkaError` unless `error_code` is NONE (0)."""
    if error_code:
        raise KafkaError(error_code, message, context)


class KafkaAuthenticationError(KafkaError):
    """The broker refused the SASL exchange (SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM,
    ILLEGAL_SASL_STATE): not retriable with the same credentials, as Kafka's
    AuthenticationException."""
