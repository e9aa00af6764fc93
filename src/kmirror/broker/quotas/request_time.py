"""The handler time a request is charged for `request_percentage` (Kafka's request thread
time): the handler's wall time less the time it waited in the purgatory (a long-poll Fetch or
an acks=all Produce waiting for the ISR costs no handler time, as in Kafka, where a delayed
operation frees its request handler thread).

The server sets `CURRENT_REQUEST_TIMER` around a handler; the purgatory pauses it while it
waits. The timer reads the clock; the purgatory only says when it waits.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Protocol


class RequestTimer(Protocol):
    def pause(self) -> None: ...

    def resume(self) -> None: ...


CURRENT_REQUEST_TIMER: ContextVar[RequestTimer | None] = ContextVar("kmirror_request_timer", default=None)
