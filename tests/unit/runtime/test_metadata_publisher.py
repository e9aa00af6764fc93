"""MetadataPublisher: small images are published at once, large creations after their logs
were made in bounded steps of the event loop, and images arriving meanwhile are coalesced."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

from kmirror.metadata.image import PartitionRegistration
from kmirror.runtime.metadata_publisher import MetadataPublisher


class FakeLogs:
    has_new_logs = False

    def __init__(self, seconds_per_log: float = 0.0, events: list[str] | None = None) -> None:
        self.logs: dict[object, SimpleNamespace] = {}
        self.seconds_per_log = seconds_per_log
        self.events = events if events is not None else []

    def get_log(self, tp: object) -> object:
        return self.logs.get(tp)

    def get_or_create_log(self, tp: object, topic_id: object, config: object, *, is_new: bool = True) -> SimpleNamespace:
        time.sleep(self.seconds_per_log)
        self.events.append("log")
        log = self.logs[tp] = SimpleNamespace(log_end_offset=1)
        return log


def _image(offset: int, partitions: int) -> SimpleNamespace:
    registrations = {p: PartitionRegistration((1,), (1,), 1, 0, 0) for p in range(partitions)}
    topic = SimpleNamespace(name="t", topic_id="id", partitions=registrations)
    return SimpleNamespace(offset=offset, topics={"t": topic} if partitions else {},
                           is_new_replica=lambda registration, broker_id: True)


def _recording(published: list[int]) -> Callable[[Any, Any], Iterator[None]]:
    def steps(old: Any, new: Any) -> Iterator[None]:
        published.append(new.offset)
        yield

    return steps


def test_large_creations_are_prepared_in_steps_that_let_the_loop_serve_others_and_images_coalesce() -> None:
    events: list[str] = []
    logs = FakeLogs(seconds_per_log=0.01, events=events)  # 12 logs: 120 ms, several 20 ms steps
    published: list[int] = []
    rm = SimpleNamespace(node_id=1, log_manager=logs, log_config=lambda image, topic: None,
                         assigns_leader_epoch=lambda image, topic: False)

    async def other_client() -> None:
        while len(published) < 2:
            events.append("served")
            await asyncio.sleep(0)

    async def main() -> None:
        publisher = MetadataPublisher(rm, _recording(published), threshold=4)
        publisher.on_change(None, _image(1, 3))  # small: at once
        assert published == [1] and not logs.logs
        publisher.on_change(None, _image(2, 10))  # large: prepared in steps
        publisher.on_change(None, _image(3, 12))  # coalesced with the one being prepared
        assert published == [1]
        await asyncio.gather(other_client(), publisher.wait_published())
        assert published == [1, 3] and len(logs.logs) == 12

    asyncio.run(main())
    made = [i for i, e in enumerate(events) if e == "log"]
    assert "served" in events[made[0]:made[-1]]  # the loop turned while the logs were made


def test_stop_ends_a_preparation_at_its_next_step_and_publishes_nothing_more() -> None:
    logs = FakeLogs(seconds_per_log=0.01)
    published: list[int] = []
    rm = SimpleNamespace(node_id=1, log_manager=logs, log_config=lambda image, topic: None,
                         assigns_leader_epoch=lambda image, topic: False)

    async def main() -> None:
        publisher = MetadataPublisher(rm, _recording(published), threshold=4)
        publisher.on_change(None, _image(1, 200))  # 2 s of logs
        await asyncio.sleep(0.05)
        await publisher.stop()

    asyncio.run(main())
    assert published == [] and 0 < len(logs.logs) < 200  # stopped early, the image left unpublished


def test_an_image_is_published_even_when_preparing_its_logs_fails() -> None:
    published: list[int] = []

    class BrokenLogs(FakeLogs):
        def get_or_create_log(self, tp: object, topic_id: object, config: object, *, is_new: bool = True) -> SimpleNamespace:
            raise OSError("disk gone")

    rm = SimpleNamespace(node_id=1, log_manager=BrokenLogs(), log_config=lambda image, topic: None,
                         assigns_leader_epoch=lambda image, topic: False)

    async def main() -> None:
        publisher = MetadataPublisher(rm, _recording(published), threshold=4)
        publisher.on_change(None, _image(5, 10))
        await publisher.wait_published()
        assert published == [5]

    asyncio.run(main())


def test_a_large_image_is_published_in_steps_between_which_the_loop_serves_others() -> None:
    events: list[str] = []
    rm = SimpleNamespace(node_id=1, log_manager=FakeLogs(), log_config=lambda image, topic: None,
                         assigns_leader_epoch=lambda image, topic: False)

    def steps(old: Any, new: Any) -> Iterator[None]:
        for i in range(3):
            events.append(f"step {i}")
            yield
        events.append("published")

    async def other_client() -> None:
        while "published" not in events:
            events.append("served")
            await asyncio.sleep(0)

    async def main() -> None:
        publisher = MetadataPublisher(rm, steps, threshold=4)
        publisher.on_change(None, _image(1, 10))
        await asyncio.gather(other_client(), publisher.wait_published())

    asyncio.run(main())
    steps_at = [i for i, e in enumerate(events) if e.startswith("step")]
    assert len(steps_at) == 3 and events[-1] == "published"
    assert all("served" in events[a:b] for a, b in zip(steps_at, steps_at[1:], strict=False))


def test_an_image_arriving_while_a_large_one_is_published_in_steps_is_published_next() -> None:
    published: list[int] = []
    rm = SimpleNamespace(node_id=1, log_manager=FakeLogs(), log_config=lambda image, topic: None,
                         assigns_leader_epoch=lambda image, topic: False)
    holder: list[MetadataPublisher] = []

    def steps(old: Any, new: Any) -> Iterator[None]:
        for step in range(3):
            if new.offset == 1 and step == 1:
                holder[0].on_change(None, _image(2, 12))  # arrives between two steps of image 1
            yield
        published.append(new.offset)

    async def main() -> None:
        holder.append(MetadataPublisher(rm, steps, threshold=4))
        holder[0].on_change(None, _image(1, 10))
        await holder[0].wait_published()

    asyncio.run(main())
    assert published == [1, 2] and len(rm.log_manager.logs) == 12


def test_stop_ends_the_sync_of_new_logs_which_leaves_the_rest_to_the_log_managers_close() -> None:
    class SlowToSync(FakeLogs):
        def __init__(self) -> None:
            super().__init__()
            self.pending = 100

        @property
        def has_new_logs(self) -> bool:  # type: ignore[override]
            return self.pending > 0

        def flush_new_logs(self, stop: Callable[[], bool] = lambda: False) -> int:
            flushed = 0
            while self.pending and not stop():
                time.sleep(0.01)
                self.pending -= 1
                flushed += 1
            return flushed

    logs = SlowToSync()
    rm = SimpleNamespace(node_id=1, log_manager=logs, log_config=lambda image, topic: None,
                         assigns_leader_epoch=lambda image, topic: False)

    async def main() -> None:
        publisher = MetadataPublisher(rm, _recording([]), threshold=4)
        publisher.on_change(None, _image(1, 3))  # published at once; the sync of new logs starts
        await asyncio.sleep(0.05)
        await asyncio.wait_for(publisher.stop(), timeout=30)

    asyncio.run(main())
    assert 0 < logs.pending < 100  # stopped early; `LogManager.close` syncs the rest
