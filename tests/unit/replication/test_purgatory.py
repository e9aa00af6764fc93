import asyncio

import pytest

from kmirror.broker.purgatory import (
    Purgatory,
    delayed_fetch_complete,
    delayed_produce_complete,
    should_delay_fetch,
)
from kmirror.types import TopicPartition

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


@pytest.mark.parametrize(
    ("accumulated", "min_bytes", "error", "complete"),
    [(0, 1, False, False), (1, 1, False, True), (5, 10, False, False), (0, 10, True, True), (10, 10, False, True)],
)
def test_delayed_fetch_completion_rule(accumulated: int, min_bytes: int, error: bool, complete: bool) -> None:
    assert delayed_fetch_complete(accumulated, min_bytes, error) is complete


def test_fetch_is_not_delayed_when_the_client_will_not_wait_or_wants_nothing() -> None:
    assert not should_delay_fetch(max_wait_ms=0, min_bytes=1, accumulated_bytes=0, any_partition_error=False)
    assert not should_delay_fetch(max_wait_ms=500, min_bytes=0, accumulated_bytes=0, any_partition_error=False)
    assert not should_delay_fetch(max_wait_ms=500, min_bytes=1, accumulated_bytes=0, any_partition_error=True)
    assert should_delay_fetch(max_wait_ms=500, min_bytes=1, accumulated_bytes=0, any_partition_error=False)


def test_delayed_produce_waits_for_every_partition_high_watermark() -> None:
    assert delayed_produce_complete({T0: 5, T1: 3}, {T0: 5, T1: 3})
    assert not delayed_produce_complete({T0: 5, T1: 3}, {T0: 5, T1: 2})
    assert not delayed_produce_complete({T0: 5}, {})
    assert delayed_produce_complete({}, {})


def test_purgatory_completes_on_watched_key_only() -> None:
    state = {"ready": False}
    purgatory = Purgatory()

    async def scenario() -> bool:
        waiter = asyncio.ensure_future(purgatory.wait([T0], lambda: state["ready"], 60_000))
        await asyncio.sleep(0)
        assert purgatory.watched(T0) == 1
        assert purgatory.check_and_complete(T0) == 0  # still not ready
        state["ready"] = True
        assert purgatory.check_and_complete(T1) == 0  # not watching T1
        assert not waiter.done()
        assert purgatory.check_and_complete(T0) == 1
        return await waiter

    assert asyncio.run(scenario()) is True
    assert purgatory.watched(T0) == 0


def test_purgatory_expires_and_unregisters() -> None:
    purgatory = Purgatory()
    assert asyncio.run(purgatory.wait([T0, T1], lambda: False, 1)) is False
    assert purgatory.watched(T0) == purgatory.watched(T1) == 0


def test_purgatory_already_complete_does_not_wait() -> None:
    purgatory = Purgatory()
    assert asyncio.run(purgatory.wait([T0], lambda: True, 60_000)) is True


def test_an_operation_completed_inside_its_own_check_completes_once() -> None:
    """`try_complete` may itself wake the purgatory for the same key (deciding whether an
    acks=all produce is complete can move the high watermark, whose append listeners
    re-check the key): the inner check completes the operation and the outer one must not
    complete it again (asyncio's InvalidStateError there escaped into the metadata image's
    publication on a broker and left it half applied)."""
    purgatory = Purgatory()
    reentered: list[int] = []

    def try_complete() -> bool:
        if not reentered:
            reentered.append(-1)
            reentered[0] = purgatory.check_and_complete(T0)  # the inner check completes it
        return True

    async def scenario() -> bool:
        waiter = asyncio.ensure_future(purgatory.wait([T0], try_complete, 60_000, checked=True))
        await asyncio.sleep(0)
        assert purgatory.check_and_complete(T0) == 0  # completed by the inner check, counted there
        return await waiter

    assert asyncio.run(scenario()) is True
    assert reentered == [1]
