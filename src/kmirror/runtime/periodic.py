"""A node's periodic tasks (Kafka's `KafkaScheduler` jobs: retention, checkpoints, flushes,
producer id expiration, the controller's session checks): each runs every `interval_ms` on the
event loop, and a failed run is logged with the task's name and does not stop the next one."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("kmirror.node")


class PeriodicTasks:
    def __init__(self) -> None:
        self._tasks: list[asyncio.Task[None]] = []

    def every(self, interval_ms: int, name: str, action: Callable[[], object]) -> None:
        async def run_once() -> None:
            action()

        self.every_async(interval_ms, name, run_once)

    def every_async(self, interval_ms: int, name: str, action: Callable[[], Awaitable[object]]) -> None:
        async def run() -> None:
            while True:
                await asyncio.sleep(interval_ms / 1000)
                try:
                    await action()
                except Exception:
                    log.exception("background task %s failed", name)

        self._tasks.append(asyncio.get_running_loop().create_task(run(), name=name))

    def cancel(self) -> None:
        for task in self._tasks:
            task.cancel()
