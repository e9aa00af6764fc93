"""Kafka's client network metrics: what each metric reads, and what a `BrokerConnection`
records against the real listener and a broker refusing SASL."""

import asyncio
import time
import types

import pytest

from kmirror.broker.api import build_registry
from kmirror.client.connection import BrokerConnection
from kmirror.client.errors import KafkaAuthenticationError
from kmirror.client.network_stats import NetworkStats
from kmirror.client.sampled_rate import METRICS_WINDOW
from kmirror.runtime.server import KafkaServer
from kmirror.security.client_config import ClientSecurity, SaslClientSettings
from kmirror.testing.fake_broker import api_versions_v0_answer, read_frame, write_frame


def test_each_kafka_metric_reads_its_own_events_and_a_window_without_values_has_no_average() -> None:
    stats = NetworkStats()
    assert stats.values(0)["request-size-avg"] is None and stats.values(0)["reauthentication-latency-max"] is None
    stats.connection_created(1_000)
    for size in (100, 300):
        stats.request_sent(size, 2_000)
    stats.response_received(3_000)
    stats.reauthenticated(40, 4_000)
    values = stats.values(10_000)
    assert (values["request-total"], values["outgoing-byte-total"], values["network-io-total"]) == (2, 400, 3)
    assert (values["request-size-avg"], values["request-size-max"]) == (200, 300)
    # Kafka's Rate: 10 s into the first sample, counted as one full window more (40 s)
    assert values["request-rate"] == pytest.approx(2 / 40)
    assert values["reauthentication-latency-max"] == 40 and values["successful-reauthentication-total"] == 1
    assert values["connection-count"] == 1 and values["connection-close-total"] == 0
    later = stats.values(1_000 + METRICS_WINDOW.samples * METRICS_WINDOW.window_ms)  # both samples obsolete; the totals stay
    assert later["request-rate"] == 0 and later["request-size-avg"] is None and later["request-total"] == 2


def test_a_connection_records_its_life_requests_and_responses_against_the_real_listener() -> None:
    stats = NetworkStats()

    async def scenario() -> None:
        registry = build_registry()
        server = KafkaServer(registry, types.SimpleNamespace(registry=registry, metadata=None, quotas=None))
        port = await server.start("127.0.0.1", 0)
        try:
            async with BrokerConnection("127.0.0.1", port, stats=stats) as conn:
                requests = [conn.build_request(18, client_software_name=f"c{i}", client_software_version="1")
                            for i in range(8)]
                await asyncio.gather(*(conn.send(r) for r in requests))
                values = stats.values(0)
                assert values["connection-count"] == 1
                assert values["connection-creation-total"] == 1
                assert values["successful-authentication-total"] == 1
                assert values["successful-authentication-no-reauth-total"] == 1
            # ApiVersions of the handshake and the 8 sent: each one a request and a response
            values = stats.values(time.monotonic_ns() // 1_000_000)
            assert values["request-total"] == values["response-total"] == 9
            assert values["network-io-total"] == 18
            # each request: size prefix, header and body; the 8 differ only in their client name
            assert values["outgoing-byte-total"] > 8 * values["request-size-max"] / 2
            assert values["request-size-max"] >= values["request-size-avg"] > 10
            assert values["incoming-byte-total"] > 9 * 10  # nine ApiVersions answers, each listing APIs
            assert 0 < values["request-rate"] <= 9 / 30  # nine in a window counted as 30 s at least
            assert (values["connection-count"], values["connection-close-total"]) == (0, 1)
            assert values["failed-authentication-total"] == 0
        finally:
            await server.stop()

    asyncio.run(scenario())


UNSUPPORTED_SASL_MECHANISM = 33


def test_a_refused_sasl_handshake_is_a_failed_authentication_and_closes_the_connection() -> None:
    async def refusing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while (request := await read_frame(reader)) is not None:
            api_key, correlation_id = int.from_bytes(request[:2], "big"), request[4:8]
            if api_key == 18:
                write_frame(writer, api_versions_v0_answer(correlation_id, {18: (0, 2), 17: (0, 1), 36: (0, 2)}))
            else:  # SaslHandshake v1: UNSUPPORTED_SASL_MECHANISM, no mechanism offered
                write_frame(writer, correlation_id + UNSUPPORTED_SASL_MECHANISM.to_bytes(2, "big") + bytes(4))
            await writer.drain()

    stats = NetworkStats()

    async def scenario() -> None:
        server = await asyncio.start_server(refusing, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        security = ClientSecurity("SASL_PLAINTEXT", sasl=SaslClientSettings("PLAIN", "mirror", "secret"))
        try:
            with pytest.raises(KafkaAuthenticationError):
                await BrokerConnection("127.0.0.1", port, security=security, stats=stats).connect()
        finally:
            server.close()

    asyncio.run(scenario())
    values = stats.values(0)
    assert values["failed-authentication-total"] == 1
    assert values["successful-authentication-total"] == 0
    assert (values["connection-creation-total"], values["connection-close-total"], values["connection-count"]) == (1, 1, 0)
