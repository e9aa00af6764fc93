"""A manager pass starts its partitions a chunk per loop iteration (`wiring.staggered`): the
loop serves other work between chunks, and the coalescers behind the gate still send one
request per step for the whole pass."""

from __future__ import annotations

import asyncio

from kmirror.mirror import coalescer as coalescer_module
from kmirror.mirror import wiring
from kmirror.mirror.coalescer import Coalescer, Gate


def test_a_pass_yields_between_chunks_and_its_partitions_share_one_request() -> None:
    partitions = 2 * wiring.STAGGER + 7

    async def run() -> tuple[list[int], int, list[int]]:
        gate = Gate()
        batches: list[int] = []

        async def flush(items: list[int]) -> list[int]:
            batches.append(len(items))
            return [item * 2 for item in items]

        coalescer: Coalescer[int, int] = Coalescer(flush, gate)
        started: list[int] = []
        turns_of_others = 0

        async def partition(i: int) -> int:
            started.append(i)
            return await coalescer.submit(i)

        async def other_work() -> None:  # e.g. a fetch response, between two chunks
            nonlocal turns_of_others
            while len(started) < partitions:
                turns_of_others += 1
                await asyncio.sleep(0)

        other = asyncio.ensure_future(other_work())
        results = await wiring.staggered(gate)([partition(i) for i in range(partitions)])
        await other
        return batches, turns_of_others, [r for r in results if isinstance(r, int)]

    batches, turns_of_others, results = asyncio.run(run())
    assert batches == [partitions]
    assert results == [i * 2 for i in range(partitions)]
    assert turns_of_others >= 2  # the loop ran other work while the pass was starting


def test_without_the_gate_the_chunks_would_go_out_as_several_requests() -> None:
    partitions = 2 * wiring.STAGGER + 7

    async def run() -> list[int]:
        batches: list[int] = []

        async def flush(items: list[int]) -> list[None]:
            batches.append(len(items))
            return [None] * len(items)

        coalescer: Coalescer[int, None] = Coalescer(flush)
        await wiring.staggered(Gate())([coalescer.submit(i) for i in range(partitions)])
        return batches

    batches = asyncio.run(run())
    assert sum(batches) == partitions and len(batches) > 1


def test_a_wide_batch_is_answered_a_step_at_a_time_and_the_next_step_still_shares_one_request() -> None:
    partitions = 2 * coalescer_module.ANSWER_STEP + 7

    async def run() -> tuple[list[int], list[int], list[int]]:
        gate = Gate()
        bumps: list[int] = []
        writes: list[int] = []

        async def bump(items: list[int]) -> list[None]:
            bumps.append(len(items))
            return [None] * len(items)

        async def write(items: list[int]) -> list[int]:
            writes.append(len(items))
            return items

        bumper: Coalescer[int, None] = Coalescer(bump, gate)
        store: Coalescer[int, int] = Coalescer(write, gate)
        woken_per_turn: list[int] = []
        woken = 0

        async def partition(i: int) -> int:
            nonlocal woken
            await bumper.submit(i)
            woken += 1
            return await store.submit(i)  # the step after the bump

        async def count_turns() -> None:
            nonlocal woken
            while len(writes) == 0:
                woken_per_turn.append(woken)
                woken = 0
                await asyncio.sleep(0)

        counter = asyncio.ensure_future(count_turns())
        results = await asyncio.gather(*(partition(i) for i in range(partitions)))
        await counter
        assert results == list(range(partitions))
        return bumps, writes, woken_per_turn

    bumps, writes, woken_per_turn = asyncio.run(run())
    assert bumps == [partitions] and writes == [partitions]  # one request per step
    assert max(woken_per_turn) <= coalescer_module.ANSWER_STEP  # never every caller in one turn
    assert sum(woken_per_turn) == partitions


def test_a_gate_stays_closed_until_every_closer_has_opened_it() -> None:
    async def run() -> tuple[bool, bool]:
        gate = Gate()
        with gate.closed():
            with gate.closed():  # e.g. a wide answer while a pass is still starting
                pass
            waiter = asyncio.ensure_future(gate.opened())
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            released_early = waiter.done()
        await asyncio.wait_for(waiter, 1)
        return released_early, waiter.done()

    assert asyncio.run(run()) == (False, True)
