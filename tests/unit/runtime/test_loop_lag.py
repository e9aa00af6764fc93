"""LoopLagMonitor: a step that holds the event loop is counted as a stall, exported as metrics,
and with a trace bound named in one WARN line."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from kmirror.metrics.registry import MetricsRegistry
from kmirror.ports import ManualClock
from kmirror.runtime.loop_lag import STALL_MS, LoopLagMonitor, TimedEventLoop


def test_record_counts_only_lags_past_the_stall_bound() -> None:
    monitor = LoopLagMonitor()
    for lag_ms in (1.0, STALL_MS, STALL_MS + 1, 300.0):
        monitor.record(lag_ms)
    assert (monitor.stall_count, monitor.stall_time_ms, monitor.lag_max_ms) == (2, STALL_MS + 1 + 300.0, 300.0)


def _hold_the_loop_for(seconds: float) -> None:
    time.sleep(seconds)  # a synchronous step, as a handler that does not yield


def test_a_step_holding_the_loop_is_a_stall_named_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    registry = MetricsRegistry(ManualClock(0))

    async def scenario() -> None:
        monitor = LoopLagMonitor(registry, stall_trace_ms=60)
        monitor.start()
        await asyncio.sleep(0.05)
        _hold_the_loop_for(0.3)
        await asyncio.sleep(0.2)  # the watchdog logs once the loop runs again
        await monitor.stop()

    with caplog.at_level(logging.WARNING, logger="kmirror.runtime.loop_lag"):
        with asyncio.Runner(loop_factory=TimedEventLoop) as runner:
            runner.run(scenario())
    values = registry.values()
    assert values["kmirror.server:type=EventLoop,name=StallCount"] >= 1
    assert values["kmirror.server:type=EventLoop,name=LagMaxMs"] >= 250
    held = [r.getMessage() for r in caplog.records if "event loop held" in r.getMessage()]
    assert held and "_hold_the_loop_for" in held[0], held


def test_only_a_timed_loop_can_be_monitored() -> None:
    async def scenario() -> None:
        LoopLagMonitor().start()

    with pytest.raises(TypeError, match="TimedEventLoop"):
        asyncio.run(scenario())


def test_every_step_is_timed_and_an_idle_loop_wakes_for_nothing() -> None:
    steps: list[float] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, TimedEventLoop)
        monitor = LoopLagMonitor()
        monitor.start()
        loop.steps.on_step = lambda started, ms: (steps.append(ms), monitor.record(ms))
        await asyncio.sleep(0.3)  # idle: the loop waits in one select
        quiet = len(steps)
        _hold_the_loop_for(0.12)
        await asyncio.sleep(0)
        assert quiet <= 3, steps
        assert monitor.stall_count == 1 and monitor.lag_max_ms >= 110, (monitor.stall_count, steps)
        await monitor.stop()

    with asyncio.Runner(loop_factory=TimedEventLoop) as runner:
        runner.run(scenario())
