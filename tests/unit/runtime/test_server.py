"""The listener on loopback with raw sockets: framing errors close one connection only."""

import asyncio
import io
import struct

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from kmirror.broker.api import build_registry, load_handlers
from kmirror.broker.services import BrokerServices
from kmirror.ports import ManualClock
from kmirror.runtime.server import KafkaServer


def _api_versions(version: int, correlation_id: int) -> bytes:
    buf = io.BytesIO()
    entity_writer(RequestHeader)(
        buf,
        RequestHeader(
            request_api_key=i16(18), request_api_version=i16(version), correlation_id=i32(correlation_id), client_id="t"
        ),
    )
    entity_writer(ApiVersionsRequest)(
        buf, ApiVersionsRequest(client_software_name="t", client_software_version="1")
    )
    payload = buf.getvalue()
    return struct.pack(">i", len(payload)) + payload


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


@pytest.fixture
def server_port():
    async def start():
        defs = [d for d in load_handlers() if d.api_key == 18]
        registry = build_registry(defs)
        services = BrokerServices(node_id=1, config=None, registry=registry, clock=ManualClock(), metadata=None)
        server = KafkaServer(registry, services, max_request_bytes=1024 * 1024)
        port = await server.start("127.0.0.1", 0)
        return server, port

    return start


async def _roundtrip_ok(port: int) -> bool:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_api_versions(3, 11))
    frame = await _read_frame(reader)
    writer.close()
    (cid,) = struct.unpack_from(">i", frame)
    resp, _ = entity_reader(ApiVersionsResponse)(frame, 4)
    return cid == 11 and resp.error_code == 0 and any(k.api_key == 18 for k in resp.api_keys)


def test_api_versions_and_unsupported_version(server_port):
    async def main():
        server, port = await server_port()
        assert await _roundtrip_ok(port)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_api_versions(3, 1)[:4] + b"")  # nothing harmful: incomplete frame
        writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        frame = bytearray(_api_versions(3, 7))
        frame[7] = 99  # version 99
        writer.write(bytes(frame))
        out = await _read_frame(reader)
        cid, error_code, n = struct.unpack_from(">ihi", out)
        assert (cid, error_code) == (7, 35) and n >= 1
        writer.close()
        await server.stop()

    asyncio.run(main())


@pytest.mark.parametrize(
    "garbage",
    [
        struct.pack(">i", 2**31 - 1) + b"x" * 16,  # huge size prefix
        struct.pack(">i", -5),
        struct.pack(">i", 10) + struct.pack(">hhi", 4242, 0, 1) + b"zz",  # unknown API key
        struct.pack(">i", 3) + b"abc",  # shorter than a header
        struct.pack(">i", 30) + bytes(range(30)),  # random bytes, ApiVersions-shaped junk
    ],
)
def test_bad_input_closes_only_that_connection(server_port, garbage):
    async def main():
        server, port = await server_port()
        good_reader, good_writer = await asyncio.open_connection("127.0.0.1", port)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(garbage)
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the server
        good_writer.write(_api_versions(3, 2))
        assert struct.unpack_from(">i", await _read_frame(good_reader))[0] == 2
        assert await _roundtrip_ok(port)
        good_writer.close()
        await server.stop()

    asyncio.run(main())


def _started(limits):
    async def start():
        from kmirror.runtime.server import ListenerLimits

        defs = [d for d in load_handlers() if d.api_key == 18]
        registry = build_registry(defs)
        services = BrokerServices(node_id=1, config=None, registry=registry, clock=ManualClock(), metadata=None)
        server = KafkaServer(registry, services, limits=ListenerLimits(**limits))
        return server, await server.start("127.0.0.1", 0)

    return start()


def test_a_connection_whose_send_buffer_is_full_is_not_served_further():
    """Kafka's channel muting: requests after one whose response cannot be sent wait."""

    async def main():
        server, port = await _started({})
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_api_versions(3, 1))
        await _read_frame(reader)
        (conn,) = server.connections
        conn.pause_writing()  # what the transport calls over its high-water mark
        writer.write(_api_versions(3, 2) + _api_versions(3, 3))
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(_read_frame(reader), 0.3)
        conn.resume_writing()
        for cid in (2, 3):
            assert struct.unpack_from(">i", await _read_frame(reader))[0] == cid
        writer.close()
        await server.stop()

    asyncio.run(main())


def test_max_connections_and_per_ip_limits():
    async def main():
        server, port = await _started({"max_connections": 3, "max_connections_per_ip_overrides": {"127.0.0.1": 2}})
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await reader.read(1) == b""  # the third from 127.0.0.1 is closed at once
        assert len(server.connections) == 2
        held[0][1].close()
        await held[0][1].wait_closed()
        for _ in range(50):
            if len(server.connections) == 1:
                break
            await asyncio.sleep(0.01)
        assert await _roundtrip_ok(port)  # a slot came free
        held[1][1].close()
        await server.stop()

    asyncio.run(main())


def test_queued_max_requests_pauses_reading_until_the_queue_drains():
    async def main():
        server, port = await _started({"queued_max_requests": 2})
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(_api_versions(3, cid) for cid in range(1, 11)))
        got = [struct.unpack_from(">i", await _read_frame(reader))[0] for _ in range(10)]
        assert got == list(range(1, 11)) and server.queued == 0 and not server.paused
        writer.close()
        await server.stop()

    asyncio.run(main())


class _RecordingTransport(asyncio.Transport):
    """The transport side of a connection, recording each socket write."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 40000) if name == "peername" else default

    def write(self, data) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def _frames(data: bytes) -> list[int]:
    """Correlation ids of the size-prefixed response frames in `data`."""
    ids, pos = [], 0
    while pos < len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        ids.append(struct.unpack_from(">i", data, pos + 4)[0])
        pos += 4 + size
    return ids


def test_responses_to_pipelined_requests_leave_in_one_write_in_order():
    from kmirror.runtime.server import KafkaConnection

    async def main():
        server, _ = await _started({})
        conn = KafkaConnection(server)
        transport = _RecordingTransport()
        conn.connection_made(transport)
        conn.data_received(b"".join(_api_versions(3, cid) for cid in (1, 2, 3)))
        while sum(len(_frames(w)) for w in transport.writes) < 3:
            await asyncio.sleep(0.01)
        assert [_frames(w) for w in transport.writes] == [[1, 2, 3]]
        conn.data_received(_api_versions(3, 4))  # a lone request: its own write, at once
        while len(transport.writes) < 2:
            await asyncio.sleep(0.01)
        assert _frames(transport.writes[1]) == [4]
        conn.connection_lost(None)
        await server.stop()

    asyncio.run(main())
