import asyncio
import socket
import urllib.error
import urllib.request

import pytest

from kmirror.metrics.registry import MetricsRegistry, metric_name
from kmirror.ports import ManualClock
from kmirror.runtime.metrics_http import MetricsServer


def get(url: str, method: str = "GET") -> tuple[int, str, str]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def raw(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(data)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


async def scrape_all(server: MetricsServer, calls: list[tuple[str, str]]) -> list[tuple[int, str, str]]:
    port = await server.start()
    try:
        return [await asyncio.to_thread(get, f"http://127.0.0.1:{port}{path}", method) for path, method in calls]
    finally:
        await server.stop()


def test_metrics_endpoint_serves_prometheus_text_and_404_elsewhere() -> None:
    registry = MetricsRegistry(ManualClock())
    value = {"n": 1}
    registry.gauge(metric_name("kafka.server", "ReplicaManager", "UnderReplicatedPartitions"), lambda: value["n"])
    server = MetricsServer(registry, "127.0.0.1", 0)
    results = asyncio.run(scrape_all(server, [("/metrics", "GET"), ("/", "GET"), ("/metrics?x=1", "HEAD"),
                                              ("/metrics", "POST")]))
    status, content_type, body = results[0]
    assert status == 200
    assert content_type == "text/plain; version=0.0.4; charset=utf-8"
    assert body == (
        "# TYPE kafka_server_replicamanager_underreplicatedpartitions gauge\n"
        "kafka_server_replicamanager_underreplicatedpartitions 1\n"
    )
    assert results[1][0] == 404
    assert results[2][0] == 200 and results[2][2] == ""
    assert results[3][0] == 405


def test_malformed_request_gets_400_and_a_failing_gauge_gets_500() -> None:
    registry = MetricsRegistry(ManualClock())

    def broken() -> float:
        raise RuntimeError("provider bug")

    registry.gauge(metric_name("kafka.server", "ReplicaManager", "Broken"), broken)

    async def scenario() -> tuple[bytes, tuple[int, str, str]]:
        server = MetricsServer(registry)
        port = await server.start()
        try:
            bad = await asyncio.to_thread(raw, port, b"nonsense\r\n\r\n")
            failing = await asyncio.to_thread(get, f"http://127.0.0.1:{port}/metrics")
            return bad, failing
        finally:
            await server.stop()

    bad, failing = asyncio.run(scenario())
    assert bad.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert failing[0] == 500


def test_stop_closes_the_port() -> None:
    registry = MetricsRegistry(ManualClock())

    async def scenario() -> int:
        server = MetricsServer(registry)
        port = await server.start()
        await server.stop()
        return port

    port = asyncio.run(scenario())
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
