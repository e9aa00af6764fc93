"""A node's scheduler (Kafka's `KafkaScheduler`): the periodic jobs of the log manager and the
controller (retention, checkpoints, flushes, producer id expiration, broker session checks).
Each runs every `period_ms` on the event loop; a failed run is logged with the job's name and
does not stop the next one."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("kmirror.node")


class Scheduler:
    def __init__(self) -> None:
        self._tasks: list[asyncio.Task[None]] = []

    def schedule(self, name: str, action: Callable[[], object], period_ms: int) -> None:
        async def run_once() -> None:
            action()

        self.schedule_async(name, run_once, period_ms)

    def schedule_async(self, name: str, action: Callable[[], Awaitable[object]], period_ms: int) -> None:
        async def run() -> None:
            while True:
                await asyncio.sleep(period_ms / 1000)
                try:
                    await action()
                except Exception:
                    log.exception("scheduled job %s failed", name)

        self._tasks.append(asyncio.get_running_loop().create_task(run(), name=name))

    def shutdown(self) -> None:
        for task in self._tasks:
            task.cancel()
