"""The chaos runs' link proxies (`kmirror.testing.link`) over an echo server on loopback."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from kmirror.testing.link import Link
from kmirror.testing.mirror_clusters import wait_until
from kmirror.testing.processes import free_port_block


@pytest.fixture
def echo_link() -> Iterator[tuple[Link, int]]:
    server = socket.create_server(("127.0.0.1", 0))
    target = server.getsockname()[1]

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=echo, args=(conn,), daemon=True).start()

    def echo(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    port = free_port_block(1)
    with Link([(port, target)]) as link:
        yield link, port
    server.close()


def roundtrip(sock: socket.socket, data: bytes) -> bytes:
    sock.sendall(data)
    got = b""
    while len(got) < len(data):
        chunk = sock.recv(4096)
        if not chunk:
            break
        got += chunk
    return got


def connect(port: int) -> socket.socket:
    """A connection to the proxy, tried again after an error as a client reconnects: a connect
    that meets a reset from an earlier cut answers EPIPE on loopback."""
    for attempt in range(5):
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            if attempt == 4:
                raise
    raise AssertionError("unreachable")


def closed(sock: socket.socket) -> bool:
    """The connection is closed under the client (EOF or a reset), not echoing."""
    with sock:
        try:
            sock.sendall(b"x")
            return sock.recv(1) == b""
        except OSError:
            return True


def refused(port: int) -> bool:
    """A new connection is reset: while connecting, or at its first request."""
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    except OSError:
        return True
    return closed(sock)


def test_forwards_both_ways_while_up(echo_link: tuple[Link, int]) -> None:
    _, port = echo_link
    with connect(port) as sock:
        assert roundtrip(sock, b"hello" * 1000) == b"hello" * 1000


def test_cut_closes_open_connections_and_refuses_new_ones_until_healed(echo_link: tuple[Link, int]) -> None:
    link, port = echo_link
    sock = connect(port)
    assert roundtrip(sock, b"a") == b"a"
    link.cut()
    assert closed(sock)
    sock.close()
    assert refused(port)
    link.heal()
    with connect(port) as healed:
        assert roundtrip(healed, b"d") == b"d"


def test_blackhole_holds_bytes_and_heal_delivers_them(echo_link: tuple[Link, int]) -> None:
    link, port = echo_link
    with connect(port) as sock:
        assert roundtrip(sock, b"1") == b"1"
        link.blackhole()
        sock.sendall(b"2")
        wait_until(lambda: link.held() == 1, "the proxy holding the request")
        sock.setblocking(False)
        with pytest.raises(BlockingIOError):  # held, so the echo cannot have answered
            sock.recv(1)
        with connect(port) as during:
            during.sendall(b"3")  # accepted, answered nothing
            during.setblocking(False)
            with pytest.raises(BlockingIOError):
                during.recv(1)
            link.heal()
            during.settimeout(5)
            assert during.recv(1) == b"3"
        sock.settimeout(5)
        assert sock.recv(1) == b"2"
        assert link.held() == 0


def test_a_delay_holds_each_chunk_and_keeps_those_in_flight_pipelined(echo_link: tuple[Link, int]) -> None:
    link, port = echo_link
    link.delay(1000)
    with connect(port) as sock:
        for i in range(3):  # each request waits in the link while the next is read: several in flight at once
            sock.sendall(b"%d" % i)
            wait_until(lambda i=i: link.held() == i + 1, f"request {i} held in the link")
        got = b""
        while len(got) < 3:
            got += sock.recv(3)
        assert got == b"012"
        link.delay(0)
        assert roundtrip(sock, b"fast") == b"fast"
