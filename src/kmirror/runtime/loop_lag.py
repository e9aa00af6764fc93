"""`LoopLagMonitor`: how long the node's event loop is held by one step, measured from inside.

Every connection of a node is served by one asyncio loop, so a synchronous step that holds it
for 500 ms delays every client by up to 500 ms whatever the machine's load. The node's loop is a
`TimedEventLoop`: its selector notes when each step begins (the wait for ready events returns)
and ends (the loop waits again), so every step is measured and a loop with nothing to do costs
nothing (a timer task would wake it a hundred times a second). A step longer than `STALL_MS` is
a stall. A step's time is wall time: on a loaded machine it includes the time the process waited
for a core (the watchdog's line below tells the two apart by the process's CPU time).

Metrics (`kmirror.server:type=EventLoop`): `LagMaxMs` (the longest step since start),
`StallCount` (steps longer than `STALL_MS`), `StallTimeMs` (their summed time), and the
interpreter's cyclic garbage collections, which hold every thread: `GcMaxMs` (the longest
since start), `GcFullCount` (full, generation-2, collections).

With `stall_trace_ms` > 0 a watchdog thread also logs, for a step longer than that, one WARN
line naming the frames the loop was running when the stall was noticed (the innermost kmirror
frames): where a step that should yield or run on a worker thread does not.
"""

from __future__ import annotations

import asyncio
import collections
import gc
import logging
import selectors
import sys
import threading
import time
import traceback
from collections.abc import Callable

from kmirror.metrics.registry import MetricsRegistry, metric_name

log = logging.getLogger(__name__)

STALL_MS = 50
EVENT_LOOP = ("kmirror.server", "EventLoop")


class StepTimer(selectors.DefaultSelector):
    """The loop's selector, timing the steps between its waits: `step_started` is when the
    running step began (0.0 while the loop waits), `on_step` gets each step's milliseconds."""

    def __init__(self) -> None:
        super().__init__()
        self.step_started = 0.0
        self.on_step: Callable[[float, float], None] | None = None

    # typeshed's SelectorKey holds Any (its `data` field)
    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:  # type: ignore[explicit-any]
        started = self.step_started
        if started and self.on_step is not None:
            self.on_step(started, (time.monotonic() - started) * 1000)
        self.step_started = 0.0
        ready = super().select(timeout)
        self.step_started = time.monotonic()
        return ready


class TimedEventLoop(asyncio.SelectorEventLoop):
    """The node's event loop: a selector loop whose steps `steps` times."""

    def __init__(self) -> None:
        self.steps = StepTimer()
        super().__init__(self.steps)


class LoopLagMonitor:
    def __init__(self, registry: MetricsRegistry | None = None, stall_trace_ms: int = 0) -> None:
        self.lag_max_ms = 0.0
        self.stall_count = 0
        self.stall_time_ms = 0.0
        self.gc_max_ms = 0.0
        self.gc_full_count = 0
        self._gc_started = 0.0
        self._stall_trace_ms = stall_trace_ms
        self._steps: StepTimer | None = None
        self._last_step = (0.0, 0.0)  # (start, ms) of the last step that ended
        self._first_step = 0.0
        self._watchdog: threading.Thread | None = None
        self._stopped = threading.Event()
        if registry is not None:
            domain, type_ = EVENT_LOOP
            registry.gauge(metric_name(domain, type_, "LagMaxMs"), lambda: round(self.lag_max_ms, 1))
            registry.gauge(metric_name(domain, type_, "StallCount"), lambda: self.stall_count)
            registry.gauge(metric_name(domain, type_, "StallTimeMs"), lambda: round(self.stall_time_ms, 1))
            registry.gauge(metric_name(domain, type_, "GcMaxMs"), lambda: round(self.gc_max_ms, 1))
            registry.gauge(metric_name(domain, type_, "GcFullCount"), lambda: self.gc_full_count)

    def start(self) -> None:
        """Times the steps of the running loop, which must be a `TimedEventLoop`."""
        loop = asyncio.get_running_loop()
        if not isinstance(loop, TimedEventLoop):
            raise TypeError(f"the loop must be a TimedEventLoop to be timed, not {type(loop).__name__}")
        self._steps = loop.steps
        self._first_step = loop.steps.step_started  # the step running now is timed from its start: not counted
        self._steps.on_step = self._on_step
        gc.callbacks.append(self._on_gc)
        if self._stall_trace_ms > 0:
            loop_thread = threading.get_ident()
            self._watchdog = threading.Thread(target=self._watch, args=(loop_thread, self._steps),
                                              name="loop-watchdog", daemon=True)
            self._watchdog.start()

    async def stop(self) -> None:
        self._stopped.set()
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        if self._steps is not None:
            self._steps.on_step = None
        if self._watchdog is not None:
            await asyncio.to_thread(self._watchdog.join, 1)

    def record(self, lag_ms: float) -> None:
        self.lag_max_ms = max(self.lag_max_ms, lag_ms)
        if lag_ms > STALL_MS:
            self.stall_count += 1
            self.stall_time_ms += lag_ms

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
            return
        took_ms = (time.perf_counter() - self._gc_started) * 1000
        self.gc_max_ms = max(self.gc_max_ms, took_ms)
        if info["generation"] == 2:
            self.gc_full_count += 1
        if 0 < self._stall_trace_ms < took_ms:
            log.warning("garbage collection of generation %d took %.0f ms (%d collected)", info["generation"],
                        took_ms, info["collected"])

    def _on_step(self, started: float, ms: float) -> None:
        self._last_step = (started, ms)
        if started != self._first_step:
            self.record(ms)

    def _watch(self, loop_thread: int, steps: StepTimer) -> None:
        """The watchdog: samples the loop thread's stack once a step passes the trace bound, and
        logs it when the step ends, with the CPU time the whole process had meanwhile (far less
        than the step: the process waited for a core; about as much: some thread ran)."""
        bound_s = self._stall_trace_ms / 1000
        cpu_seen: collections.deque[tuple[float, float]] = collections.deque(maxlen=8)  # (when, process CPU)
        stalled = 0.0  # the start of the step being traced
        where = ""
        cpu_started = 0.0
        while not self._stopped.wait(bound_s / 4):
            now = time.monotonic()
            cpu_seen.append((now, time.process_time()))
            started = steps.step_started
            if stalled and started != stalled:
                last_started, last_ms = self._last_step
                held_ms = last_ms if last_started == stalled else (now - stalled) * 1000
                log.warning("event loop held for %.0f ms (process CPU %.0f ms), in %s",
                            held_ms, (time.process_time() - cpu_started) * 1000, where)
                stalled = 0.0
            if stalled or not started or started == self._first_step or now - started < bound_s:
                continue
            frame = sys._current_frames().get(loop_thread)  # the loop thread's current frame
            if frame is None:
                continue
            stack = traceback.extract_stack(frame)
            ours = [f for f in stack[:-3] if "kmirror" in f.filename]  # the three innermost frames, whatever they are
            where = " <- ".join(f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} {f.name}"
                                for f in reversed([*ours[-6:], *stack[-3:]])) or "?"
            # the process CPU at the last look before the step began (or the oldest kept)
            cpu_started = next((cpu for when, cpu in reversed(cpu_seen) if when <= started), cpu_seen[0][1])
            stalled = started
