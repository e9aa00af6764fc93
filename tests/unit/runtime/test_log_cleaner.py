"""The cleaner's asyncio shell: it cleans due compacted logs, leaves refused ones alone,
gives the event loop back between steps and checkpoints what it cleaned."""

from __future__ import annotations

import asyncio

from kmirror.log.cleaner.checkpoint import CleanerOffsetCheckpoint
from kmirror.log.cleaner.config import CleanerConfig
from kmirror.log.config import LogConfig
from kmirror.log.log_manager import LogManager
from kmirror.ports import ManualClock
from kmirror.records.builder import build_batch
from kmirror.runtime.log_cleaner import LogCleanerService
from kmirror.testing.memory_fs import MemoryFileSystem
from kmirror.types import TopicPartition

NOW = 1_700_000_000_000
COMPACT = LogConfig(cleanup_policy=("compact",), segment_bytes=4096)


def fill(manager: LogManager, topic: str) -> None:
    log = manager.get_or_create_log(TopicPartition(topic, 0), config=COMPACT)
    for i in range(3000):
        log.append_as_leader(build_batch([(b"k%d" % (i % 5), b"v" * 100, (), NOW)]), 0, now_ms=NOW)
    log.roll()
    log.append_as_leader(build_batch([(b"tail", b"v", (), NOW)]), 0, now_ms=NOW)
    log.update_high_watermark(log.log_end_offset)


def test_cleaner_service_cleans_in_steps_and_skips_refused_logs() -> None:
    fs, clock = MemoryFileSystem(), ManualClock(NOW)
    manager = LogManager(fs, ["/data"], clock, LogConfig())
    fill(manager, "keyed")
    fill(manager, "mirrored")
    sizes = {tp.topic: manager.logs[tp].size_bytes for tp in manager.logs}

    async def main() -> int:
        service = LogCleanerService(CleanerConfig(backoff_ms=10), manager, clock,
                                    may_clean=lambda tp: tp.topic != "mirrored")
        turns = 0  # loop turns of other work taken while a round was in progress

        async def other_work() -> None:
            nonlocal turns
            while True:
                turns += bool(service.manager.in_progress)
                await asyncio.sleep(0)

        ticker = asyncio.create_task(other_work())
        service.start()
        while service.rounds_completed < 1:
            await asyncio.sleep(0.01)
        await service.stop()
        ticker.cancel()
        return turns

    turns = asyncio.run(main())
    keyed, mirrored = manager.logs[TopicPartition("keyed", 0)], manager.logs[TopicPartition("mirrored", 0)]
    assert keyed.size_bytes < sizes["keyed"] / 10
    assert mirrored.size_bytes == sizes["mirrored"]
    assert turns > 5  # the loop ran other work between the round's steps
    assert CleanerOffsetCheckpoint(fs, "/data").read() == {TopicPartition("keyed", 0): 3000}
