"""The network link between two sites, as a test can break it: TCP proxies in front of each
broker's `LINK` listener (`LocalCluster(link_port=...)`). A broker advertises its proxy's
address on that listener, so a client that bootstraps at the proxies (a mirror, through
`LocalCluster.link_bootstrap`) reaches every broker through them, while the cluster's own
traffic (replication, the controller, local clients) stays on `PLAINTEXT`.

- `cut()`: every connection through the link is closed abruptly, and new ones are reset as
  they arrive: a route withdrawn, a firewall answering with resets. Clients notice at once.
- `blackhole()`: nothing is forwarded any more. Bytes wait in the kernel's buffers (their
  senders' windows fill), and new connections are accepted but answered nothing: packets
  silently dropped. A client notices only by its own timeouts (`request.timeout.ms`).
- `heal()`: forwarding resumes, and what waited is delivered, like TCP's retransmissions
  after a short outage; a connection its client gave up on in the meantime is closed.
- `delay(ms)` (or `Link(..., delay_ms=)`): every chunk is forwarded `ms` after it was read,
  each way, so a round trip takes twice that more: the distance between two regions. Chunks
  stay pipelined (a window without bound), so the delay costs round trips, not bandwidth."""

from __future__ import annotations

import queue
import socket
import struct
import threading
import time
from collections.abc import Iterable

UP, CUT, BLACKHOLE = "up", "cut", "blackhole"
CHUNK = 64 * 1024


class _Pair:
    """One client connection and its connection to the broker."""

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.sockets = (client, upstream)
        self.closed = False
        self.lock = threading.Lock()
        self.pending = 0
        """Chunks read and not yet forwarded, both ways (guarded by the link's condition)."""

    def close(self) -> None:
        """Close both ends abruptly: wake any thread blocked on them, then reset (linger 0).
        Once only: a second close could shut down a new connection that reuses the fd."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
        for sock in self.sockets:
            reset(sock)


def reset(sock: socket.socket) -> None:
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked in recv or sendall on it
    except OSError:
        pass
    sock.close()


class Link:
    """Proxies for `routes` (listen port, target port) on 127.0.0.1, forwarding while up."""

    def __init__(self, routes: Iterable[tuple[int, int]], *, delay_ms: float = 0.0) -> None:
        self.routes = list(routes)
        self.delay_s = delay_ms / 1000
        self.state = UP
        self.changed = threading.Condition()
        self.pairs: set[_Pair] = set()
        self.listeners: list[socket.socket] = []
        self.stopped = False

    def start(self) -> Link:
        for listen_port, target_port in self.routes:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", listen_port))
            listener.listen(64)
            self.listeners.append(listener)
            threading.Thread(target=self._accept, args=(listener, target_port), daemon=True,
                             name=f"link-{listen_port}").start()
        return self

    def cut(self) -> None:
        with self.changed:
            self.state = CUT
            pairs, self.pairs = self.pairs, set()
            self.changed.notify_all()
        for pair in pairs:
            pair.close()

    def delay(self, ms: float) -> None:
        """Forward each chunk read from now on `ms` after it was read (0: at once)."""
        self.delay_s = ms / 1000

    def blackhole(self) -> None:
        self._set(BLACKHOLE)

    def heal(self) -> None:
        self._set(UP)

    def _set(self, state: str) -> None:
        with self.changed:
            self.state = state
            self.changed.notify_all()

    def close(self) -> None:
        self.stopped = True
        for listener in self.listeners:
            reset(listener)
        self.cut()

    def __enter__(self) -> Link:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self, listener: socket.socket, target_port: int) -> None:
        while not self.stopped:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed
            if self.state == CUT:
                reset(client)
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", target_port), timeout=5)
            except OSError:
                reset(client)  # the broker is down: the client sees its connection fail
                continue
            upstream.settimeout(None)
            for sock in (client, upstream):  # forward each chunk as it comes, as a router does (no Nagle)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pair = _Pair(client, upstream)
            with self.changed:
                if self.state == CUT:
                    pair.close()
                    continue
                self.pairs.add(pair)
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(pair, src, dst), daemon=True).start()

    def _flowing(self, pair: _Pair) -> bool:
        """Wait while the link is a black hole; False once the pair is closed."""
        with self.changed:
            self.changed.wait_for(lambda: self.state != BLACKHOLE or pair.closed)
            return not pair.closed

    def held(self) -> int:
        """Chunks read and not yet forwarded (requests or answers lost so far in a black hole,
        or on their way through a delay); those of connections closed since do not count."""
        with self.changed:
            return sum(pair.pending for pair in self.pairs)

    def _pump(self, pair: _Pair, src: socket.socket, dst: socket.socket) -> None:
        """Read `src` while the link forwards, queueing each chunk with the time it is due at
        `dst`; a sender thread forwards them in order. Nothing is read during a black hole,
        so the sender's window fills as it would."""
        chunks: queue.SimpleQueue[tuple[float, bytes] | None] = queue.SimpleQueue()
        threading.Thread(target=self._send, args=(pair, chunks, dst), daemon=True).start()
        try:
            while self._flowing(pair):
                data = src.recv(CHUNK)
                if not data:
                    break
                with self.changed:
                    pair.pending += 1
                chunks.put((time.monotonic() + self.delay_s, data))
        except OSError:
            pair.close()
        chunks.put(None)  # the sender closes the pair once everything read was forwarded

    def _send(self, pair: _Pair, chunks: queue.SimpleQueue[tuple[float, bytes] | None], dst: socket.socket) -> None:
        try:
            while (chunk := chunks.get()) is not None:
                due, data = chunk
                time.sleep(max(0.0, due - time.monotonic()))
                flowing = self._flowing(pair)
                with self.changed:
                    pair.pending -= 1  # before the send: its receiver may look at `held` at once
                if not flowing:
                    break
                dst.sendall(data)
        except OSError:
            pass
        with self.changed:
            self.pairs.discard(pair)
        pair.close()
