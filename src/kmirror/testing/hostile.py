"""Tools of the hostile-input tests and the fuzz harness: raw Kafka requests on a socket, the
node's memory from /proc, and a well-behaved client that keeps producing (acks=all) and
probing ApiVersions while an attack runs, recording every error and latency."""

from __future__ import annotations

import io
import os
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import zstandard
from confluent_kafka import KafkaError, Message, Producer
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from kmirror.records.batch import HEADER_STRUCT, MAGIC_V2, write_crc
from kmirror.records.compression import CompressionType
from kmirror.records.record import encode_varint
from kmirror.testing.metrics_scrape import scrape

_SIZE = struct.Struct(">i")


def proc_status_kb(pid: int, field_name: str) -> int:
    """A `/proc/PID/status` memory field in kB: VmHWM is the peak RSS, VmRSS the current one."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    raise KeyError(field_name)


def process_cpu_s(pid: int) -> float:
    """The CPU time (user + system, every thread) process `pid` used so far, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid: int) -> float:
    return proc_status_kb(pid, "VmHWM") / 1024


def zstd_bomb_batch(value_bytes: int, timestamp_ms: int) -> bytes:
    """A v2 batch of one record whose value is `value_bytes` zeros, zstd-compressed: a
    decompression bomb of a few KB (built by streaming, never holding the zeros)."""
    body = (b"\x00" + encode_varint(0) + encode_varint(0) + encode_varint(-1) + encode_varint(value_bytes))
    record_length = len(body) + value_bytes + 1  # + the headers count
    compressor = zstandard.ZstdCompressor(level=3).compressobj()
    parts = [compressor.compress(encode_varint(record_length) + body)]
    zeros = bytes(1 << 24)
    left = value_bytes
    while left:
        step = min(left, len(zeros))
        parts.append(compressor.compress(zeros[:step]))
        left -= step
    parts.append(compressor.compress(encode_varint(0)))
    parts.append(compressor.flush())
    section = b"".join(parts)
    buf = bytearray(HEADER_STRUCT.size + len(section))
    HEADER_STRUCT.pack_into(buf, 0, 0, len(buf) - 12, -1, MAGIC_V2, 0, int(CompressionType.ZSTD), 0,
                            timestamp_ms, timestamp_ms, -1, -1, -1, 1)
    buf[HEADER_STRUCT.size:] = section
    write_crc(buf)
    return bytes(buf)


def encode_request(api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
    """One size-prefixed request frame for a kio request entity."""
    request_type = load_request_schema(api_key, version)
    header_type = request_type.__header_schema__
    buf = io.BytesIO()
    header_fields: dict[str, Any] = {"request_api_key": api_key, "request_api_version": version,
                                     "correlation_id": correlation_id}
    if "client_id" in header_type.__dataclass_fields__:
        header_fields["client_id"] = "hostile"
    entity_writer(header_type)(buf, header_type(**header_fields))
    entity_writer(request_type)(buf, body)
    payload = buf.getvalue()
    return _SIZE.pack(len(payload)) + payload


def recv_frame(sock: socket.socket) -> bytes | None:
    """The payload of the next response frame; None when the connection closed first."""
    head = _recv_exact(sock, 4)
    if head is None:
        return None
    (size,) = _SIZE.unpack(head)
    return _recv_exact(sock, size)


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        try:
            chunk = sock.recv(min(n - len(buf), 1 << 20))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def decode_response(api_key: int, version: int, frame: bytes) -> Any:
    response_type = load_response_schema(api_key, version)
    header_type = response_type.__header_schema__
    _, offset = entity_reader(header_type)(frame, 0)
    body, _ = entity_reader(response_type)(frame, offset)
    return body


def call(port: int, api_key: int, version: int, body: Any, timeout_s: float = 60) -> Any:
    """Send one request on a fresh connection; the decoded response (None when closed)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(encode_request(api_key, version, 7, body))
        frame = recv_frame(sock)
    return None if frame is None else decode_response(api_key, version, frame)


def api_versions_latency_s(port: int, timeout_s: float = 30) -> float:
    """The time to connect and be answered ApiVersions v0 (raises when not answered)."""
    request = struct.pack(">hhih", 18, 0, 1, -1)
    started = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(_SIZE.pack(len(request)) + request)
        frame = recv_frame(sock)
    if frame is None or _SIZE.unpack_from(frame, 0)[0] != 1:
        raise ConnectionError("ApiVersions not answered")
    return time.perf_counter() - started


def event_loop_lag(metrics_port: int) -> dict[str, float]:
    """The node's own event-loop measures (`kmirror.server:type=EventLoop`): LagMaxMs,
    StallCount, StallTimeMs, GcMaxMs and GcFullCount, as a scrape of its `metrics.port` reads them."""
    samples = scrape(metrics_port)
    prefix = "kmirror_server_eventloop_"
    return {name: samples[prefix + name.lower()]
            for name in ("LagMaxMs", "StallCount", "StallTimeMs", "GcMaxMs", "GcFullCount")}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


@dataclass
class WellBehavedClient:
    """Produces acks=all to `topic` and probes ApiVersions from threads until closed.

    `errors` holds every delivery error or unanswered probe; `ack_latencies_s` (as librdkafka
    measures it) and `probe_latencies_s` every latency."""

    bootstrap: str
    port: int
    topic: str
    interval_s: float = 0.02
    errors: list[str] = field(default_factory=list)
    ack_latencies_s: list[float] = field(default_factory=list)
    probe_latencies_s: list[float] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def __enter__(self) -> WellBehavedClient:
        self._threads = [threading.Thread(target=self._produce, daemon=True),
                         threading.Thread(target=self._probe, daemon=True)]
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(120)

    def wait_acks(self, n: int, timeout_s: float = 60) -> None:
        """Block until `n` more acks arrived (raises on timeout)."""
        target = len(self.ack_latencies_s) + n
        deadline = time.monotonic() + timeout_s
        while len(self.ack_latencies_s) < target:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{n} acks not received in {timeout_s}s; errors: {self.errors[:3]}")
            time.sleep(0.05)

    def _produce(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 0,
                             "message.timeout.ms": 30000})

        def delivered(err: KafkaError | None, msg: Message, sent: float) -> None:
            if err is not None:
                self.errors.append(f"delivery: {err}")
            else:
                # librdkafka's own measure, produce() to ack: not the wait of this thread for
                # the interpreter or for its next poll()
                latency = msg.latency()
                self.ack_latencies_s.append(time.perf_counter() - sent if latency is None else latency)

        def on_delivery(sent: float) -> Any:
            return lambda err, msg: delivered(err, msg, sent)

        n = 0
        while not self._stop.is_set():
            producer.produce(self.topic, value=b"well-behaved-%d" % n, partition=0,
                             on_delivery=on_delivery(time.perf_counter()))
            n += 1
            producer.poll(0)
            self._stop.wait(self.interval_s)
            producer.poll(0)
        if producer.flush(60) != 0:
            self.errors.append("flush: records not delivered")

    def _probe(self) -> None:
        while not self._stop.is_set():
            try:
                self.probe_latencies_s.append(api_versions_latency_s(self.port))
            except OSError as exc:
                self.errors.append(f"probe: {exc}")
            self._stop.wait(self.interval_s)

    def summary(self) -> str:
        return (f"acks={len(self.ack_latencies_s)} ack_p99={percentile(self.ack_latencies_s, 0.99) * 1000:.0f}ms "
                f"probes={len(self.probe_latencies_s)} probe_p50={percentile(self.probe_latencies_s, 0.5) * 1000:.1f}ms "
                f"probe_p99={percentile(self.probe_latencies_s, 0.99) * 1000:.0f}ms "
                f"probe_max={max(self.probe_latencies_s, default=0) * 1000:.0f}ms errors={len(self.errors)}")
