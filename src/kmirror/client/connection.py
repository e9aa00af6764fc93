"""An asyncio connection to one Kafka broker (the I/O shell around `ClientProtocol`).

`BrokerConnection.connect()` opens the socket and negotiates versions with ApiVersions
(v3, retried with the broker's highest if it answers UNSUPPORTED_VERSION, or with v0 when
that answer names no range, as Kafka's NetworkClient does). `send()` pipelines: several
requests may be in flight, responses are matched by correlation id. A request that times out closes the connection, because the
responses still due on it can no longer be matched reliably (Kafka's NetworkClient does
the same on `request.timeout.ms`).

With a `ClientSecurity` the socket speaks TLS (SSL, SASL_SSL) and, after ApiVersions, the
connection authenticates with SaslHandshake v1 + SaslAuthenticate (SASL_PLAINTEXT,
SASL_SSL) before it is usable; a refusal raises `KafkaAuthenticationError` and closes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import secrets
import ssl
import time
from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.client.errors import (
    KafkaAuthenticationError,
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
)
from kmirror.client.kerberos import KerberosUnavailable, initiator
from kmirror.client.network_stats import NetworkStats
from kmirror.client.oauth import OAuthTokenError, access_token
from kmirror.client.protocol import (
    API_VERSIONS_KEY,
    CLIENT_MAX_VERSIONS,
    ClientProtocol,
    Response,
    choose_version,
    kio_versions,
    request_schema,
)
from kmirror.client.tls import TlsSetupError, tls_context
from kmirror.protocol.entities import build
from kmirror.security.client_config import (
    PLAINTEXT,
    ClientSecurity,
    KerberosClientSettings,
    OAuthClientSettings,
)
from kmirror.security.gssapi import GssapiClient, GssFailure
from kmirror.security.oauthbearer import SEPARATOR, client_initial_response
from kmirror.security.plain import plain_client_token
from kmirror.security.scram import ScramMechanism
from kmirror.security.scram_client import ScramClient, ScramClientError

# Each request sent and each answer, at DEBUG (as Kafka's NetworkClient logs them)
request_log = logging.getLogger("kmirror.client.network")

CLIENT_SOFTWARE_NAME = "kmirror"
CLIENT_SOFTWARE_VERSION = "0.1.0"
SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class BrokerConnection:
    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str = "kmirror",
        request_timeout_ms: int = 30_000,
        connect_timeout_ms: int = 10_000,
        security: ClientSecurity = PLAINTEXT,
        stats: NetworkStats | None = None,
    ) -> None:
        """`stats`: where this connection records what it does (Kafka's client network
        metrics), shared by the connections of one fetcher."""
        self.host = host
        self.stats = stats
        self.port = port
        self.security = security
        self.request_timeout_ms = request_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self.api_versions: dict[int, tuple[int, int]] = {}
        self._protocol = ClientProtocol(client_id)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, asyncio.Future[Response]] = {}
        self._read_task: asyncio.Task[None] | None = None
        self._closed_error: Exception | None = None
        self._reauth_at: float | None = None  # loop time to re-authenticate by (KIP-368 session lifetime)
        self._reauth_task: asyncio.Future[None] | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def connected(self) -> bool:
        return self._writer is not None and self._closed_error is None

    async def connect(self) -> None:
        tls: ssl.SSLContext | None = None
        if self.security.tls is not None:
            try:
                tls = tls_context(self.security.tls)
            except TlsSetupError as exc:
                raise KafkaConnectionError(f"cannot connect to {self.address}: {exc}") from None
        stats = self.stats
        try:
            async with asyncio.timeout(self.connect_timeout_ms / 1000):
                self._reader, self._writer = await asyncio.open_connection(
                    self.host, self.port, ssl=tls, server_hostname=self.host if tls else None)
        except TimeoutError:
            raise KafkaConnectionError(f"connection to {self.address} timed out") from None
        except OSError as exc:
            if stats is not None and isinstance(exc, ssl.SSLError):  # the TLS handshake refused
                stats.authentication_failed(_now_ms())
            reason = exc.strerror or str(exc) or type(exc).__name__
            raise KafkaConnectionError(f"cannot connect to {self.address}: {reason}") from None
        if stats is not None:
            stats.connection_created(_now_ms())
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())
        await self._negotiate()
        if self.security.sasl is not None:
            try:
                await self._authenticate()
            except KafkaAuthenticationError:
                if stats is not None:
                    stats.authentication_failed(_now_ms())
                raise
        if stats is not None:
            stats.authenticated(_now_ms())

    async def _authenticate(self) -> None:
        """SaslHandshake v1, then SaslAuthenticate rounds: one PLAIN token, SCRAM's two
        messages with the server's signature checked at the end, or GSSAPI's exchange."""
        sasl = self.security.sasl
        assert sasl is not None
        context = f"SASL/{sasl.mechanism} authentication to {self.address}"
        try:
            handshake = await self._send(self.build_request(SASL_HANDSHAKE_KEY, mechanism=sasl.mechanism))
            if handshake.error_code:
                raise KafkaAuthenticationError(
                    handshake.error_code, f"broker mechanisms: {', '.join(handshake.mechanisms)}",
                    context=f"SaslHandshake {sasl.mechanism} to {self.address}")
            scram = ScramMechanism.from_mechanism_name(sasl.mechanism)
            if sasl.kerberos is not None:
                await self._gssapi(sasl.kerberos, context)
            elif sasl.oauth is not None:
                await self._oauthbearer(sasl.oauth, context)
            elif scram is None:
                await self._sasl_round(plain_client_token(sasl.username, sasl.password), context)
            else:
                client = ScramClient(scram, sasl.username, sasl.password, secrets.token_urlsafe(24), sasl.token_auth)
                server_first = await self._sasl_round(client.first_message(), context)
                try:
                    server_final = await self._sasl_round(client.final_message(server_first), context)
                    client.verify_server_final(server_final)
                except ScramClientError as exc:
                    raise KafkaAuthenticationError(ErrorCode.sasl_authentication_failed, str(exc),
                                                   context=context) from None
        except KafkaProtocolError:
            await self.close()
            raise KafkaAuthenticationError(ErrorCode.illegal_sasl_state,
                                           f"{self.address} does not support SASL authentication") from None
        except KafkaConnectionError as exc:
            raise KafkaConnectionError(f"SASL authentication to {self.address}: {exc}") from None
        except KafkaAuthenticationError:
            await self.close()
            raise

    async def _gssapi(self, settings: KerberosClientSettings, context: str) -> None:
        """GSSAPI's rounds; the library's calls run on a thread (they may ask the KDC for tickets)."""
        try:
            client = GssapiClient(await asyncio.to_thread(initiator, settings, self.host))
            challenge = await self._sasl_round(await asyncio.to_thread(client.respond, None), context)
            while not client.complete:
                challenge = await self._sasl_round(await asyncio.to_thread(client.respond, challenge), context)
        except (GssFailure, KerberosUnavailable) as exc:
            raise KafkaAuthenticationError(ErrorCode.sasl_authentication_failed, str(exc), context=context) from None

    async def _oauthbearer(self, settings: OAuthClientSettings, context: str) -> None:
        """One message with the token; an error answer is acknowledged with ^A, and the broker
        then fails the exchange with its reason."""
        try:
            token = await asyncio.to_thread(access_token, settings)
        except OAuthTokenError as exc:
            raise KafkaAuthenticationError(ErrorCode.sasl_authentication_failed, str(exc), context=context) from None
        error = await self._sasl_round(client_initial_response(token), context)
        if error:
            await self._sasl_round(SEPARATOR.encode(), context)
            raise KafkaAuthenticationError(ErrorCode.sasl_authentication_failed, error.decode(errors="replace"),
                                           context=context)

    async def _sasl_round(self, token: bytes, context: str) -> bytes:
        response = await self._send(self.build_request(SASL_AUTHENTICATE_KEY, auth_bytes=token))
        if response.error_code:
            raise KafkaAuthenticationError(response.error_code, response.error_message, context=context)
        lifetime = getattr(response, "session_lifetime", None)
        if lifetime:  # the broker ends the session then: re-authenticate at 85-95% of it, as Kafka's clients
            self._reauth_at = asyncio.get_running_loop().time() + lifetime.total_seconds() * random.uniform(0.85, 0.95)
        return bytes(response.auth_bytes)

    async def _reauthenticate(self) -> None:
        """KIP-368: once the requests in flight are answered, the SASL exchange again on this
        connection; requests sent meanwhile wait for it."""
        if self._reauth_task is None:
            self._reauth_task = asyncio.ensure_future(self._reauthenticate_now())
        await asyncio.shield(self._reauth_task)

    async def _reauthenticate_now(self) -> None:
        try:
            self._reauth_at = None
            if self._pending:
                await asyncio.wait(list(self._pending.values()), timeout=self.request_timeout_ms / 1000)
            started = _now_ms()
            try:
                await self._authenticate()
            except KafkaAuthenticationError:
                if self.stats is not None:
                    self.stats.reauthentication_failed(_now_ms())
                raise
            if self.stats is not None:
                now = _now_ms()
                self.stats.reauthenticated(now - started, now)
        finally:
            self._reauth_task = None

    async def _negotiate(self) -> None:
        version = min(CLIENT_MAX_VERSIONS[API_VERSIONS_KEY], max(kio_versions(API_VERSIONS_KEY)))
        for _ in range(2):
            request = build(
                request_schema(API_VERSIONS_KEY, version),
                client_software_name=CLIENT_SOFTWARE_NAME,
                client_software_version=CLIENT_SOFTWARE_VERSION,
            )
            response = await self.send(request)
            ranges = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}
            if response.error_code == ErrorCode.unsupported_version:
                # No ApiVersions range in the answer: retry with v0, as Kafka's NetworkClient.
                retry = choose_version(API_VERSIONS_KEY, ranges) if API_VERSIONS_KEY in ranges else 0
                if retry is None or retry == version:
                    break
                version = retry
                continue
            if response.error_code:
                raise KafkaError(response.error_code, context=f"ApiVersions from {self.address}")
            self.api_versions = ranges
            return
        await self.close()
        raise KafkaProtocolError(f"{self.address}: no ApiVersions version in common")

    def version(self, api_key: int) -> int:
        """The negotiated version for `api_key`; KafkaProtocolError if the broker lacks it."""
        v = choose_version(api_key, self.api_versions)
        if v is None:
            raise KafkaProtocolError(f"{self.address} does not support API key {api_key} in a version this client speaks")
        return v

    def request_type(self, api_key: int) -> type[Any]:
        """The request entity of the negotiated version (kio's, or KIP-1279's for keys 94-105)."""
        return request_schema(api_key, self.version(api_key))

    def build_request(self, api_key: int, **fields: Any) -> Any:
        """A request of the negotiated version; fields that version lacks are dropped."""
        return build(self.request_type(api_key), **fields)

    async def send(self, request: Any, *, expect_response: bool = True, timeout_ms: int | None = None) -> Any:
        """Send a request entity (kio's or a KIP-1279 one) and return the decoded response body (None if not expected)."""
        if self._reauth_task is not None or (
                self._reauth_at is not None and asyncio.get_running_loop().time() >= self._reauth_at):
            await self._reauthenticate()
        return await self._send(request, expect_response=expect_response, timeout_ms=timeout_ms)

    async def _send(self, request: Any, *, expect_response: bool = True, timeout_ms: int | None = None) -> Any:
        if self._writer is None or self._closed_error is not None:
            raise KafkaConnectionError(f"connection to {self.address} is closed")
        correlation_id, data = self._protocol.send(request, expect_response)
        if request_log.isEnabledFor(logging.DEBUG):
            request_log.debug("sending %s (correlation id %d, %d bytes) to %s", type(request).__name__,
                              correlation_id, len(data), self.address)
        future: asyncio.Future[Response] | None = None
        if expect_response:
            future = asyncio.get_running_loop().create_future()
            self._pending[correlation_id] = future
        if self.stats is not None:
            self.stats.request_sent(len(data), _now_ms())
        try:
            self._writer.write(data)
            await self._writer.drain()
        except OSError as exc:
            self._fail(KafkaConnectionError(f"connection to {self.address} lost: {exc}"))
        if future is None:
            return None
        timeout = (timeout_ms if timeout_ms is not None else self.request_timeout_ms) / 1000
        try:
            async with asyncio.timeout(timeout):
                response = await asyncio.shield(future)
        except TimeoutError:
            name = type(request).__name__
            self._fail(KafkaTimeoutError(f"{name} to {self.address} timed out after {int(timeout * 1000)} ms"))
            response = await future  # raises the timeout error set by _fail
        return response.body

    async def _read_loop(self) -> None:
        assert self._reader is not None
        try:
            while True:
                data = await self._reader.read(1 << 20)
                if not data:
                    self._fail(KafkaConnectionError(f"connection to {self.address} closed by the broker"))
                    return
                stats = self.stats
                if stats is not None:
                    stats.bytes_received(len(data), _now_ms())
                for response in self._protocol.receive(data):
                    if stats is not None:
                        stats.response_received(_now_ms())
                    if request_log.isEnabledFor(logging.DEBUG):
                        request_log.debug("received the answer to correlation id %d from %s",
                                          response.correlation_id, self.address)
                    future = self._pending.pop(response.correlation_id, None)
                    if future is not None and not future.done():
                        future.set_result(response)
        except KafkaProtocolError as exc:
            self._fail(KafkaProtocolError(f"{self.address}: {exc}"))
        except OSError as exc:
            self._fail(KafkaConnectionError(f"connection to {self.address} lost: {exc}"))
        except asyncio.CancelledError:
            pass

    def _fail(self, error: Exception) -> None:
        if self._closed_error is None:
            self._closed_error = error
            if self.stats is not None and self._writer is not None:
                self.stats.connection_closed(_now_ms())
        self._protocol.fail_all()
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(error)
        if self._writer is not None:
            self._writer.close()
        if self._read_task is not None and self._read_task is not asyncio.current_task():
            self._read_task.cancel()

    async def close(self) -> None:
        self._fail(KafkaConnectionError(f"connection to {self.address} is closed"))
        if self._writer is not None:
            with contextlib.suppress(Exception):
                await self._writer.wait_closed()
        if self._read_task is not None:
            with contextlib.suppress(BaseException):
                await self._read_task

    async def __aenter__(self) -> BrokerConnection:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def connect(host: str, port: int, **kwargs: Any) -> BrokerConnection:
    conn = BrokerConnection(host, port, **kwargs)
    await conn.connect()
    return conn


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    """`host:port[,host:port...]` -> addresses; KafkaConnectionError on a malformed entry."""
    out: list[tuple[str, int]] = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise KafkaConnectionError(f"invalid bootstrap server {item!r} (expected HOST:PORT)")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise KafkaConnectionError("no bootstrap server given")
    return out
