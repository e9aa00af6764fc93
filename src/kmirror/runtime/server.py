"""The Kafka listener: an asyncio Protocol per connection.

Requests on one connection are handled one at a time and answered in order (Kafka mutes a
channel while a request is in flight); the responses to requests handled without waiting in
between share one socket write. A frame that cannot be parsed, an unknown API key or
an unsupported version of anything but ApiVersions closes that connection only; every
other connection keeps being served.

Client quotas (`services.quotas`, broker listeners only): after a handler, the request's
size and handler time are recorded (`QuotaManagers.throttle_after`) and the response carries
the throttle time. A client that throttles itself (KIP-219) gets the response at once and
the channel is then muted for the throttle time (no further request of that connection is
handled, as Kafka's ThrottledChannel); an older client gets the response after it.

Every request answered (or, for Produce acks=0, handled) is recorded in the node's
`RequestChannelMetrics` (kafka.network RequestMetrics) once its response is written: its time
from the frame's arrival to that write, split as Kafka splits it (`request_timing`), its size
and the error codes of its response. A handler that raises counts as UNKNOWN_SERVER_ERROR.

Limits, with Kafka's names (`ListenerLimits`, from the broker config):
- `socket.request.max.bytes`: a larger frame closes the connection (Kafka `NetworkReceive`);
- backpressure: while a connection's send buffer is over its high-water mark
  (`pause_writing`), no further request of that connection is handled, as Kafka mutes a
  channel until its response is sent; its unread requests stay in the socket. A client that
  pipelines Fetches and never reads thus pins at most one response (bounded by
  `fetch.max.bytes`) and the transport buffer;
- reading pauses on a connection holding 64 unanswered requests or `socket.request.max.bytes`
  of them, and on every connection while the listener holds `queued.max.requests`;
- `max.connections` per listener and `max.connections.per.ip` (with
  `max.connections.per.ip.overrides`): a connection past a limit is closed at once (Kafka's
  acceptor blocks for `max.connections`; closing is the equivalent a client can see);
- the `connection_creation_rate` client quota of the `ip` entity (KIP-612): a connection that
  takes its host past the quota is closed at once (`QuotaManagers.connection_rate`).

A listener may speak TLS (an `ssl.SSLContext` given to `start`) and SASL: its connections
then run a `SaslServer` (kmirror.security.sasl_server; its mechanisms: `sasl_listener`) that
answers SaslHandshake and SaslAuthenticate and lets nothing but ApiVersions through before
authentication (requests of the SASL exchange are not recorded in the request metrics). A TLS handshake that fails
(e.g. a plaintext client on an SSL port) closes that connection only.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import ssl
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from kmirror.broker.api import RequestContext
from kmirror.broker.handlers.api_versions import unsupported_version_response
from kmirror.broker.quotas.client_quota_manager import ANONYMOUS
from kmirror.broker.quotas.managers import QuotaManagers, client_throttles
from kmirror.broker.quotas.request_time import CURRENT_REQUEST_TIMER
from kmirror.broker.services import BrokerServices
from kmirror.metadata.controller.result import NotControllerError
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
from kmirror.runtime.request_timing import HandlerTimer, RequestClock, ServedRequest
from kmirror.runtime.sasl_listener import sasl_decision, sasl_mechanisms, sasl_response, session_text
from kmirror.security.listener_config import SaslServerSettings
from kmirror.security.oauthbearer import TokenValidator
from kmirror.security.sasl_server import SASL_HANDSHAKE, Action, SaslServer
from kmirror.security.ssl_principal import PrincipalMappingError, Rule, certificate_principal

log = logging.getLogger(__name__)

API_VERSIONS = 18
FETCH = 1
_MAX_QUEUED_FRAMES = 64
# Responses waiting to be written together are written at once past this size.
_COALESCE_MAX_BYTES = 64 * 1024
_ids = itertools.count(1)
UNLIMITED = 2**31 - 1


@dataclass(frozen=True, slots=True)
class ListenerLimits:
    """See the module docstring; Kafka's defaults."""

    max_request_bytes: int = 104_857_600  # socket.request.max.bytes
    queued_max_requests: int = 500  # queued.max.requests
    max_connections: int = UNLIMITED  # max.connections
    max_connections_per_ip: int = UNLIMITED  # max.connections.per.ip
    max_connections_per_ip_overrides: Mapping[str, int] = field(default_factory=dict)

    def per_ip(self, host: str) -> int:
        return self.max_connections_per_ip_overrides.get(host, self.max_connections_per_ip)


class KafkaConnection(asyncio.Protocol):
    def __init__(self, server: KafkaServer) -> None:
        self._server = server
        self._decoder = FrameDecoder(server.limits.max_request_bytes)
        self._queue: deque[bytes] = deque()
        self._arrivals: deque[int] = deque()  # each queued frame's arrival (perf_counter_ns)
        self._queued_bytes = 0
        self._wakeup = asyncio.Event()
        self._writable = asyncio.Event()
        self._writable.set()
        self._transport: asyncio.Transport | None = None
        self._task: asyncio.Task[None] | None = None
        self._paused = False
        self._closed = False
        self._muted_until = 0.0  # loop time until which a throttled channel stays muted
        self._unsent: list[memoryview | bytes] = []  # responses awaiting `_flush`, in order
        self._unsent_bytes = 0
        self._unrecorded: list[ServedRequest] = []  # requests recorded in the metrics at `_flush`
        self.connection_id = next(_ids)
        self.peer = "?"
        self._sasl = None if server.sasl is None else SaslServer(server.sasl.enabled_mechanisms,
                                                                 server.mechanisms, server.sasl.max_reauth_ms)
        self._tls_principal: str | None = None  # a client certificate's (SSL listeners)

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = peer[0] if peer else "?"
        try:
            self._tls_principal = certificate_principal(transport.get_extra_info("peercert"),
                                                        self._server.certificate_principal_rules)
            refusal = self._server.admit(self.peer)
        except PrincipalMappingError as exc:  # Kafka fails the authentication
            refusal = f"failed authentication: {exc}"
        if refusal is not None:
            log.info("closing connection from %s on listener %s: %s", self.peer, self._server.listener, refusal)
            self._closed = True
            transport.abort()
            return
        self._server.connections.add(self)
        self._task = asyncio.get_running_loop().create_task(self._serve())

    def data_received(self, data: bytes) -> None:
        if self._closed:
            return
        try:
            frames = self._decoder.feed(data)
        except FrameTooLarge as exc:
            log.warning("closing connection %s from %s: %s", self.connection_id, self.peer, exc)
            self.close()
            return
        if frames:
            self._queue.extend(frames)
            self._arrivals.extend(itertools.repeat(time.perf_counter_ns(), len(frames)))
            self._queued_bytes += sum(len(f) for f in frames)
            self._server.queued += len(frames)
            self._wakeup.set()
            if (len(self._queue) >= _MAX_QUEUED_FRAMES or self._queued_bytes >= self._server.limits.max_request_bytes
                    or self._server.queued >= self._server.limits.queued_max_requests):
                self.pause_reading()

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    def pause_reading(self) -> None:
        if not self._paused and self._transport is not None:
            self._transport.pause_reading()
            self._paused = True
            self._server.paused.add(self)

    def maybe_resume_reading(self) -> None:
        limits = self._server.limits
        if (self._paused and self._transport is not None and not self._closed
                and len(self._queue) < _MAX_QUEUED_FRAMES // 2 and self._queued_bytes < limits.max_request_bytes
                and self._server.queued < limits.queued_max_requests):
            self._transport.resume_reading()
            self._paused = False
            self._server.paused.discard(self)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._task is None:  # refused by `admit`
            return
        self._closed = True
        self._server.release(self)
        self._server.queued -= len(self._queue)
        self._queue.clear()
        self._arrivals.clear()
        self._wakeup.set()
        self._writable.set()
        self._task.cancel()
        self._server.resume_paused()

    def close(self) -> None:
        self._flush()
        self._closed = True
        if self._transport is not None:
            self._transport.close()

    def _send(self, payload: memoryview | bytes) -> None:
        """Responses of requests answered without the task yielding in between go out in one
        socket write when the event loop next runs (`_flush`), in order; past
        `_COALESCE_MAX_BYTES` at once, so backpressure still stops the next request."""
        self._unsent.append(payload)
        self._unsent_bytes += len(payload)
        if self._unsent_bytes > _COALESCE_MAX_BYTES:
            self._flush()
        elif len(self._unsent) == 1:
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        unsent, self._unsent, self._unsent_bytes = self._unsent, [], 0
        served, self._unrecorded = self._unrecorded, []
        write_started_ns = time.perf_counter_ns()
        if unsent and self._transport is not None and not self._closed:
            self._transport.write(unsent[0] if len(unsent) == 1 else b"".join(unsent))
        if served:
            written_ns = time.perf_counter_ns()
            metrics = self._server.request_metrics
            assert metrics is not None
            for request in served:
                request.record(metrics, write_started_ns, written_ns)

    # request loop
    async def _serve(self) -> None:
        try:
            while not self._closed:
                if not self._queue:
                    self._wakeup.clear()
                    await self._wakeup.wait()
                    continue
                if not self._writable.is_set():  # muted until the last response has drained
                    await self._writable.wait()
                    continue
                if self._muted_until:  # throttled (client quotas): muted until the throttle ends
                    delay = self._muted_until - asyncio.get_running_loop().time()
                    self._muted_until = 0.0
                    if delay > 0:
                        await asyncio.sleep(delay)
                    continue
                raw = self._queue.popleft()
                received_ns = self._arrivals.popleft()
                self._queued_bytes -= len(raw)
                self._server.queued -= 1
                self.maybe_resume_reading()
                self._server.resume_paused()
                payload = await self._handle(raw, received_ns)
                if payload is not None and self._transport is not None and not self._closed:
                    self._send(payload)
        except asyncio.CancelledError:
            pass

    async def _handle(self, raw: bytes, received_ns: int) -> memoryview | bytes | None:
        server = self._server
        if self._sasl is not None and self._sasl.raw_tokens and not self._sasl.authenticated:
            return self._authenticate(None, raw)
        try:
            decoded = decode_request(server.registry, raw)
        except MalformedRequest as exc:
            log.warning("closing connection %s from %s: %s", self.connection_id, self.peer, exc)
            self.close()
            return None
        if isinstance(decoded, UnsupportedRequest):
            return self._unsupported(decoded)
        sasl = self._sasl
        if sasl is not None and (not sasl.authenticated or decoded.header.api_key == SASL_HANDSHAKE):
            return self._authenticate(decoded)
        if sasl is not None and sasl.session_expires_ms is not None and sasl.session_expired(server.services.clock.now_ms()):
            log.warning("closing connection %s from %s on listener %s: the SASL session of User:%s expired "
                        "without re-authentication", self.connection_id, self.peer, server.listener, sasl.principal)
            self.close()
            return None
        metrics = server.request_metrics
        if metrics is None:
            return (await self._dispatch(decoded, size=len(raw)))[0]
        clock = RequestClock(received_ns, time.perf_counter_ns())
        payload, response = await self._dispatch(decoded, metrics, size=len(raw), clock=clock)
        clock.ready_ns = time.perf_counter_ns()
        spec = decoded.spec
        served = ServedRequest(spec.name, decoded.header.api_version, len(raw), response,
                         _from_follower(decoded.body) if spec.api_key == FETCH else None, clock)
        if payload is None or self._transport is None or self._closed:  # nothing to write
            served.record(metrics, clock.ready_ns, clock.ready_ns)
        else:
            self._unrecorded.append(served)
        return payload

    def _authenticate(self, req: DecodedRequest | None, token: bytes = b"") -> memoryview | bytes | None:
        """A request before SASL authentication completed (see the module docstring), or
        (`req` None) a bare token after SaslHandshake v0."""
        assert self._sasl is not None
        reauthenticating = self._sasl.reauthentications
        decision = sasl_decision(self._sasl, self._server.services.clock.now_ms(), req, token)
        if decision.action is Action.CLOSE:
            log.warning("closing connection %s from %s on listener %s: illegal SASL state (%s)",
                        self.connection_id, self.peer, self._server.listener, self._sasl.failure)
            self.close()
            return None
        if decision.action is Action.DISPATCH:
            assert req is not None
            # only ApiVersions is dispatched before authentication; it never awaits
            ctx = self._context(req)
            result = req.spec.handler(self._server.services, ctx, req.body)
            assert not inspect.isawaitable(result)
            return encode_response(req.spec, req.header.api_version, req.header.correlation_id, result)
        if decision.error is not ErrorCode.none:
            log.warning("authentication of connection %s from %s on listener %s failed: %s",
                        self.connection_id, self.peer, self._server.listener, decision.message)
        elif self._sasl.authenticated and decision.action is Action.RESPOND:
            log.info("connection %s from %s on listener %s %s as User:%s%s%s", self.connection_id, self.peer,
                     self._server.listener, "re-authenticated" if self._sasl.reauthentications > reauthenticating
                     else "authenticated", self._sasl.principal,
                     " with a delegation token" if self._sasl.token_authenticated else "", session_text(decision))
        if req is None:  # SaslHandshake v0: a bare frame back, none on a refusal
            if decision.error is not ErrorCode.none:
                self.close()
            return len(decision.auth_bytes).to_bytes(4, "big") + decision.auth_bytes if decision.raw_reply else None
        payload = encode_response(req.spec, req.header.api_version, req.header.correlation_id,
                                  sasl_response(req, decision))
        if decision.close_after_response and self._transport is not None:
            self._flush()
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
        self, req: DecodedRequest, metrics: RequestChannelMetrics | None = None, size: int = 0,
        clock: RequestClock | None = None,
    ) -> tuple[memoryview | None, object]:
        """(encoded response or None, the response entity or None); `clock` takes the
        handler's purgatory waits and the throttle delay."""
        spec = req.spec
        version = req.header.api_version
        ctx = self._context(req)
        timer = HandlerTimer()
        token = CURRENT_REQUEST_TIMER.set(timer)
        try:
            result: object = spec.handler(self._server.services, ctx, req.body)
            if inspect.isawaitable(result):
                result = await result
        except asyncio.CancelledError:
            raise
        except NotControllerError as exc:  # the sender's channel goes on to the next controller
            log.debug("%s v%d from %s: %s; closing the connection", spec.name, version, self.peer, exc)
            self.close()
            return None, None
        except Exception:
            log.exception("error handling %s v%d from %s; closing connection", spec.name, version, self.peer)
            if metrics is not None:
                metrics.mark_error(spec.name, int(ErrorCode.unknown_server_error))
            self.close()
            return None, None
        finally:
            CURRENT_REQUEST_TIMER.reset(token)
            if clock is not None:
                clock.remote_ns = timer.waited_ns()
        quotas = self._server.services.quotas
        if quotas is not None:
            result = await self._throttle(quotas, req, result, size, timer.elapsed_ns(), clock)
        if result is None:  # e.g. Produce with acks=0
            return None, None
        return encode_response(spec, version, req.header.correlation_id, result), result

    async def _throttle(self, quotas: QuotaManagers, req: DecodedRequest, result: object, size: int,
                        handler_ns: int, clock: RequestClock | None) -> object:
        """Record the request in the client quotas; mute the channel (or delay the response of
        a client that does not throttle itself) for the throttle time."""
        header = req.header
        result, throttle_ms = quotas.throttle_after(
            header.api_key, self._principal(), header.client_id, size, handler_ns, result,
            self._server.services.clock.monotonic_ms())
        if throttle_ms > 0:
            if result is not None and not client_throttles(header.api_key, header.api_version):
                held_ns = time.perf_counter_ns()
                await asyncio.sleep(throttle_ms / 1000)
                if clock is not None:
                    clock.throttle_ns = time.perf_counter_ns() - held_ns
            else:
                self._muted_until = asyncio.get_running_loop().time() + throttle_ms / 1000
        return result


    def _context(self, req: DecodedRequest) -> RequestContext:
        return RequestContext(
            header=req.header,
            response_type=req.spec.response_type(req.header.api_version),
            client_host=self.peer,
            connection_id=self.connection_id,
            listener=self._server.listener,
            principal=self._principal(),
            token_authenticated=self._sasl is not None and self._sasl.token_authenticated,
        )

    def _principal(self) -> str:
        """SASL's principal on a SASL listener, else the client certificate's, else ANONYMOUS."""
        principal = None if self._sasl is None else self._sasl.principal
        return principal or self._tls_principal or ANONYMOUS


def _from_follower(body: object) -> bool:
    """A Fetch from a replica (`replica_id` >= 0; v15+ carries it in `replica_state`)."""
    state = getattr(body, "replica_state", None)
    replica_id = state.replica_id if state is not None else getattr(body, "replica_id", -1)
    return int(replica_id) >= 0


class KafkaServer:
    def __init__(self, registry: ApiRegistry, services: BrokerServices, max_request_bytes: int = 100 * 1024 * 1024,
                 request_metrics: RequestChannelMetrics | None = None, *,
                 listener: str = "PLAINTEXT", sasl: SaslServerSettings | None = None,
                 limits: ListenerLimits | None = None,
                 certificate_principal_rules: tuple[Rule, ...] | None = None) -> None:
        self.registry = registry
        self.services = services
        self.limits = limits or ListenerLimits(max_request_bytes=max_request_bytes)
        self.request_metrics = request_metrics
        self.listener = listener
        self.sasl = sasl
        self.token_validator: TokenValidator | None = None  # OAUTHBEARER's, set before the listener opens
        self.mechanisms = sasl_mechanisms(sasl, lambda: services.metadata.image, lambda: self.token_validator,
                                          lambda: services.config.get("delegation.token.secret.key") or None)
        # a TLS listener's ssl.principal.mapping.rules (None: no TLS, no certificate principal)
        self.certificate_principal_rules = certificate_principal_rules
        self.connections: set[KafkaConnection] = set()
        self.per_ip: dict[str, int] = {}
        self.queued = 0  # requests read and not yet handled, over every connection
        self.paused: set[KafkaConnection] = set()
        self._server: asyncio.Server | None = None

    @property
    def max_request_bytes(self) -> int:
        return self.limits.max_request_bytes

    def admit(self, host: str) -> str | None:
        """Count a new connection from `host`; why it is refused (None: admitted)."""
        if len(self.connections) >= self.limits.max_connections:
            return f"max.connections={self.limits.max_connections} reached"
        count = self.per_ip.get(host, 0)
        limit = self.limits.per_ip(host)
        if count >= limit:
            return f"max.connections.per.ip={limit} reached for {host}"
        quotas = self.services.quotas
        if quotas is not None and not quotas.connection_rate.admit(host, self.services.clock.monotonic_ms()):
            return f"connection_creation_rate quota of {host} exceeded"
        self.per_ip[host] = count + 1
        return None

    def release(self, conn: KafkaConnection) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
            left = self.per_ip.get(conn.peer, 1) - 1
            if left > 0:
                self.per_ip[conn.peer] = left
            else:
                self.per_ip.pop(conn.peer, None)
        self.paused.discard(conn)

    def resume_paused(self) -> None:
        """Resume reading on connections paused by the listener-wide queue limit."""
        if self.paused and self.queued < self.limits.queued_max_requests:
            for conn in list(self.paused):
                conn.maybe_resume_reading()

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
