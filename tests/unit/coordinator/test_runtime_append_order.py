"""How `CoordinatorRuntime` executes a core's appends: the partitions of one output are
appended at once (one waiting for its ISR does not hold up the others), and a partition's
appends are written and reported to the core in the order the core made them, also across
outputs executed concurrently."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from kmirror.coordinator.partition_status import PartitionStatus
from kmirror.coordinator.results import Output
from kmirror.coordinator.runtime import CoordinatorRuntime
from kmirror.ports import ManualClock
from kmirror.protocol.errors import ErrorCode


@dataclass(frozen=True)
class Append:
    ticket: int
    partition: int


@dataclass
class Partitions:
    partitions: dict[int, PartitionStatus] = field(default_factory=dict)


class Core:
    """Records the order in which appends are reported; answers request `ticket` with it."""

    def __init__(self) -> None:
        self.state = Partitions()
        self.reported: list[int] = []

    def begin_load(self, partition: int) -> None: ...

    def unload(self, partition: int) -> Output[Append]:
        return Output()

    def on_append_completed(self, ticket: int, error: ErrorCode = ErrorCode.none) -> Output[Append]:
        self.reported.append(ticket)
        return Output()

    def next_deadline_ms(self) -> int | None:
        return None

    def poll(self, now_ms: int) -> Output[Append]:
        return Output()


class GatedRuntime(CoordinatorRuntime[Append]):
    """An append is written when its ticket's gate opens (its ISR catching up)."""

    def __init__(self) -> None:
        super().__init__(Core(), None, ManualClock(), "topic")  # type: ignore[arg-type]
        self.gates: dict[int, asyncio.Event] = {}
        self.written: list[int] = []

    async def _append_to_log(self, append: Append) -> None:
        await self.gates.setdefault(append.ticket, asyncio.Event()).wait()
        self.written.append(append.ticket)


def test_partitions_append_at_once_and_each_partition_keeps_its_order() -> None:
    async def scenario() -> tuple[list[int], list[int]]:
        runtime = GatedRuntime()
        first = asyncio.create_task(runtime._execute(Output(appends=[Append(1, 0), Append(2, 1)])))
        await asyncio.sleep(0)
        second = asyncio.create_task(runtime._execute(Output(appends=[Append(3, 1), Append(4, 2)])))
        for _ in range(3):
            await asyncio.sleep(0)
        for ticket in (4, 3, 2):  # partition 2 first, then partition 1's later append before its earlier
            runtime.gates.setdefault(ticket, asyncio.Event()).set()
            for _ in range(3):
                await asyncio.sleep(0)
        assert runtime.written == [4, 2, 3]  # 3 waited for 2 (same partition); 4 did not wait for 1
        assert not first.done()
        runtime.gates[1].set()
        await asyncio.gather(first, second)
        return runtime.written, runtime.core.reported

    written, reported = asyncio.run(scenario())
    assert written == [4, 2, 3, 1]
    assert reported == [4, 2, 3, 1]


class InstantRuntime(GatedRuntime):
    async def _append_to_log(self, append: Append) -> None:
        self.written.append(append.ticket)


def test_a_wide_output_writes_one_append_per_turn_of_the_loop() -> None:
    async def scenario() -> list[object]:
        runtime = InstantRuntime()
        seen: list[object] = runtime.written  # type: ignore[assignment]

        async def other_work() -> None:  # what else the loop serves meanwhile
            for _ in range(6):
                seen.append("other")
                await asyncio.sleep(0)

        await asyncio.gather(runtime._execute(Output(appends=[Append(t, t) for t in range(3)])), other_work())
        return seen

    seen = asyncio.run(scenario())
    appends = [i for i, entry in enumerate(seen) if entry != "other"]
    assert [seen[i] for i in appends] == [0, 1, 2]
    assert all(b - a > 1 for a, b in zip(appends, appends[1:], strict=False))  # other work in between
