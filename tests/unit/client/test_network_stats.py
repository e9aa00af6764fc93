"""Kafka's client network metrics: the sampled-stat window arithmetic, and what a
`BrokerConnection` records against the real listener and a broker refusing SASL."""

import asyncio
import math
import time
import types

import pytest

from kmirror.broker.api import build_registry
from kmirror.client.connection import BrokerConnection
from kmirror.client.errors import KafkaAuthenticationError
from kmirror.client.network_stats import SAMPLES, WINDOW_MS, NetworkStats, SampledStat
from kmirror.runtime.server import KafkaServer
from kmirror.security.client_config import ClientSecurity, SaslClientSettings
from kmirror.testing.fake_broker import api_versions_v0_answer, read_frame, write_frame


def test_a_rate_counts_at_least_one_full_window_and_forgets_samples_past_the_last_two() -> None:
    stat = SampledStat()
    for t in (0, 1_000, 2_000):
        stat.record(100, t)
    # 10 s into the first sample: 3 values over 10 s + one window (Kafka's Rate.windowSize)
    assert stat.rate(10_000) == pytest.approx(3 / 40)
    assert stat.rate(10_000, of_sum=True) == pytest.approx(300 / 40)
    stat.record(400, 45_000)  # a second sample
    assert stat.rate(50_000) == pytest.approx(4 / 50)
    assert (stat.avg(50_000), stat.max(50_000)) == (175, 400)
    # the first sample is obsolete SAMPLES windows after it began
    at = SAMPLES * WINDOW_MS
    assert stat.rate(at) == pytest.approx(1 / ((at - 45_000 + WINDOW_MS) / 1000))
    assert (stat.avg(at), stat.max(at)) == (400, 400)
    later = 45_000 + SAMPLES * WINDOW_MS
    assert stat.rate(later) == 0
    assert math.isnan(stat.avg(later)) and math.isnan(stat.max(later))
    assert (stat.count, stat.sum) == (4, 700)  # the totals never forget


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
            values = stats.values(time.monotonic() * 1000)
            assert values["request-total"] == values["response-total"] == 9
            assert values["network-io-total"] == 18
            # each request: size prefix, header and body; the 8 differ only in their client name
            assert values["outgoing-byte-total"] > 8 * values["request-size-max"] / 2
            assert values["request-size-max"] >= values["request-size-avg"] > 10
            assert values["incoming-byte-total"] > 9 * 10  # nine ApiVersions answers, each listing APIs
            assert values["request-rate"] == pytest.approx(9 / 30, rel=0.05)  # all in the first window
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
