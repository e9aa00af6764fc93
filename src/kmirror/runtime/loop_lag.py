"""`LoopLagMonitor`: how long the node's event loop is held by one step, measured from inside.

Every connection of a node is served by one asyncio loop, so a synchronous step that holds it
for 500 ms delays every client by up to 500 ms whatever the machine's load. A task wakes every
`TICK_MS` and records how late it woke (the lag): a lag past `STALL_MS` is a stall. Unlike a
probe client's latency, which also counts the time the process waits for a core, the stall
count is about the node's own code, so tests can bound it on a loaded machine.

Metrics (`kmirror.server:type=EventLoop`): `LagMaxMs` (the largest lag since start),
`StallCount` (ticks later than `STALL_MS`), `StallTimeMs` (their summed lag), and the
interpreter's cyclic garbage collections, which hold every thread: `GcMaxMs` (the longest
since start), `GcFullCount` (full, generation-2, collections).

With `stall_trace_ms` > 0 a watchdog thread also logs, for a stall longer than that, one WARN
line naming the frames the loop was running when the stall began (the innermost kmirror
frames): where a step that should yield or run on a worker thread does not.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import sys
import threading
import time
import traceback

from kmirror.metrics.registry import MetricsRegistry, metric_name

log = logging.getLogger(__name__)

TICK_MS = 10
STALL_MS = 50
EVENT_LOOP = ("kmirror.server", "EventLoop")


class LoopLagMonitor:
    def __init__(self, registry: MetricsRegistry | None = None, stall_trace_ms: int = 0) -> None:
        self.lag_max_ms = 0.0
        self.stall_count = 0
        self.stall_time_ms = 0.0
        self.gc_max_ms = 0.0
        self.gc_full_count = 0
        self._gc_started = 0.0
        self._stall_trace_ms = stall_trace_ms
        self._task: asyncio.Task[None] | None = None
        self._watchdog: threading.Thread | None = None
        self._stopped = threading.Event()
        self._last_tick = time.monotonic()
        self._last_tick_cpu = 0.0
        if registry is not None:
            domain, type_ = EVENT_LOOP
            registry.gauge(metric_name(domain, type_, "LagMaxMs"), lambda: round(self.lag_max_ms, 1))
            registry.gauge(metric_name(domain, type_, "StallCount"), lambda: self.stall_count)
            registry.gauge(metric_name(domain, type_, "StallTimeMs"), lambda: round(self.stall_time_ms, 1))
            registry.gauge(metric_name(domain, type_, "GcMaxMs"), lambda: round(self.gc_max_ms, 1))
            registry.gauge(metric_name(domain, type_, "GcFullCount"), lambda: self.gc_full_count)

    def start(self) -> None:
        self._last_tick = time.monotonic()
        gc.callbacks.append(self._on_gc)
        self._task = asyncio.get_running_loop().create_task(self._tick())
        if self._stall_trace_ms > 0:
            loop_thread = threading.get_ident()
            self._watchdog = threading.Thread(target=self._watch, args=(loop_thread,), name="loop-watchdog",
                                              daemon=True)
            self._watchdog.start()

    async def stop(self) -> None:
        self._stopped.set()
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
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

    async def _tick(self) -> None:
        interval = TICK_MS / 1000
        while True:
            expected = time.monotonic() + interval
            await asyncio.sleep(interval)
            now = time.monotonic()
            self._last_tick = now
            self._last_tick_cpu = time.process_time()
            self.record(max(0.0, (now - expected) * 1000))

    def _watch(self, loop_thread: int) -> None:
        """The watchdog: samples the loop thread's stack once a stall passes the trace bound,
        and logs it when the stall ends, with the CPU time the whole process had meanwhile (far
        less than the stall: the process waited for a core; about as much: some thread ran)."""
        bound_s = self._stall_trace_ms / 1000
        stalled_tick = -1.0
        where = ""
        cpu_started = 0.0
        while not self._stopped.wait(bound_s / 4):
            last = self._last_tick
            if stalled_tick >= 0 and last != stalled_tick:
                log.warning("event loop held for %.0f ms (process CPU %.0f ms), in %s",
                            (last - stalled_tick) * 1000, (time.process_time() - cpu_started) * 1000, where)
                stalled_tick = -1.0
            if stalled_tick >= 0 or time.monotonic() - last < bound_s:
                continue
            frame = sys._current_frames().get(loop_thread)  # the loop thread's current frame
            if frame is None:
                continue
            stack = traceback.extract_stack(frame)
            ours = [f for f in stack[:-3] if "kmirror" in f.filename]  # the three innermost frames, whatever they are
            where = " <- ".join(f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} {f.name}"
                                for f in reversed([*ours[-6:], *stack[-3:]])) or "?"
            cpu_started = self._last_tick_cpu
            stalled_tick = last
