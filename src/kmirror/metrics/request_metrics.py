"""Kafka's `kafka.network:type=RequestMetrics` for every API served (KIP-1279 "Metrics":
the mirror RPCs are listed like any other request).

Per request name (the API's Kafka name: `Produce`, `Fetch`, `DescribeMirrors`, ...):
- `RequestsPerSec{request,version}`: a meter per API version;
- `ErrorsPerSec{request,error}`: a meter per error name, marked with the number of times the
  response carries that code (`NONE` included), as Kafka's `AbstractResponse.errorCounts`;
- `TotalTimeMs{request}` and its parts, histograms in milliseconds as Kafka's
  (`RequestQueueTimeMs`, `LocalTimeMs`, `RemoteTimeMs`, `ThrottleTimeMs`,
  `ResponseQueueTimeMs`, `ResponseSendTimeMs`): from the frame's arrival to the socket write
  of its response, split as `kmirror.runtime.request_timing` says;
- `RequestBytes{request}`: a histogram of request sizes (header and body, without the size prefix).
Fetch is also recorded as `FetchConsumer` or `FetchFollower` (time, bytes, requests), as
Kafka does; errors only under `Fetch`.

The hot path is one dict lookup for the (request, version) pair plus meter and histogram
updates; names are built once per pair. Error counting walks the response entity once,
with a per-type list of the fields that can hold an error code (`error_counts`).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kmirror.metrics.histogram import Histogram
from kmirror.metrics.meter import Meter
from kmirror.metrics.registry import MetricsRegistry, metric_name
from kmirror.protocol.fast_writer import Encoded

DOMAIN, TYPE = "kafka.network", "RequestMetrics"
FETCH = "Fetch"
FETCH_CONSUMER = "FetchConsumer"
FETCH_FOLLOWER = "FetchFollower"


@dataclass(frozen=True, slots=True)
class RequestTimesMs:
    """One request's time, in milliseconds, and its parts (Kafka's names without `TimeMs`)."""

    queue: float
    local: float
    remote: float
    throttle: float
    response_queue: float
    response_send: float
    total: float


TIME_HISTOGRAMS = (("RequestQueueTimeMs", "queue"), ("LocalTimeMs", "local"), ("RemoteTimeMs", "remote"),
                   ("ThrottleTimeMs", "throttle"), ("ResponseQueueTimeMs", "response_queue"),
                   ("ResponseSendTimeMs", "response_send"), ("TotalTimeMs", "total"))
"""Each Kafka time histogram and the `RequestTimesMs` field it takes."""


class _ApiMetrics:
    __slots__ = ("requests", "times", "request_bytes")

    def __init__(self, requests: Meter, times: tuple[Histogram, ...], request_bytes: Histogram) -> None:
        self.requests = requests
        self.times = times  # in the order of TIME_HISTOGRAMS
        self.request_bytes = request_bytes

    def record(self, times: RequestTimesMs, request_bytes: int) -> None:
        self.requests.mark()
        queue, local, remote, throttle, response_queue, response_send, total = self.times
        queue.update(times.queue)
        local.update(times.local)
        remote.update(times.remote)
        throttle.update(times.throttle)
        response_queue.update(times.response_queue)
        response_send.update(times.response_send)
        total.update(times.total)
        self.request_bytes.update(request_bytes)


class RequestChannelMetrics:
    """The request metrics of one node, shared by all its listeners. `error_name(code)` gives
    Kafka's upper-case name of any error code (Kafka's and KIP-1279's)."""

    def __init__(self, registry: MetricsRegistry, error_name: Callable[[int], str]) -> None:
        self._registry = registry
        self._error_name = error_name
        self._apis: dict[tuple[str, int], _ApiMetrics] = {}
        self._errors: dict[tuple[str, int], Meter] = {}

    def _api(self, request: str, version: int) -> _ApiMetrics:
        found = self._apis.get((request, version))
        if found is None:
            r = self._registry
            found = self._apis[(request, version)] = _ApiMetrics(
                r.meter(metric_name(DOMAIN, TYPE, "RequestsPerSec", request=request, version=str(version))),
                tuple(r.histogram(metric_name(DOMAIN, TYPE, name, request=request)) for name, _ in TIME_HISTOGRAMS),
                r.histogram(metric_name(DOMAIN, TYPE, "RequestBytes", request=request)),
            )
        return found

    def record(self, request: str, version: int, times: RequestTimesMs, request_bytes: int,
               response: Any, from_follower: bool | None = None) -> None:
        """One request served. `response` is the response entity (None: no response, e.g.
        Produce acks=0); `from_follower` tells a Fetch from a replica (True) from a consumer's."""
        self._api(request, version).record(times, request_bytes)
        if from_follower is not None:
            name = FETCH_FOLLOWER if from_follower else FETCH_CONSUMER
            self._api(name, version).record(times, request_bytes)
        if response is not None:
            for code, count in error_counts(response).items():
                self.mark_error(request, code, count)

    def mark_error(self, request: str, code: int, count: int = 1) -> None:
        meter = self._errors.get((request, code))
        if meter is None:
            meter = self._errors[(request, code)] = self._registry.meter(
                metric_name(DOMAIN, TYPE, "ErrorsPerSec", request=request, error=self._error_name(code)))
        meter.mark(count)


# -- error counts of a response entity ----------------------------------------------------

_ERROR_FIELD = "error_code"
_NOT_AN_ENTITY: tuple[bool, tuple[str, ...]] = (False, ())
_ENCODED: tuple[bool, tuple[str, ...]] = (True, ())  # an item written once, kept with its error code
_plans: dict[type, tuple[bool, tuple[str, ...]]] = {}


def _plan(cls: type) -> tuple[bool, tuple[str, ...]]:
    """(has an `error_code` field, fields that may hold nested entities), once per type."""
    if cls is Encoded:
        plan = _ENCODED
    elif not dataclasses.is_dataclass(cls):
        plan = _NOT_AN_ENTITY
    else:
        fields = dataclasses.fields(cls)
        nested = tuple(f.name for f in fields if f.name != _ERROR_FIELD and _may_hold_entities(f.type))
        plan = (any(f.name == _ERROR_FIELD for f in fields), nested)
    _plans[cls] = plan
    return plan


def _may_hold_entities(annotation: Any) -> bool:
    if isinstance(annotation, str):  # an unresolved annotation: look inside at run time
        return "tuple" in annotation or annotation[:1].isupper()
    if isinstance(annotation, type):
        return dataclasses.is_dataclass(annotation)
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is tuple:
        return any(isinstance(a, type) and dataclasses.is_dataclass(a) for a in args)
    return any(_may_hold_entities(a) for a in args if a is not type(None))


def error_counts(response: Any) -> dict[int, int]:
    """Error code -> how many times the response carries it (every `error_code` field of the
    entity and of its nested entities).

    Entities are immutable, and a handler may answer with the same large item again (a
    Metadata topic entry of ten thousand partitions, built once per metadata image): the
    counts of an item of the response's top-level arrays with many entries are kept for
    that object (`_item_counts`)."""
    counts: dict[int, int] = {}
    has_error, nested = _plans.get(type(response)) or _plan(type(response))
    if has_error:
        code = int(getattr(response, _ERROR_FIELD))
        counts[code] = 1
    for name in nested:
        value = getattr(response, name)
        for item in value if type(value) is tuple else () if value is None else (value,):
            for code, n in _item_counts(item).items():
                counts[code] = counts.get(code, 0) + n
    return counts


_MEMO_MIN_ENTRIES = 64
_MEMO_MAX_ITEMS = 10_000
# id(item) -> (item, its counts): the item is held so that its id is not reused meanwhile
_memo: dict[int, tuple[object, dict[int, int]]] = {}


def _item_counts(item: Any) -> dict[int, int]:
    kept = _memo.get(id(item))
    if kept is not None and kept[0] is item:
        return kept[1]
    counts: dict[int, int] = {}
    _count(item, counts)
    if sum(counts.values()) >= _MEMO_MIN_ENTRIES:
        if len(_memo) >= _MEMO_MAX_ITEMS:
            _memo.clear()
        _memo[id(item)] = (item, counts)
    return counts


def _count(entity: Any, counts: dict[int, int]) -> None:
    plan = _plans.get(type(entity)) or _plan(type(entity))
    has_error, nested = plan
    if has_error:
        code = int(getattr(entity, _ERROR_FIELD))
        counts[code] = counts.get(code, 0) + 1
    for name in nested:
        value = getattr(entity, name)
        if type(value) is tuple:
            for item in value:
                _count(item, counts)
        elif value is not None:
            _count(value, counts)
