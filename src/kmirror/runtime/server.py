"""The Kafka listener: an asyncio Protocol per connection.

Requests on one connection are handled one at a time and answered in order (Kafka mutes a
channel while a request is in flight). A frame that cannot be parsed, an unknown API key or
an unsupported version of anything but ApiVersions closes that connection only; every
other connection keeps being served.

Every request answered (or, for Produce acks=0, handled) is recorded in the node's
`RequestChannelMetrics` (kafka.network RequestMetrics): its time from leaving the
connection's queue to its response being encoded, its size and the error
codes of its response. A handler that raises counts as UNKNOWN_SERVER_ERROR.

A listener may speak TLS (an `ssl.SSLContext` given to `start`) and SASL: its connections
then run a `SaslServer` (kmirror.security.sasl_server) that answers SaslHandshake and
SaslAuthenticate and lets nothing but ApiVersions through before authentication (requests
of the SASL exchange are not recorded in the request metrics). A TLS handshake that fails
(e.g. a plaintext client on an SSL port) closes that connection only.
"""

from __future__ import annotations

import asyncio
import datetime
import inspect
import itertools
import logging
import ssl
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
from kmirror.protocol.entities import build
from kmirror.protocol.errors import ErrorCode
from kmirror.protocol.framing import FrameDecoder, FrameTooLarge
from kmirror.protocol.registry import ApiRegistry
from kmirror.security.listener_config import SaslServerSettings
from kmirror.security.plain import PLAIN, PlainServer
from kmirror.security.sasl_mechanism import MechanismServer
from kmirror.security.sasl_server import (
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    Action,
    SaslDecision,
    SaslServer,
)

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
        self._sasl = None if server.sasl is None else SaslServer(server.sasl.enabled_mechanisms,
                                                                 server.mechanism_server)

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
        if self._sasl is not None and not self._sasl.authenticated:
            return self._authenticate(decoded)
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

    def _authenticate(self, req: DecodedRequest) -> memoryview | None:
        """A request before SASL authentication completed (see the module docstring)."""
        assert self._sasl is not None
        key = req.header.api_key
        if key == SASL_HANDSHAKE:
            decision = self._sasl.on_handshake(str(req.body.mechanism))
        elif key == SASL_AUTHENTICATE:
            decision = self._sasl.on_authenticate(bytes(req.body.auth_bytes))
        else:
            decision = self._sasl.on_request(key)
        if decision.action is Action.CLOSE:
            log.warning("closing connection %s from %s on listener %s: illegal SASL state (%s)",
                        self.connection_id, self.peer, self._server.listener, self._sasl.failure)
            self.close()
            return None
        if decision.action is Action.DISPATCH:
            # only ApiVersions is dispatched before authentication; it never awaits
            ctx = self._context(req)
            result = req.spec.handler(self._server.services, ctx, req.body)
            assert not inspect.isawaitable(result)
            return encode_response(req.spec, req.header.api_version, req.header.correlation_id, result)
        if decision.error is not ErrorCode.none:
            log.warning("authentication of connection %s from %s on listener %s failed: %s",
                        self.connection_id, self.peer, self._server.listener, decision.message)
        elif self._sasl.authenticated:
            log.info("connection %s from %s on listener %s authenticated as User:%s",
                     self.connection_id, self.peer, self._server.listener, self._sasl.principal)
        payload = encode_response(req.spec, req.header.api_version, req.header.correlation_id,
                                  _sasl_response(req, decision))
        if decision.close_after_response and self._transport is not None:
            self._transport.write(payload)
            self.close()
            return None
        return payload

    def _unsupported(self, req: UnsupportedRequest) -> memoryview | None:
        registry = self._server.registry
        if self._sasl is not None and not self._sasl.authenticated and req.api_key != API_VERSIONS:
            log.warning("closing connection %s from %s: api_key=%d before SASL authentication",
                        self.connection_id, self.peer, req.api_key)
            self.close()
            return None
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
        ctx = self._context(req)
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


    def _context(self, req: DecodedRequest) -> RequestContext:
        return RequestContext(
            header=req.header,
            response_type=req.spec.response_type(req.header.api_version),
            client_host=self.peer,
            connection_id=self.connection_id,
            listener=self._server.listener,
        )


def _sasl_response(req: DecodedRequest, decision: SaslDecision) -> Any:
    rt = req.spec.response_type(req.header.api_version)
    if req.header.api_key == SASL_HANDSHAKE:
        return build(rt, error_code=decision.error, mechanisms=decision.mechanisms)
    return build(rt, error_code=decision.error, error_message=decision.message,
                 auth_bytes=decision.auth_bytes, session_lifetime=datetime.timedelta(0))


def _from_follower(body: Any) -> bool:
    """A Fetch from a replica (`replica_id` >= 0; v15+ carries it in `replica_state`)."""
    state = getattr(body, "replica_state", None)
    replica_id = state.replica_id if state is not None else getattr(body, "replica_id", -1)
    return int(replica_id) >= 0


class KafkaServer:
    def __init__(self, registry: ApiRegistry, services: Any, max_request_bytes: int = 100 * 1024 * 1024,
                 request_metrics: RequestChannelMetrics | None = None, *,
                 listener: str = "PLAINTEXT", sasl: SaslServerSettings | None = None) -> None:
        self.registry = registry
        self.services = services
        self.max_request_bytes = max_request_bytes
        self.request_metrics = request_metrics
        self.listener = listener
        self.sasl = sasl
        self.connections: set[KafkaConnection] = set()
        self._server: asyncio.Server | None = None

    def mechanism_server(self, mechanism: str) -> MechanismServer:
        assert self.sasl is not None and mechanism == PLAIN
        return PlainServer(self.sasl.plain_users)

    async def start(self, host: str, port: int, ssl_context: ssl.SSLContext | None = None) -> int:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: KafkaConnection(self), host, port, reuse_address=True,
                                                ssl=ssl_context)
        sock = self._server.sockets[0]
        return int(sock.getsockname()[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.close()
        if self._server is not None:
            await self._server.wait_closed()
