"""What every controller operation returns, and the error value it reports per item."""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from kio.schema.errors import ErrorCode

from kmirror.metadata.records import Record

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ApiError:
    """An expected outcome: a Kafka error code and its message (mapped to the wire by handlers)."""

    code: ErrorCode
    message: str | None = None


NONE = ApiError(ErrorCode.none, None)


@dataclass(frozen=True, slots=True)
class ControllerResult(Generic[T]):
    records: list[Record] = field(default_factory=list)
    response: T | None = None


class Rng(Protocol):
    """The randomness port (satisfied by `random.Random`)."""

    def randrange(self, stop: int, /) -> int: ...

    def getrandbits(self, k: int, /) -> int: ...


def random_kafka_uuid(rng: Rng) -> str:
    """Kafka's Uuid.randomUuid().toString(): URL-safe base64 of 16 bytes, no padding (a
    cluster id, a delegation token id)."""
    raw = uuid.UUID(int=rng.getrandbits(128), version=4).bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


class MetadataOperationError(RuntimeError):
    """An operation that cannot succeed for a reason callers map to an error code."""

    def __init__(self, error: ApiError) -> None:
        super().__init__(error.message or error.code.name)
        self.error = error


class NotControllerError(MetadataOperationError):
    """This controller is not the active one (NOT_CONTROLLER): the request goes to another."""

    def __init__(self, message: str) -> None:
        super().__init__(ApiError(ErrorCode.not_controller, message))
