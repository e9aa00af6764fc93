"""The Kafka listener: an asyncio Protocol per connection.

Requests on one connection are handled one at a time and answered in order (Kafka mutes a
channel while a request is in flight). A frame that cannot be parsed, an unknown API key or
an unsupported version of anything but ApiVersions closes that connection only; every
other connection keeps being served.

Every request answered (or, for Produce acks=0, handled) is recorded in the node's
`RequestChannelMetrics` (kafka.network RequestMetrics): its time from leaving the
connection's queue to its response being encoded, its size and the error
codes of its response. A handler that raises counts as UNKNOWN_SERVER_ERROR.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import time
from collections import deque
from typing import Any

from kmirror.broker.api import RequestContext
from kmirror.broker.handlers.api_versions import unsupported_version_response
from kmirror.metrics.request_metrics import RequestChannelMetrics
from kmirror.protocol.codec import (
    DecodedRequest,
    MalformedRequest,
    UnsupportedRequest,
    decode_request,
    encode_response,
)
from kmirror.protocol.errors import ErrorCode
from kmirror.protocol.framing import FrameDecoder, FrameTooLarge
from kmirror.protocol.registry import ApiRegistry

log = logging.getLogger(__name__)

API_VERSIONS = 18
FETCH = 1
_MAX_QUEUED_FRAMES = 64
_ids = itertools.count(1)


class KafkaConnection(asyncio.Protocol):
    def __init__(self, server: KafkaServer) -> None:
        self._server = server
        self._decoder = FrameDecoder(server.max_request_bytes)
        self._queue: deque[bytes] = deque()
        self._wakeup = asyncio.Event()
        self._transport: asyncio.Transport | None = None
        self._task: asyncio.Task[None] | None = None
        self._paused = False
        self._closed = False
        self.connection_id = next(_ids)
        self.peer = "?"

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = peer[0] if peer else "?"
        self._server.connections.add(self)
        self._task = asyncio.get_running_loop().create_task(self._serve())

    def data_received(self, data: bytes) -> None:
        try:
            frames = self._decoder.feed(data)
        except FrameTooLarge as exc:
            log.warning("closing connection %s from %s: %s", self.connection_id, self.peer, exc)
            self.close()
            return
        if frames:
            self._queue.extend(frames)
            self._wakeup.set()
            if len(self._queue) > _MAX_QUEUED_FRAMES and not self._paused and self._transport:
                self._transport.pause_reading()
                self._paused = True

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._server.connections.discard(self)
        self._wakeup.set()
        if self._task is not None:
            self._task.cancel()

    def close(self) -> None:
        self._closed = True
        if self._transport is not None:
            self._transport.close()

    # request loop
    async def _serve(self) -> None:
        try:
            while not self._closed:
                if not self._queue:
                    self._wakeup.clear()
                    await self._wakeup.wait()
                    continue
                raw = self._queue.popleft()
                if self._paused and len(self._queue) < _MAX_QUEUED_FRAMES // 2 and self._transport:
                    self._transport.resume_reading()
                    self._paused = False
                payload = await self._handle(raw)
                if payload is not None and self._transport is not None and not self._closed:
                    self._transport.write(payload)
        except asyncio.CancelledError:
            pass

    async def _handle(self, raw: bytes) -> memoryview | None:
        server = self._server
        try:
            decoded = decode_request(server.registry, raw)
        except MalformedRequest as exc:
            log.warning("closing connection %s from %s: %s", self.connection_id, self.peer, exc)
            self.close()
            return None
        if isinstance(decoded, UnsupportedRequest):
            return self._unsupported(decoded)
        metrics = server.request_metrics
        if metrics is None:
            return (await self._dispatch(decoded))[0]
        started_ns = time.perf_counter_ns()
        payload, response = await self._dispatch(decoded, metrics)
        spec = decoded.spec
        metrics.record(
            spec.name, decoded.header.api_version, (time.perf_counter_ns() - started_ns) / 1e6, len(raw),
            response, _from_follower(decoded.body) if spec.api_key == FETCH else None,
        )
        return payload

    def _unsupported(self, req: UnsupportedRequest) -> memoryview | None:
        registry = self._server.registry
        if req.api_key == API_VERSIONS:
            spec = registry.get(API_VERSIONS)
            assert spec is not None
            return encode_response(spec, 0, req.correlation_id, unsupported_version_response(registry))
        what = "unsupported version" if req.known_api else "unknown API key"
        log.warning(
            "closing connection %s from %s: %s (api_key=%d, version=%d)",
            self.connection_id, self.peer, what, req.api_key, req.api_version,
        )
        self.close()
        return None

    async def _dispatch(
        self, req: DecodedRequest, metrics: RequestChannelMetrics | None = None
    ) -> tuple[memoryview | None, Any]:
        """(encoded response or None, the response entity or None)."""
        spec = req.spec
        version = req.header.api_version
        ctx = RequestContext(
            header=req.header,
            response_type=spec.response_type(version),
            client_host=self.peer,
            connection_id=self.connection_id,
        )
        try:
            result: Any = spec.handler(self._server.services, ctx, req.body)
            if inspect.isawaitable(result):
                result = await result
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("error handling %s v%d from %s; closing connection", spec.name, version, self.peer)
            if metrics is not None:
                metrics.mark_error(spec.name, int(ErrorCode.unknown_server_error))
            self.close()
            return None, None
        if result is None:  # e.g. Produce with acks=0
            return None, None
        return encode_response(spec, version, req.header.correlation_id, result), result


def _from_follower(body: Any) -> bool:
    """A Fetch from a replica (`replica_id` >= 0; v15+ carries it in `replica_state`)."""
    state = getattr(body, "replica_state", None)
    replica_id = state.replica_id if state is not None else getattr(body, "replica_id", -1)
    return int(replica_id) >= 0


class KafkaServer:
    def __init__(self, registry: ApiRegistry, services: Any, max_request_bytes: int = 100 * 1024 * 1024,
                 request_metrics: RequestChannelMetrics | None = None) -> None:
        self.registry = registry
        self.services = services
        self.max_request_bytes = max_request_bytes
        self.request_metrics = request_metrics
        self.connections: set[KafkaConnection] = set()
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> int:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: KafkaConnection(self), host, port, reuse_address=True)
        sock = self._server.sockets[0]
        return int(sock.getsockname()[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.close()
        if self._server is not None:
            await self._server.wait_closed()
