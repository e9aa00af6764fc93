"""The asyncio connection against the real listener (which serves ApiVersions in every build)."""

import asyncio
import types

import pytest

from kmirror.broker.api import build_registry
from kmirror.client.connection import BrokerConnection, parse_bootstrap
from kmirror.client.errors import KafkaConnectionError, KafkaProtocolError
from kmirror.runtime.server import KafkaServer


async def _server() -> tuple[KafkaServer, int]:
    registry = build_registry()
    server = KafkaServer(registry, types.SimpleNamespace(registry=registry, metadata=None))
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
