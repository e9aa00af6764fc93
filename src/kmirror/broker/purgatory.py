"""Delayed operations: Fetch waiting for `min_bytes`, Produce acks=all waiting for the HW.

Kafka's `DelayedOperationPurgatory` with its `DelayedFetch` and `DelayedProduce`. The rules
deciding "is it complete?" are pure functions (`delayed_fetch_complete`,
`delayed_produce_complete`); the purgatory itself is the asyncio shell that parks a request,
re-checks it when one of its partitions is appended to (the replica manager's append
listener) and gives up when its wait expires.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kmirror.broker.quotas.request_time import CURRENT_REQUEST_TIMER
from kmirror.protocol.errors import ErrorCode
from kmirror.types import TopicPartition

# -- the completion rules (pure) ------------------------------------------------------------


def delayed_fetch_complete(accumulated_bytes: int, min_bytes: int, any_partition_error: bool) -> bool:
    """Kafka `DelayedFetch.tryComplete`: answer now when a partition would answer with an
    error (not leader, unknown, fenced, out of range) or enough bytes are readable."""
    return any_partition_error or accumulated_bytes >= min_bytes


def delayed_produce_complete(
    required_offsets: Mapping[TopicPartition, int], high_watermarks: Mapping[TopicPartition, int]
) -> bool:
    """Kafka `DelayedProduce.tryComplete` for acks=all: every partition's HW has reached the
    offset after its appended batch (the ISR holds it). Failed partitions are not waited on:
    leave them out of `required_offsets`. With one replica the HW is the LEO after the
    append, so this holds immediately."""
    return all(high_watermarks.get(tp, -1) >= offset for tp, offset in required_offsets.items())


def delayed_produce_outcome(
    required_offsets: Mapping[TopicPartition, int], check: Callable[[TopicPartition, int], tuple[bool, ErrorCode]]
) -> dict[TopicPartition, ErrorCode]:
    """Kafka `DelayedProduce.tryComplete` per partition: `check(tp, offset)` is the leader's
    `checkEnoughReplicasReachOffset` (done?, error). Returns the error of every partition that
    is done; the operation completes when every partition is."""
    done: dict[TopicPartition, ErrorCode] = {}
    for tp, offset in required_offsets.items():
        finished, error = check(tp, offset)
        if finished:
            done[tp] = error
    return done


def should_delay_fetch(max_wait_ms: int, min_bytes: int, accumulated_bytes: int, any_partition_error: bool) -> bool:
    """Kafka `ReplicaManager.fetchMessages`: respond immediately if the client will not wait,
    wants nothing, or the answer is already complete."""
    if max_wait_ms <= 0 or min_bytes <= 0:
        return False
    return not delayed_fetch_complete(accumulated_bytes, min_bytes, any_partition_error)


# -- the shell -----------------------------------------------------------------------------


class _DelayedOperation:
    __slots__ = ("try_complete", "future")

    def __init__(self, try_complete: Callable[[], bool], future: asyncio.Future[bool]) -> None:
        self.try_complete = try_complete
        self.future = future


class Purgatory:
    """Parks operations keyed by the partitions they watch; woken by `check_and_complete`."""

    def __init__(self) -> None:
        self._watchers: dict[TopicPartition, set[_DelayedOperation]] = {}

    def watched(self, key: TopicPartition) -> int:
        return len(self._watchers.get(key, ()))

    async def wait(self, keys: Iterable[TopicPartition], try_complete: Callable[[], bool], max_wait_ms: int,
                   checked: bool = False) -> bool:
        """Wait until `try_complete()` holds (re-checked when a key is appended to) or
        `max_wait_ms` passes. Returns True if it completed, False if it expired.

        `checked`: the caller found the operation incomplete just now, with no await since,
        so nothing can have been appended in between: neither check before parking is needed
        (a Fetch of thousands of partitions would read them all twice more for nothing)."""
        if not checked and try_complete():
            return True
        loop = asyncio.get_running_loop()
        op = _DelayedOperation(try_complete, loop.create_future())
        watched = list(dict.fromkeys(keys))
        for key in watched:
            self._watchers.setdefault(key, set()).add(op)
        try:
            # Close the race between the first check and registration.
            if not checked and try_complete():
                return True
            timer = CURRENT_REQUEST_TIMER.get()  # waiting is not handler time (request_percentage)
            if timer is not None:
                timer.pause()
            try:
                async with asyncio.timeout(max(0, max_wait_ms) / 1000):
                    return await asyncio.shield(op.future)
            except TimeoutError:
                return False
            finally:
                if timer is not None:
                    timer.resume()
        finally:
            for key in watched:
                ops = self._watchers.get(key)
                if ops is not None:
                    ops.discard(op)
                    if not ops:
                        del self._watchers[key]

    def check_and_complete(self, key: TopicPartition) -> int:
        """Re-check every operation watching `key`; returns how many completed. An operation
        completes once (Kafka's `DelayedOperation.forceComplete`): `try_complete` may wake the
        purgatory again for the same key (an acks=all produce's check moving the high
        watermark), and an inner check that completed it leaves nothing to do here."""
        completed = 0
        for op in list(self._watchers.get(key, ())):
            if not op.future.done() and op.try_complete() and not op.future.done():
                op.future.set_result(True)
                completed += 1
        return completed


_PURGATORIES: weakref.WeakKeyDictionary[Any, Purgatory] = weakref.WeakKeyDictionary()


def purgatory_for(replica_manager: Any) -> Purgatory:
    """The purgatory woken by `replica_manager`'s appends (one per replica manager)."""
    purgatory = _PURGATORIES.get(replica_manager)
    if purgatory is None:
        purgatory = Purgatory()
        replica_manager.add_append_listener(purgatory.check_and_complete)
        _PURGATORIES[replica_manager] = purgatory
    return purgatory
