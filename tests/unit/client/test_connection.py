"""The asyncio connection against the real listener (which serves ApiVersions in every build)."""

import asyncio
import types

import pytest

from kmirror.broker.api import build_registry
from kmirror.client.connection import BrokerConnection, parse_bootstrap
from kmirror.client.errors import KafkaConnectionError, KafkaProtocolError
from kmirror.runtime.server import KafkaServer
from kmirror.testing.fake_broker import api_versions_v0_answer, read_frame, write_frame


async def _server() -> tuple[KafkaServer, int]:
    registry = build_registry()
    server = KafkaServer(registry, types.SimpleNamespace(registry=registry, metadata=None, quotas=None))
    return server, await server.start("127.0.0.1", 0)


def test_negotiates_versions_and_pipelines_requests() -> None:
    async def scenario() -> None:
        server, port = await _server()
        try:
            async with BrokerConnection("127.0.0.1", port) as conn:
                assert 18 in conn.api_versions
                requests = [
                    conn.build_request(18, client_software_name=f"c{i}", client_software_version="1")
                    for i in range(8)
                ]
                responses = await asyncio.gather(*(conn.send(r) for r in requests))
                assert all(r.error_code == 0 for r in responses)
                with pytest.raises(KafkaProtocolError, match="API key 9999"):
                    conn.version(9999)
        finally:
            await server.stop()

    asyncio.run(scenario())


def test_refused_connection_is_a_connection_error() -> None:
    async def scenario() -> None:
        with pytest.raises(KafkaConnectionError, match="cannot connect to 127.0.0.1:1"):
            await BrokerConnection("127.0.0.1", 1).connect()

    asyncio.run(scenario())


def test_send_on_closed_connection_fails_cleanly() -> None:
    async def scenario() -> None:
        server, port = await _server()
        try:
            conn = BrokerConnection("127.0.0.1", port)
            await conn.connect()
            await conn.close()
            with pytest.raises(KafkaConnectionError, match="closed"):
                await conn.send(conn.build_request(18, client_software_name="a", client_software_version="1"))
        finally:
            await server.stop()

    asyncio.run(scenario())


def test_silent_broker_times_out() -> None:
    async def scenario() -> None:
        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read()  # never answers

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            with pytest.raises(KafkaConnectionError, match="timed out"):
                await BrokerConnection("127.0.0.1", port, request_timeout_ms=50).connect()
        finally:
            server.close()

    asyncio.run(scenario())


def test_parse_bootstrap() -> None:
    assert parse_bootstrap("a:1, b:2") == [("a", 1), ("b", 2)]
    assert parse_bootstrap("[::1]:9092") == [("::1", 9092)]
    for bad in ("a", "a:x", ""):
        with pytest.raises(KafkaConnectionError):
            parse_bootstrap(bad)


# What librdkafka's mock cluster answers to ApiVersions v3 (see test_protocol.py).
MOCK_CLUSTER_API_VERSIONS_V3_ANSWER = bytes.fromhex("00000011" "00000000" "0023" "01" "0012" "0000" "0002" "00000000")


def test_api_versions_answer_without_ranges_is_retried_with_v0() -> None:
    """A broker that knows ApiVersions up to v2 and answers v3 with UNSUPPORTED_VERSION and
    a body naming no range (librdkafka's mock cluster): Kafka's client retries with v0."""
    versions_asked: list[int] = []

    async def old_broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while (request := await read_frame(reader)) is not None:
            version = int.from_bytes(request[2:4], "big")
            versions_asked.append(version)
            correlation_id = request[4:8]
            if version > 2:
                writer.write(MOCK_CLUSTER_API_VERSIONS_V3_ANSWER[:4] + correlation_id
                             + MOCK_CLUSTER_API_VERSIONS_V3_ANSWER[8:])
            else:
                write_frame(writer, api_versions_v0_answer(correlation_id, {18: (0, 2), 3: (0, 13)}))
            await writer.drain()

    async def scenario() -> None:
        server = await asyncio.start_server(old_broker, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            async with BrokerConnection("127.0.0.1", port) as conn:
                assert conn.api_versions == {18: (0, 2), 3: (0, 13)}
                assert conn.version(3) == 12
        finally:
            server.close()

    asyncio.run(scenario())
    assert versions_asked == [3, 0]
