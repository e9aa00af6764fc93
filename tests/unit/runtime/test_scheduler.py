"""A scheduled job keeps running after a failed run, which is logged with its name."""

from __future__ import annotations

import asyncio
import logging

import pytest

from kmirror.runtime.scheduler import Scheduler


def test_a_failed_run_is_logged_and_the_next_one_runs(caplog: pytest.LogCaptureFixture) -> None:
    runs: list[int] = []

    async def scenario() -> None:
        third = asyncio.Event()

        def action() -> None:
            runs.append(len(runs))
            if len(runs) == 3:
                third.set()
            if len(runs) == 1:
                raise RuntimeError("disk busy")

        scheduler = Scheduler()
        scheduler.schedule("kafka-log-retention", action, 0)
        await third.wait()
        scheduler.shutdown()

    with caplog.at_level(logging.ERROR):
        asyncio.run(scenario())
    assert runs[:3] == [0, 1, 2]
    assert [r.getMessage() for r in caplog.records] == ["scheduled job kafka-log-retention failed"]


def test_shutdown_stops_every_job() -> None:
    async def scenario() -> list[asyncio.Task[object]]:
        scheduler = Scheduler()

        async def nothing() -> None:
            pass

        scheduler.schedule_async("checkpoint", nothing, 1000)
        scheduler.schedule("flush", lambda: None, 1000)
        tasks = [t for t in asyncio.all_tasks() if t.get_name() in ("checkpoint", "flush")]
        scheduler.shutdown()
        await asyncio.gather(*tasks, return_exceptions=True)
        return tasks

    tasks = asyncio.run(scenario())
    assert len(tasks) == 2 and all(t.cancelled() for t in tasks)
