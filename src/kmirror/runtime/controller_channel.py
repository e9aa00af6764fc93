"""The broker's channel to the active controller (Kafka `NodeToControllerChannelManager`).

Requests are kio request entities built for the version the controller supports; the
channel connects to a controller listener named in `controller.quorum.voters`, and goes on to
the next voter after a failure, a closed connection or a NOT_CONTROLLER answer (a voter that
is not the active controller), retrying a request until `timeout_ms` passes. Used for BrokerRegistration,
BrokerHeartbeat, AlterPartition and forwarded admin requests. A combined broker+controller
node talks to its own controller listener the same way, as Kafka does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.client.connection import BrokerConnection
from kmirror.client.errors import KafkaConnectionError

log = logging.getLogger(__name__)


class ControllerUnavailable(Exception):
    pass


class ControllerChannel:
    def __init__(
        self,
        voters: Sequence[tuple[int, str, int]],
        *,
        client_id: str,
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
    ) -> None:
        if not voters:
            raise ValueError("controller.quorum.voters is empty")
        self._voters = list(voters)
        self._client_id = client_id
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._connection: BrokerConnection | None = None
        self._next_voter = 0
        self._lock = asyncio.Lock()

    async def connection(self) -> BrokerConnection:
        async with self._lock:
            if self._connection is not None and self._connection.connected:
                return self._connection
            _, host, port = self._voters[self._next_voter % len(self._voters)]
            self._next_voter += 1
            conn = BrokerConnection(host, port, client_id=self._client_id, request_timeout_ms=self._request_timeout_ms)
            await conn.connect()
            self._connection = conn
            return conn

    async def send(self, api_key: int, timeout_ms: int | None = None, **fields: Any) -> Any:
        """Build the request at the controller's version from `fields` and send it, retrying
        on connection failures until `timeout_ms` (default: the request timeout) passes."""
        return await self._retry(lambda conn: conn.build_request(api_key, **fields), timeout_ms)

    async def forward(self, request: Any, timeout_ms: int | None = None) -> Any:
        """Send a kio request entity as it is (the client's version: a forwarded admin write)."""
        return await self._retry(lambda _conn: request, timeout_ms)

    async def _retry(self, request_for: Callable[[BrokerConnection], Any], timeout_ms: int | None) -> Any:
        deadline = time.monotonic() + (timeout_ms or self._request_timeout_ms) / 1000
        while True:
            try:
                conn = await self.connection()
                response = await conn.send(request_for(conn))
                if getattr(response, "error_code", ErrorCode.none) != ErrorCode.not_controller:
                    return response
                failure: Exception = KafkaConnectionError(f"{conn.address} is not the active controller")
            except (KafkaConnectionError, OSError) as exc:
                failure = exc
            await self._drop()
            if time.monotonic() >= deadline:
                raise ControllerUnavailable(f"controller unreachable: {failure}") from failure
            await asyncio.sleep(self._retry_backoff_ms / 1000)

    async def _drop(self) -> None:
        conn, self._connection = self._connection, None
        if conn is not None:
            await conn.close()

    async def close(self) -> None:
        await self._drop()
