"""A periodic task keeps running after a failed run, which is logged with its name."""

from __future__ import annotations

import asyncio
import logging

import pytest

from kmirror.runtime.periodic import PeriodicTasks


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

        periodic = PeriodicTasks()
        periodic.every(0, "log retention", action)
        await third.wait()
        periodic.cancel()

    with caplog.at_level(logging.ERROR):
        asyncio.run(scenario())
    assert runs[:3] == [0, 1, 2]
    assert [r.getMessage() for r in caplog.records] == ["background task log retention failed"]


def test_cancel_stops_every_task() -> None:
    async def scenario() -> list[asyncio.Task[object]]:
        periodic = PeriodicTasks()

        async def nothing() -> None:
            pass

        periodic.every_async(1000, "checkpoint", nothing)
        periodic.every(1000, "flush", lambda: None)
        tasks = [t for t in asyncio.all_tasks() if t.get_name() in ("checkpoint", "flush")]
        periodic.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return tasks

    tasks = asyncio.run(scenario())
    assert len(tasks) == 2 and all(t.cancelled() for t in tasks)
