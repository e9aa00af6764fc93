"""Hostile connections against a real node: a client pipelining Fetches it never reads, a
frame past socket.request.max.bytes, malformed-but-decodable requests, and connection
floods. Each test asserts the outcome (error code or disconnect), a bounded peak RSS
(VmHWM) and that a well-behaved client is served meanwhile; none may log a traceback."""

from __future__ import annotations

import datetime
import socket
import struct
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fr
from kio.static.primitive import i8, i32, i64

from kmirror.testing.hostile import (
    WellBehavedClient,
    api_versions_latency_s,
    decode_response,
    encode_request,
    peak_rss_mb,
    proc_status_kb,
    recv_frame,
)
from kmirror.testing.kafka_clients import create_topic
from kmirror.testing.processes import LocalCluster, free_port_block

pytestmark = pytest.mark.integration

INT_MAX = 2**31 - 1
FETCH_MAX_BYTES = 8 * 1024 * 1024
PARTITIONS = 4


@pytest.fixture
def limited(tmp_path: Path):
    with LocalCluster(dir=tmp_path / "limited", port=free_port_block(), overrides={
         "fetch.max.bytes": str(FETCH_MAX_BYTES), "socket.request.max.bytes": str(2 * 1024 * 1024),
         "max.connections.per.ip.overrides": "127.0.0.2:3"}) as c:
        yield c


def _server_log(cluster: LocalCluster) -> str:
    return (cluster.dir / "node-1" / "server.log").read_text()


def _fill(cluster: LocalCluster, topic: str, megabytes: int) -> None:
    create_topic(cluster.bootstrap, topic, partitions=PARTITIONS)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 20, "acks": "1"})
    value = b"v" * 100_000
    for i in range(megabytes * 10):
        producer.produce(topic, value, partition=i % PARTITIONS)
        producer.poll(0)
    assert producer.flush(120) == 0


def _greedy_fetch(correlation_id: int, topic: str) -> bytes:
    body = fr.FetchRequest(
        cluster_id=None, replica_id=i32(-1), max_wait=datetime.timedelta(milliseconds=0), min_bytes=i32(1),
        max_bytes=i32(INT_MAX), isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1),
        topics=(fr.FetchTopic(topic=topic, partitions=tuple(
            fr.FetchPartition(partition=i32(p), current_leader_epoch=i32(-1), fetch_offset=i64(0),
                              last_fetched_epoch=i32(-1), log_start_offset=i64(-1), partition_max_bytes=i32(INT_MAX))
            for p in range(PARTITIONS))),),
        forgotten_topics_data=(), rack_id="")
    return encode_request(1, 12, correlation_id, body)


def test_pipelined_fetches_never_read_keep_memory_bounded(limited: LocalCluster) -> None:
    _fill(limited, "bulk", 48)
    create_topic(limited.bootstrap, "served")
    pid = limited.pid()
    before_mb = proc_status_kb(pid, "VmRSS") / 1024
    with WellBehavedClient(limited.bootstrap, limited.port, "served") as client:
        client.wait_acks(5)
        readers = []
        for _ in range(3):  # three greedy clients, 20 pipelined Fetches each, never reading
            sock = socket.create_connection(("127.0.0.1", limited.port))
            sock.sendall(b"".join(_greedy_fetch(i, "bulk") for i in range(20)))
            readers.append(sock)
        client.wait_acks(20)
        time.sleep(2)  # let the node do whatever it would do with the 60 requests
        client.wait_acks(5)
        # a reader that finally reads gets a Fetch answer within fetch.max.bytes
        sock = readers[0]
        sock.settimeout(60)
        response = decode_response(1, 12, recv_frame(sock))
        sizes = [len(p.records or b"") for t in response.responses for p in t.partitions]
        assert response.error_code == ErrorCode.none and 0 < sum(sizes) <= FETCH_MAX_BYTES
        for s in readers:
            s.close()
    assert not client.errors, client.errors
    peak = peak_rss_mb(pid)
    print(f"RSS before {before_mb:.0f} MB, peak {peak:.0f} MB with 60 unread greedy Fetches "
          f"(unbounded would be 60 x 48 MB); {client.summary()}")
    assert peak - before_mb < 3 * (FETCH_MAX_BYTES / 2**20) * 3 + 64
    assert "Traceback" not in _server_log(limited)


def test_request_past_socket_request_max_bytes_closes_that_connection(limited: LocalCluster) -> None:
    create_topic(limited.bootstrap, "served")
    with WellBehavedClient(limited.bootstrap, limited.port, "served") as client:
        client.wait_acks(5)
        with socket.create_connection(("127.0.0.1", limited.port), timeout=30) as sock:
            sock.sendall(struct.pack(">i", 100 * 1024 * 1024) + b"\x00" * 1024)
            assert recv_frame(sock) is None
        client.wait_acks(5)
    assert not client.errors, client.errors
    assert "frame size 104857600 outside [0, 2097152]" in _server_log(limited)
    assert peak_rss_mb(limited.pid()) < 300


def test_max_connections_per_ip(limited: LocalCluster) -> None:
    """127.0.0.2 may hold 3 connections (max.connections.per.ip.overrides); a 4th is closed
    at once while the others and 127.0.0.1 are served."""
    create_topic(limited.bootstrap, "served")
    with WellBehavedClient(limited.bootstrap, limited.port, "served") as client:
        held = []
        for _ in range(3):
            s = socket.socket()
            s.bind(("127.0.0.2", 0))
            s.connect(("127.0.0.1", limited.port))
            held.append(s)
        extra = socket.socket()
        extra.bind(("127.0.0.2", 0))
        extra.connect(("127.0.0.1", limited.port))
        extra.settimeout(30)
        assert recv_frame(extra) is None  # closed without an answer
        extra.close()
        request = struct.pack(">hhih", 18, 0, 1, -1)
        held[0].sendall(struct.pack(">i", len(request)) + request)
        held[0].settimeout(30)
        assert recv_frame(held[0]) is not None
        client.wait_acks(5)
        for s in held:
            s.close()
    assert api_versions_latency_s(limited.port) < 30
    assert not client.errors, client.errors
    assert "max.connections.per.ip=3 reached for 127.0.0.2" in _server_log(limited)
    assert peak_rss_mb(limited.pid()) < 300


def _raw(api_key: int, version: int, body: bytes) -> bytes:
    payload = struct.pack(">hhih", api_key, version, 99, -1) + body
    return struct.pack(">i", len(payload)) + payload


MALFORMED = {
    "ListOffsets v1 topics=null": _raw(2, 1, struct.pack(">ii", -1, -1)),
    "Fetch v4 topics=null": _raw(1, 4, struct.pack(">iiiibi", -1, 100, 1, 1024, 0, -1)),
    "Produce v3 topic_data=null": _raw(0, 3, struct.pack(">hhii", -1, 1, 1000, -1)),
    "Produce v3 partition_data=null": _raw(0, 3, struct.pack(">hhii", -1, 1, 1000, 1) + struct.pack(">h", 1) + b"t"
                                          + struct.pack(">i", -1)),
    "CreateTopics v2 topics=null": _raw(19, 2, struct.pack(">iib", -1, 1000, 0)),
    "ListOffsets v1 negative count": _raw(2, 1, struct.pack(">ii", -1, -5)),
    "ListOffsets v1 absurd count": _raw(2, 1, struct.pack(">ii", -1, INT_MAX)),
    "Produce v3 absurd topic name length": _raw(0, 3, struct.pack(">hhii", -1, 1, 1000, 1) + struct.pack(">h", 32000)),
    "DeleteTopics v1 topic_names=null": _raw(20, 1, struct.pack(">ii", -1, 1000)),
}


def test_malformed_but_decodable_requests_close_that_connection_with_one_warning(cluster: LocalCluster) -> None:
    create_topic(cluster.bootstrap, "served")
    with WellBehavedClient(cluster.bootstrap, cluster.port, "served") as client:
        client.wait_acks(5)
        for name, frame in MALFORMED.items():
            with socket.create_connection(("127.0.0.1", cluster.port), timeout=30) as sock:
                sock.sendall(frame)
                assert recv_frame(sock) is None, name
        client.wait_acks(5)
    assert not client.errors, client.errors
    log = _server_log(cluster)
    assert "Traceback" not in log and "ERROR" not in log
    warnings = [line for line in log.splitlines() if "WARNING" in line and "closing connection" in line]
    assert len(warnings) == len(MALFORMED), warnings
    assert sum("was serialized as null" in w for w in warnings) == 6
    assert peak_rss_mb(cluster.pid()) < 300
