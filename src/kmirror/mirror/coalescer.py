"""Group commit for the mirror data plane's ports: the calls made together share one request.

The state store's ReadMirrorStates / WriteMirrorStates, the epoch bumper's BumpLeaderEpochs
and the source cluster's topic id lookups each go through a `Coalescer`, so the partitions of
one manager pass that reach the same step together cost one request, not one each.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

# Callers answered per turn of the event loop when a batch is larger: the callers of a
# 10,000-partition batch would otherwise all take their next step in one turn (1.2 s).
ANSWER_STEP = 500


class Gate:
    """Closed while a manager pass is still starting its partitions (it starts them a chunk
    per loop iteration, `wiring.STAGGER`): the coalescers given the gate flush only once it
    is open again, so the partitions of the pass still share one request per step."""

    def __init__(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self._closers = 0

    @contextlib.contextmanager
    def closed(self) -> Iterator[None]:
        """Closed until every `closed()` entered has exited."""
        self._closers += 1
        self._open.clear()
        try:
            yield
        finally:
            self._closers -= 1
            if not self._closers:
                self._open.set()

    async def opened(self) -> None:
        await self._open.wait()


class Coalescer(Generic[T, R]):
    """Group commit: the calls made while one is queued go out as one request. `flush(items)`
    answers one result per item, in order; a failed flush fails every call of its batch.
    The first call waits one loop iteration, so the partitions of a manager pass that
    reach the same step together share one request; calls arriving while a request is
    in flight form the next one. Each caller still awaits its own answer before its
    next step, so one partition never has two requests in flight. A batch of more than
    `ANSWER_STEP` calls is answered that many per loop iteration, with the gate closed."""

    def __init__(self, flush: Callable[[list[T]], Awaitable[Sequence[R]]], gate: Gate | None = None) -> None:
        self._flush = flush
        self._gate = gate
        self._queue: list[tuple[T, asyncio.Future[R]]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self.requests = 0
        """Requests sent (a batch is one)."""

    async def submit(self, item: T) -> R:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._queue.append((item, future))
        if len(self._queue) == 1:
            task = loop.create_task(self._run())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return await future

    async def _run(self) -> None:
        await asyncio.sleep(0)  # the other partitions of the pass reach this step meanwhile
        if self._gate is not None:
            await self._gate.opened()  # and those the pass has not started yet
        batch, self._queue = self._queue, []
        self.requests += 1
        try:
            results = await self._flush([item for item, _ in batch])
        except BaseException as exc:  # every caller of the batch sees it (their step stays pending)
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        if len(batch) <= ANSWER_STEP:
            _answer(batch, results)
            return
        # Answered a step at a time, so the callers' next steps do not all run in one turn of
        # the loop; behind the gate, so those steps still share one request per coalescer.
        with self._gate.closed() if self._gate is not None else contextlib.nullcontext():
            for start in range(0, len(batch), ANSWER_STEP):
                _answer(batch[start:start + ANSWER_STEP], results[start:start + ANSWER_STEP])
                await asyncio.sleep(0)


def _answer(batch: Sequence[tuple[T, asyncio.Future[R]]], results: Sequence[R]) -> None:
    for (_, future), result in zip(batch, results, strict=True):
        if not future.done():
            future.set_result(result)
