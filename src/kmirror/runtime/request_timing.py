"""Where a request's time goes, split as Kafka's `RequestMetrics` split it
(`RequestChannel.Request.updateRequestMetrics`), from the listener's clock readings:

- queue: from the frame's arrival off the socket to its handler starting (Kafka's
  RequestQueueTimeMs: a connection's requests wait for the one before them, and every
  connection for the event loop);
- local: the handler's time less its purgatory waits (LocalTimeMs, the handler time
  `request_percentage` quotas charge);
- remote: the handler's purgatory waits, a long-poll Fetch or an acks=all Produce waiting
  for the ISR (RemoteTimeMs);
- throttle: a response held back for a client quota (ThrottleTimeMs; a client that throttles
  itself gets its response at once, and its channel is muted after it, as Kafka's);
- response queue: from the response being encoded to the socket write that sends it (one
  event loop turn, or more while the loop is busy; ResponseQueueTimeMs);
- response send: that write (ResponseSendTimeMs). Bytes the kernel does not take at once are
  sent later by the event loop, outside this time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kmirror.metrics.request_metrics import RequestChannelMetrics, RequestTimesMs

_NS_PER_MS = 1e6


class HandlerTimer:
    """A handler's time, less its purgatory waits (`kmirror.broker.quotas.request_time`)."""

    __slots__ = ("_started_ns", "_paused_ns", "_pause_started_ns")

    def __init__(self) -> None:
        self._started_ns = time.perf_counter_ns()
        self._paused_ns = 0
        self._pause_started_ns = 0

    def pause(self) -> None:
        self._pause_started_ns = time.perf_counter_ns()

    def resume(self) -> None:
        if self._pause_started_ns:
            self._paused_ns += time.perf_counter_ns() - self._pause_started_ns
            self._pause_started_ns = 0

    def elapsed_ns(self) -> int:
        return max(0, time.perf_counter_ns() - self._started_ns - self._paused_ns)

    def waited_ns(self) -> int:
        return self._paused_ns


@dataclass(slots=True)
class RequestClock:
    """The clock readings of one request, in `time.perf_counter_ns`."""

    received_ns: int
    started_ns: int = 0
    remote_ns: int = 0
    throttle_ns: int = 0
    ready_ns: int = 0

    def times_ms(self, write_started_ns: int, written_ns: int) -> RequestTimesMs:
        """The split once the response was written (both times `ready_ns` for a request
        answered with nothing). Local time is the rest of the handling: the handler less its
        waits, and the response's encoding."""
        local_ns = self.ready_ns - self.started_ns - self.remote_ns - self.throttle_ns
        return RequestTimesMs(
            queue=(self.started_ns - self.received_ns) / _NS_PER_MS, local=max(0, local_ns) / _NS_PER_MS,
            remote=self.remote_ns / _NS_PER_MS, throttle=self.throttle_ns / _NS_PER_MS,
            response_queue=max(0, write_started_ns - self.ready_ns) / _NS_PER_MS,
            response_send=(written_ns - write_started_ns) / _NS_PER_MS,
            total=(written_ns - self.received_ns) / _NS_PER_MS)


@dataclass(slots=True)
class ServedRequest:
    """A request handled, recorded in the metrics once its response is written."""

    name: str
    version: int
    size: int
    response: object
    from_follower: bool | None
    clock: RequestClock

    def record(self, metrics: RequestChannelMetrics, write_started_ns: int, written_ns: int) -> None:
        metrics.record(self.name, self.version, self.clock.times_ms(write_started_ns, written_ns), self.size,
                       self.response, self.from_follower)
