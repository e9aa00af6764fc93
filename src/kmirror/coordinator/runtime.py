"""The coordinators' shell: runs a sans-IO coordinator core on asyncio (`CoordinatorRuntime`,
Kafka's coordinator-common). The group coordinator (`kmirror.coordinator.group.service`),
the transaction coordinator (`kmirror.coordinator.transaction.service`) and the KIP-1279
MirrorCoordinator (`kmirror.mirror.service`) run on it.

It executes the core's `Output` in the documented order (append, report, answer), keeps
one timer armed at the core's next deadline, answers delayed JoinGroup / SyncGroup when
the core releases them, and loads the internal topic's partitions as this node comes to
lead them. Handlers call the public coroutines; results are the core's values.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterable
from typing import Generic, Protocol, TypeVar

from kmirror.client.sampled_rate import METRICS_WINDOW, SampledRate
from kmirror.coordinator.partition_status import PartitionStatus
from kmirror.coordinator.ports import CoordinatorLog
from kmirror.coordinator.results import (
    Append,
    Output,
)
from kmirror.ports import Clock
from kmirror.protocol.errors import ErrorCode

log = logging.getLogger("kmirror.coordinator")



class CoreAppend(Protocol):
    """An append the core asks for: reported back by `ticket`, to its topic's `partition`."""

    @property
    def ticket(self) -> int: ...

    @property
    def partition(self) -> int: ...


A = TypeVar("A", bound=CoreAppend)  # `Append` (groups, transactions), KIP-1279 `StateAppend`
T = TypeVar("T")
KeyValueRecords = list[tuple[bytes, bytes | None]]


class CorePartitions(Protocol):
    partitions: dict[int, PartitionStatus]


class CoordinatorCore(Protocol[A]):
    """What `CoordinatorRuntime` drives: a sans-IO coordinator core."""

    @property
    def state(self) -> CorePartitions: ...

    def begin_load(self, partition: int) -> None: ...

    def unload(self, partition: int) -> Output[A]: ...

    def on_append_completed(self, ticket: int, error: ErrorCode = ...) -> Output[A]: ...

    def next_deadline_ms(self) -> int | None: ...

    def poll(self, now_ms: int) -> Output[A]: ...


class KeyValueCore(CoordinatorCore[Append], Protocol):
    """A core whose records are (key, value) bytes in its topic (groups, transactions)."""

    def complete_load(self, partition: int, records: KeyValueRecords) -> Output[Append] | None: ...


class CoordinatorRuntime(Generic[A]):
    """The shell every coordinator core runs in (Kafka `CoordinatorRuntime`): loads the
    core's partitions of its internal topic as this node comes to lead them, executes the
    core's `Output` (appends, each reported back, then responses), keeps one timer armed at
    the core's next deadline. A core offers `state.partitions`, `begin_load`,
    `complete_load` (may return an Output), `unload`, `on_append_completed`,
    `next_deadline_ms` and `poll` (`CoordinatorCore`).

    A runtime reads its partitions with `_replay` (decode what the log holds, feed the core)
    and writes with `_append_to_log` (encode an append), as Kafka's runtime takes a record
    serde; `KeyValueCoordinatorRuntime` has those of (key, value) records."""

    def __init__(self, core: CoordinatorCore[A], log: CoordinatorLog, clock: Clock, topic: str) -> None:
        self.core = core
        self.topic = topic
        self._log = log
        self._clock = clock
        self._waiters: dict[int, asyncio.Future[object]] = {}
        self._next_request_id = 0
        self._timer: asyncio.TimerHandle | None = None
        self._loads: dict[int, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        # one lock per partition: an append and a transaction marker (written in turn with the
        # appends) never overlap, and a partition waiting for its ISR does not hold up the others
        self._append_locks: dict[int, asyncio.Lock] = {}
        # each partition's last append queued (`_enqueue`): done once written and reported
        self._append_tails: dict[int, asyncio.Future[None]] = {}
        self._running = False
        # set (and replaced) whenever a partition starts or finishes loading or is unloaded
        self._partitions_changed = asyncio.Event()
        # Kafka's runtime metrics: each load's time, from the moment this node came to lead the
        # partition to its last record replayed (`partition-load-time-avg/max`), and the led
        # partitions whose load failed (`num-partitions{state=failed}`)
        self.partition_load_time = SampledRate(METRICS_WINDOW, clock.monotonic_ms())
        self.failed_partitions: set[int] = set()

    # ---- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        self._running = True

    async def stop(self) -> None:
        self._running = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for task in [*self._loads.values(), *self._tasks]:
            task.cancel()
        for partition in list(self.core.state.partitions):
            self.core.unload(partition)
        for future in self._waiters.values():
            if not future.done():
                future.cancel()
        self._waiters.clear()

    def on_partitions_led(self, partitions: Iterable[int]) -> None:
        """The partitions of the coordinator's topic this node now leads: load new ones,
        unload the ones it no longer leads (their waiting clients get NOT_COORDINATOR)."""
        led = set(partitions)
        self.failed_partitions &= led
        for partition in list(self.core.state.partitions):
            if partition not in led:
                task = self._loads.pop(partition, None)
                if task is not None:
                    task.cancel()
                self._spawn(self._execute(self.core.unload(partition)))
                self._notify_partitions_changed()
        for partition in led - set(self.core.state.partitions):
            self.core.begin_load(partition)
            self.failed_partitions.discard(partition)
            self._loads[partition] = asyncio.get_running_loop().create_task(
                self._load(partition, self._clock.monotonic_ms()))
        self._notify_partitions_changed()

    async def _load(self, partition: int, led_at_ms: int) -> None:
        try:
            count, out = self._replay(partition)
            now_ms = self._clock.monotonic_ms()
            self.partition_load_time.record(now_ms - led_at_ms, now_ms)
            log.info("loaded %s-%d (%d records)", self.topic, partition, count)
        except Exception:
            # a partition that cannot be replayed is not coordinated here: its half-loaded
            # state is dropped as on resignation
            log.exception("loading %s-%d failed", self.topic, partition)
            self.failed_partitions.add(partition)
            out = self.core.unload(partition)
        finally:
            self._loads.pop(partition, None)
            self._rearm()
            self._notify_partitions_changed()
        if isinstance(out, Output):
            await self._execute(out)

    def _notify_partitions_changed(self) -> None:
        self._partitions_changed.set()
        self._partitions_changed = asyncio.Event()

    async def until_loaded(self, partition: int, timeout_ms: int) -> bool:
        """Wait, at most `timeout_ms`, until this node coordinates `partition` (leads it and
        has loaded it); True when it does. For a node that the metadata already names the
        partition's leader: its replica manager and this load follow in a moment, and answering
        COORDINATOR_NOT_AVAILABLE meanwhile spends the client's few FindCoordinator retries
        (librdkafka's admin client then waits out its whole request timeout)."""
        deadline_ms = self._clock.monotonic_ms() + timeout_ms
        while self.core.state.partitions.get(partition) is not PartitionStatus.LOADED:
            remaining_ms = deadline_ms - self._clock.monotonic_ms()
            if remaining_ms <= 0 or not self._running:
                return False
            try:
                async with asyncio.timeout(remaining_ms / 1000):
                    await self._partitions_changed.wait()
            except TimeoutError:
                return False
        return True

    def _replay(self, partition: int) -> tuple[int, Output[A] | None]:
        """Feed the partition's records to the core: (how many, the core's output)."""
        raise NotImplementedError

    def partition_counts(self) -> dict[str, int]:
        """Kafka's `num-partitions` per state: loading, active (loaded) and failed."""
        statuses = list(self.core.state.partitions.values())
        return {"loading": statuses.count(PartitionStatus.LOADING), "active": statuses.count(PartitionStatus.LOADED),
                "failed": len(self.failed_partitions)}

    def is_loading(self, partition: int) -> bool:
        return self.core.state.partitions.get(partition) is PartitionStatus.LOADING

    async def wait_loaded(self) -> None:
        """Until every load started so far has finished (tests and simulations)."""
        while self._loads:
            await asyncio.gather(*list(self._loads.values()), return_exceptions=True)

    # ---- executing the core's output --------------------------------------------------

    def _new_waiter(self) -> tuple[int, asyncio.Future[object]]:
        self._next_request_id += 1
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self._waiters[self._next_request_id] = future
        return self._next_request_id, future

    async def _answer(self, rid: int, future: asyncio.Future[object], out: Output[A]) -> object:
        try:
            await self._execute(out)
            return await future
        finally:
            self._waiters.pop(rid, None)

    async def _answer_as(self, kind: type[T], rid: int, future: asyncio.Future[object], out: Output[A]) -> T:
        """`_answer`, whose result the core gives as a `kind` (a broken invariant if not)."""
        result = await self._answer(rid, future, out)
        if not isinstance(result, kind):
            raise AssertionError(f"{self.topic} coordinator answered request {rid} with {result!r}")
        return result

    async def _execute(self, out: Output[A]) -> None:
        """Appends first, then answers. The appends of different partitions run at once (each
        waits for its own ISR); a partition's appends are written, and reported to the core,
        in the order the core made them, across outputs: each joins its partition's queue
        now, before anything is awaited. The i-th append of a wide output starts i steps of
        the event loop later, so that encoding and writing them does not hold the loop in one
        step. Each report's output runs in turn."""
        queued = [(append, *self._enqueue(append.partition)) for append in out.appends]
        if len(queued) == 1:
            await self._append_in_order(*queued[0])
        elif queued:
            await asyncio.gather(*(self._append_in_order(*q, steps_first=i) for i, q in enumerate(queued)))
        for rid, result in out.responses:
            future = self._waiters.get(rid)
            if future is not None and not future.done():
                future.set_result(result)
        self._rearm()

    def _enqueue(self, partition: int) -> tuple[asyncio.Future[None] | None, asyncio.Future[None]]:
        """(the partition's previous append, if not done; this append's completion)."""
        previous = self._append_tails.get(partition)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._append_tails[partition] = done
        return previous, done

    def _dequeue(self, partition: int, done: asyncio.Future[None]) -> None:
        done.set_result(None)
        if self._append_tails.get(partition) is done:
            del self._append_tails[partition]

    async def _append_in_order(self, append: A, previous: asyncio.Future[None] | None,
                               done: asyncio.Future[None], steps_first: int = 0) -> None:
        error = ErrorCode.none
        try:
            for _ in range(steps_first):
                await asyncio.sleep(0)
            if previous is not None and not previous.done():
                await asyncio.wait([previous])  # never cancels the previous append
            lock = self._append_locks.setdefault(append.partition, asyncio.Lock())
            async with lock:
                await self._append_to_log(append)
        except Exception as exc:
            error = getattr(exc, "code", ErrorCode.coordinator_not_available)
            log.warning("append to %s-%d failed: %s", self.topic, append.partition, exc)
        except BaseException:
            self._dequeue(append.partition, done)
            raise
        # reported before it leaves the queue, so the partition's next append is reported after
        # it; the report's own output may append to this partition, so it runs after that
        follow = self.core.on_append_completed(append.ticket, error)
        self._dequeue(append.partition, done)
        await self._execute(follow)

    async def _append_to_log(self, append: A) -> None:
        """Append one of the core's appends durably (raises if it cannot)."""
        raise NotImplementedError

    async def schedule_transaction_completion(self, partition: int, *, producer_id: int, producer_epoch: int,
                                              coordinator_epoch: int, committed: bool,
                                              replay: Callable[[], None]) -> ErrorCode:
        """Kafka `CoordinatorRuntime.scheduleTransactionCompletion`: the COMMIT/ABORT marker
        of `producer_id`'s transaction (WriteTxnMarkers for `partition`) is written in turn
        with the partition's other appends (under its append lock), and `replay` applies it
        to the core once the ISR has it, before the partition's next append completes: the
        core sees the partition's writes in log order (a transactional write of the producer
        still awaiting its ISR is completed first). A partition not loaded here gets the
        marker written only: its load replays the log, marker included."""
        lock = self._append_locks.setdefault(partition, asyncio.Lock())
        async with lock:
            try:
                await self._log.append_end_transaction_marker(
                    partition, producer_id=producer_id, producer_epoch=producer_epoch,
                    coordinator_epoch=coordinator_epoch, committed=committed)
            except Exception as exc:
                log.warning("marker on %s-%d failed: %s", self.topic, partition, exc)
                return ErrorCode(getattr(exc, "code", ErrorCode.coordinator_not_available))
            if self.core.state.partitions.get(partition) is PartitionStatus.LOADED:
                replay()
        self._rearm()
        return ErrorCode.none

    def _rearm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        deadline = self.core.next_deadline_ms()
        if deadline is None or not self._running:
            return
        delay_ms = max(0, deadline - self._clock.monotonic_ms())
        self._timer = asyncio.get_running_loop().call_later(delay_ms / 1000, self._on_timer)

    async def expire_deadlines(self) -> None:
        """Act on every deadline already passed (what the timer does; simulations call it)."""
        await self._execute(self.core.poll(self._clock.monotonic_ms()))

    def _on_timer(self) -> None:
        self._timer = None
        self._spawn(self._execute(self.core.poll(self._clock.monotonic_ms())))

    def _spawn(self, coro: Coroutine[object, object, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


class KeyValueCoordinatorRuntime(CoordinatorRuntime[Append]):
    """The runtime of a core whose records are (key, value) bytes in its topic."""

    def _replay_key_value(
        self, partition: int, complete_load: Callable[[int, KeyValueRecords], Output[Append] | None]
    ) -> tuple[int, Output[Append] | None]:
        records = list(self._log.read_all(partition))
        return len(records), complete_load(partition, records)

    async def _append_to_log(self, append: Append) -> None:
        """Append one `Append` of (key, value) bytes durably (raises if it cannot)."""
        if append.producer_id >= 0:
            await self._log.append(append.partition, append.records, producer_id=append.producer_id,
                                   producer_epoch=append.producer_epoch, verification_guard=append.verification_guard)
        else:
            await self._log.append(append.partition, append.records)
