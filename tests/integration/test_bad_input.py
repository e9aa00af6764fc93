"""Bad input against a real node: each gets Kafka's error or a disconnect of that connection
only, and the node keeps serving real clients."""

from __future__ import annotations

import io
import socket
import struct

import pytest
from confluent_kafka import Producer
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v9.response import ProduceResponse
from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from kmirror.records.builder import build_batch, build_batch_from_records
from kmirror.records.compression import CompressionType
from kmirror.records.record import encode_record
from kmirror.testing.kafka_clients import consume_partition, create_topic
from kmirror.testing.mirror_clusters import wait_until

pytestmark = pytest.mark.integration


def _request(correlation_id: int, batch: bytes, topic: str = "bad") -> bytes:
    buf = io.BytesIO()
    entity_writer(RequestHeader)(
        buf, RequestHeader(request_api_key=i16(0), request_api_version=i16(9), correlation_id=i32(correlation_id), client_id="t")
    )
    import datetime

    entity_writer(ProduceRequest)(
        buf,
        ProduceRequest(
            transactional_id=None,
            acks=i16(1),
            timeout=datetime.timedelta(seconds=10),
            topic_data=(TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=i32(0), records=batch),)),),
        ),
    )
    payload = buf.getvalue()
    return struct.pack(">i", len(payload)) + payload


def _send(port: int, data: bytes, timeout: float = 10) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        chunks = []
        try:
            head = sock.recv(4)
            if len(head) < 4:
                return b""
            (size,) = struct.unpack(">i", head)
            while sum(map(len, chunks)) < size:
                chunk = sock.recv(size - sum(map(len, chunks)))
                if not chunk:
                    break
                chunks.append(chunk)
        except (TimeoutError, ConnectionResetError):
            return b""
        return b"".join(chunks)


def _produce_error(port: int, batch: bytes) -> int:
    frame = _send(port, _request(42, batch))
    (cid,) = struct.unpack_from(">i", frame)
    assert cid == 42
    resp, _ = entity_reader(ProduceResponse)(frame, 5)  # v9 response header v1: cid + tagged fields
    return int(resp.responses[0].partition_responses[0].error_code)


def _still_serving(cluster, n: int) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap})
    p.produce("bad", value=b"ok-%d" % n, partition=0)
    assert p.flush(30) == 0


def test_bad_frames_and_batches(cluster):
    create_topic(cluster.bootstrap, "bad", config={"max.message.bytes": "2000"})
    port = cluster.port
    good = build_batch([(b"k", b"v", (), 1_700_000_000_000)])

    # random bytes, a huge size prefix, an unknown API key: the connection is closed
    assert _send(port, bytes(range(256)) * 4) == b""
    assert _send(port, struct.pack(">i", 2**31 - 1) + b"\x00" * 64) == b""
    assert _send(port, struct.pack(">i", 12) + struct.pack(">hhi", 999, 0, 1) + b"\x00\x00") == b""
    _still_serving(cluster, 1)

    # a batch with a bad CRC -> CORRUPT_MESSAGE (2)
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF
    assert _produce_error(port, bytes(corrupt)) == 2
    # an oversized batch -> MESSAGE_TOO_LARGE (10)
    big = build_batch([(None, b"x" * 5000, (), 1_700_000_000_000)])
    assert _produce_error(port, big) == 10
    # a legacy magic v1 message set -> INVALID_RECORD (87) or CORRUPT_MESSAGE(2)
    legacy = bytearray(good)
    legacy[16] = 1
    assert _produce_error(port, bytes(legacy)) in (2, 87)
    # a truncated batch -> CORRUPT_MESSAGE
    assert _produce_error(port, good[:-3]) in (2, 87)
    _still_serving(cluster, 2)

    msgs = consume_partition(cluster.bootstrap, "bad", 0, 2)
    assert [m.value() for m in msgs] == [b"ok-1", b"ok-2"]  # nothing bad was stored


def test_compressed_records_are_walked_as_kafka_walks_them(cluster):
    """Once the node has loaded its compiled record walk, a compressed batch whose records
    break Kafka's layout (a header key of negative size, a record size that does not match
    its content) gets INVALID_RECORD, and a good one is appended."""
    wait_until(lambda: "compiled record walk loaded" in cluster.log_text(), "the compiled record walk to load")
    create_topic(cluster.bootstrap, "bad")
    now = 1_700_000_000_000

    def batch(records: bytes, count: int) -> bytes:
        return build_batch_from_records(records, count, base_timestamp=now, max_timestamp=now,
                                        compression=CompressionType.LZ4)

    record = encode_record(0, 0, b"k", b"v", (("h", b"x"),))
    negative_header_key = record.replace(b"\x02h", b"\x01h")
    longer_than_its_content = bytes([record[0] + 2]) + record[1:] + b"\x00"  # its size (zigzag) + 1
    good = encode_record(0, 0, b"k", b"good", ())
    assert _produce_error(cluster.port, batch(negative_header_key, 1)) == 87
    assert _produce_error(cluster.port, batch(longer_than_its_content, 1)) == 87
    assert _produce_error(cluster.port, batch(good, 1)) == 0
    msgs = consume_partition(cluster.bootstrap, "bad", 0, 1)
    assert [m.value() for m in msgs] == [b"good"]
