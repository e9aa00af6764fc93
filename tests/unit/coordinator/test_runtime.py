import asyncio

from kmirror.coordinator.config import CoordinatorConfig
from kmirror.coordinator.group.service import GroupCoordinatorService
from kmirror.coordinator.offsets.commits import OffsetToCommit
from kmirror.ports import ManualClock
from kmirror.protocol.errors import ErrorCode as E
from kmirror.testing.groups import MemoryCoordinatorLog


def service(log=None, **cfg):
    config = CoordinatorConfig(offsets_topic_num_partitions=1, group_initial_rebalance_delay_ms=0, **cfg)
    clock = ManualClock()
    return GroupCoordinatorService(0, config, log or MemoryCoordinatorLog(), clock), clock


async def loaded(svc):
    await svc.start()
    svc.on_partitions_led({0})
    while svc.is_loading(0):
        await asyncio.sleep(0)


def join_kwargs(member_id=""):
    return dict(
        group_id="g", member_id=member_id, group_instance_id=None, client_id="c", client_host="/h",
        session_timeout_ms=10_000, rebalance_timeout_ms=10_000, protocol_type="consumer",
        protocols=[("range", b"sub")], require_known_member_id=True,
    )


def test_join_sync_commit_and_reload():
    async def main():
        log = MemoryCoordinatorLog()
        svc, _ = service(log)
        await loaded(svc)
        first = await svc.join_group(**join_kwargs())
        assert first.error == E.member_id_required
        joined = await svc.join_group(**join_kwargs(first.member_id))
        assert joined.error == E.none and joined.leader == first.member_id
        synced = await svc.sync_group(
            group_id="g", generation_id=joined.generation_id, member_id=joined.member_id,
            protocol_type="consumer", protocol_name="range", assignments={joined.member_id: b"A"},
        )
        assert synced.assignment == b"A"
        committed = await svc.commit_offsets(
            group_id="g", generation_id=1, member_id=joined.member_id, group_instance_id=None,
            offsets=[OffsetToCommit("t", 0, 7, -1, None)],
        )
        assert [p.error for p in committed.partitions] == [E.none]
        await svc.stop()

        again, _ = service(log)
        await loaded(again)
        assert again.fetch_offsets(group_id="g", topics=[("t", [0])]).offsets[0].offset == 7
        assert again.describe_groups(["g"], missing_is_error=False)[0].state == "Stable"
        await again.stop()

    asyncio.run(main())


def test_delayed_join_is_answered_when_rebalance_completes():
    async def main():
        svc, clock = service()
        await loaded(svc)
        a = (await svc.join_group(**join_kwargs())).member_id
        await svc.join_group(**join_kwargs(a))
        await svc.sync_group(group_id="g", generation_id=1, member_id=a, protocol_type=None,
                             protocol_name=None, assignments={})
        b = (await svc.join_group(**join_kwargs())).member_id
        b_join = asyncio.ensure_future(svc.join_group(**join_kwargs(b)))
        await asyncio.sleep(0)
        assert not b_join.done()
        assert svc.heartbeat(group_id="g", generation_id=1, member_id=a) == E.rebalance_in_progress
        a_join = await svc.join_group(**join_kwargs(a))
        assert a_join.generation_id == 2
        assert (await b_join).generation_id == 2
        # Session expiry through the service's deadline handling.
        clock.advance(10_000)
        await svc.expire_deadlines()
        assert svc.list_groups([], []).groups[0].state == "Empty"  # neither member heartbeated
        await svc.stop()

    asyncio.run(main())


def test_commit_fails_when_log_append_fails():
    async def main():
        log = MemoryCoordinatorLog()
        svc, _ = service(log)
        await loaded(svc)
        log.fail_with = OSError("disk")
        result = await svc.commit_offsets(group_id="g", generation_id=-1, member_id="", group_instance_id=None,
                                          offsets=[OffsetToCommit("t", 0, 1, -1, None)])
        assert [p.error for p in result.partitions] == [E.coordinator_not_available]
        assert svc.fetch_offsets(group_id="g", topics=None).offsets == ()
        await svc.stop()

    asyncio.run(main())


def test_not_led_partition_is_not_coordinator():
    async def main():
        svc, _ = service()
        await svc.start()
        assert svc.heartbeat(group_id="g", generation_id=1, member_id="m") == E.not_coordinator
        await svc.stop()

    asyncio.run(main())


def test_a_partition_whose_replay_fails_is_unloaded_and_loaded_again_when_led_again():
    async def main():
        log = MemoryCoordinatorLog()
        log.partitions[0] = [(b"\x00\x01\x00", b"\x00")]  # an offset commit key cut short
        svc, _ = service(log)
        await svc.start()
        svc.on_partitions_led({0})
        await svc.wait_loaded()
        assert not svc.is_loading(0)
        assert svc.coordinator_error("g") == E.not_coordinator  # not half-loaded: not coordinated here
        log.partitions[0] = []
        svc.on_partitions_led({0})  # led again (the next metadata change): loading is tried again
        await svc.wait_loaded()
        assert svc.coordinator_error("g") is None
        await svc.stop()

    asyncio.run(main())


def test_until_loaded_waits_for_leadership_and_the_load_and_is_bounded():
    async def main():
        svc, _ = service()
        await svc.start()
        waiting = asyncio.ensure_future(svc.until_loaded(0, 10_000))
        await asyncio.sleep(0)
        assert not waiting.done()  # not led yet
        svc.on_partitions_led({0})  # led: loading, then loaded
        assert await waiting is True
        assert svc.coordinator_error("g") is None
        assert await svc.until_loaded(0, 10_000) is True  # already loaded: at once
        svc.on_partitions_led(set())
        assert await svc.until_loaded(0, 50) is False  # never led again: gives up
        await svc.stop()

    asyncio.run(main())


def test_load_times_and_partition_counts_as_kafkas_runtime_metrics():
    """`partition-load-time-*` from the moment the partition is led to its last record
    replayed; `num-partitions` per state, a failed load counted until the partition is led
    again or no longer."""
    clock = ManualClock()

    class SlowLog(MemoryCoordinatorLog):
        def read_all(self, partition):
            clock.advance(250)  # the replay takes 250 ms
            if partition == 1:
                raise OSError("unreadable")
            return super().read_all(partition)

    async def main():
        config = CoordinatorConfig(offsets_topic_num_partitions=2, group_initial_rebalance_delay_ms=0)
        svc = GroupCoordinatorService(0, config, SlowLog(), clock)
        await svc.start()
        assert svc.partition_load_time.avg(clock.monotonic_ms()) is None
        assert svc.partition_counts() == {"loading": 0, "active": 0, "failed": 0}
        svc.on_partitions_led({0, 1})
        assert svc.partition_counts() == {"loading": 2, "active": 0, "failed": 0}
        await svc.wait_loaded()
        now = clock.monotonic_ms()
        assert svc.partition_counts() == {"loading": 0, "active": 1, "failed": 1}
        assert (svc.partition_load_time.avg(now), svc.partition_load_time.max(now)) == (250, 250)  # the failed load is not timed
        svc.on_partitions_led({0})
        assert svc.partition_counts() == {"loading": 0, "active": 1, "failed": 0}
        await svc.stop()

    asyncio.run(main())
