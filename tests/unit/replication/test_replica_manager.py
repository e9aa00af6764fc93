import dataclasses
from typing import Any
from uuid import UUID, uuid4

from kmirror.metadata.image import PartitionRegistration
from kmirror.ports import ManualClock
from kmirror.protocol.errors import ErrorCode
from kmirror.records.builder import SimpleRecord, build_batch
from kmirror.replication.outcomes import READ_UNCOMMITTED, AppendOutcome, PartitionError, ReadOutcome
from kmirror.replication.replica_manager import FetchPartitionRequest, ReplicaManager
from kmirror.replication.replica_ports import AlterPartitionOutbox
from kmirror.testing.replication import FakeLogManager, image_with, server_config, single_node_image
from kmirror.types import TopicPartition

NODE = 1
T_ID = uuid4()
T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
DIR = UUID(int=0xD1)


def manager(image=None) -> tuple[ReplicaManager, FakeLogManager]:
    logs = FakeLogManager()
    rm = ReplicaManager(NODE, logs, ManualClock(), server_config(NODE))
    rm.apply_image(None, image or single_node_image(NODE, {"t": (T_ID, 2)}))
    return rm, logs


def test_apply_image_creates_hosted_partitions_only() -> None:
    other = uuid4()
    image = image_with(
        {
            "t": (T_ID, {0: PartitionRegistration((NODE,), (NODE,), NODE, 3, 1)}),
            "elsewhere": (other, {0: PartitionRegistration((2,), (2,), 2, 0, 0)}),
        }
    )
    rm, logs = manager(image)
    assert set(logs.logs) == {T0}
    partition = rm.get_partition(T0)
    assert partition is not None and partition.is_leader and partition.leader_epoch == 3
    assert rm.get_partition(TopicPartition("elsewhere", 0)) is None
    assert rm.leader_partitions("t") == [0]


def test_apply_image_deletes_logs_of_deleted_and_recreated_topics() -> None:
    rm, logs = manager()
    rm.append_records({T0: b"a"}, 1)
    rm.apply_image(None, single_node_image(NODE, {}))
    assert rm.get_partition(T0) is None and set(logs.deleted) == {T0, T1}
    # Same name, new topic id: a new, empty log.
    rm.apply_image(None, single_node_image(NODE, {"t": (uuid4(), 1)}))
    partition = rm.get_partition(T0)
    assert partition is not None and partition.log.log_end_offset == 0


def test_apply_image_follows_leadership_and_topic_configs() -> None:
    rm, logs = manager()
    image = image_with(
        {"t": (T_ID, {0: PartitionRegistration((NODE,), (NODE,), 2, 4, 2), 1: PartitionRegistration((NODE,), (NODE,), NODE, 0, 0)})},
        configs={"t": {"min.insync.replicas": "2", "retention.ms": "1000"}},
    )
    rm.apply_image(None, image)
    partition = rm.get_partition(T0)
    assert partition is not None and not partition.is_leader and partition.leader_epoch == 4
    assert partition.min_insync_replicas == 2
    assert logs.logs[T0].config.retention_ms == 1000
    result = rm.append_records({T0: b"a", T1: b"b"}, -1)
    assert result[T0] == PartitionError(ErrorCode.not_leader_or_follower)
    assert isinstance(result[T1], PartitionError) and result[T1].code == ErrorCode.not_enough_replicas


def test_append_errors_for_unknown_remote_and_internal_partitions_and_bad_acks() -> None:
    rm, _ = manager()
    results = rm.append_records({TopicPartition("nope", 0): b"a", TopicPartition("t", 7): b"a"}, 1)
    assert results[TopicPartition("nope", 0)].code == ErrorCode.unknown_topic_or_partition  # type: ignore[union-attr]
    assert results[TopicPartition("t", 7)].code == ErrorCode.unknown_topic_or_partition  # type: ignore[union-attr]
    assert rm.append_records({T0: b"a"}, 2)[T0] == PartitionError(ErrorCode.invalid_required_acks)
    offsets = TopicPartition("__consumer_offsets", 0)
    rm.apply_image(None, single_node_image(NODE, {"t": (T_ID, 2), "__consumer_offsets": (uuid4(), 1)}))
    refused = rm.append_records({offsets: b"a"}, 1)[offsets]
    assert isinstance(refused, PartitionError) and refused.code == ErrorCode.invalid_topic_exception
    assert isinstance(rm.append_to_local_log(offsets, b"a"), AppendOutcome)


def test_appends_notify_listeners() -> None:
    rm, _ = manager()
    seen: list[TopicPartition] = []
    rm.add_append_listener(seen.append)
    rm.append_records({T0: b"a", T1: b"b", TopicPartition("nope", 0): b"c"}, 1)
    assert seen == [T0, T1]


def test_fetch_max_bytes_lets_only_the_first_partition_exceed_the_limit() -> None:
    rm, _ = manager()
    rm.append_records({T0: b"x" * 100, T1: b"y" * 100}, 1)
    reqs = [FetchPartitionRequest(T0, 0, 10), FetchPartitionRequest(T1, 0, 10)]
    results = rm.fetch(reqs, max_bytes=1000, isolation_level=READ_UNCOMMITTED)
    first, second = results[T0], results[T1]
    assert isinstance(first, ReadOutcome) and first.size == 100  # KIP-74: at least one batch
    assert isinstance(second, ReadOutcome) and second.size == 0
    # The response limit applies across partitions too.
    results = rm.fetch(
        [FetchPartitionRequest(T0, 0, 1000), FetchPartitionRequest(T1, 0, 1000)], max_bytes=150, isolation_level=0
    )
    assert results[T0].size == 100 and results[T1].size == 0  # type: ignore[union-attr]


def test_fetch_errors_per_partition() -> None:
    rm, _ = manager()
    results = rm.fetch(
        [FetchPartitionRequest(TopicPartition("nope", 0), 0, 10), FetchPartitionRequest(T0, 5, 10)], 100, 0
    )
    assert results[TopicPartition("nope", 0)] == PartitionError(ErrorCode.unknown_topic_or_partition)
    assert results[T0].code == ErrorCode.offset_out_of_range  # type: ignore[union-attr]
    follower = rm.fetch([FetchPartitionRequest(T0, 0, 10)], 100, 0, replica_id=2)
    assert isinstance(follower[T0], PartitionError)


def test_delete_records_and_list_offsets() -> None:
    rm, logs = manager()
    logs.logs[T0].next_count = 10
    rm.append_records({T0: b"a"}, 1)
    results = rm.delete_records({T0: 4, T1: 1, TopicPartition("nope", 0): 0})
    assert results[T0] == 4
    assert results[T1].code == ErrorCode.offset_out_of_range  # type: ignore[union-attr]
    assert results[TopicPartition("nope", 0)].code == ErrorCode.unknown_topic_or_partition  # type: ignore[union-attr]
    earliest = rm.list_offset(T0, -2, READ_UNCOMMITTED)
    assert earliest is not None and earliest.offset == 4  # type: ignore[union-attr]


def test_describe_log_dirs_lists_partitions_with_sizes() -> None:
    class Usage:
        def usage(self, path: str) -> tuple[int, int]:
            return (1000, 400)

    logs = FakeLogManager()
    rm = ReplicaManager(NODE, logs, ManualClock(), server_config(NODE), disk_usage=Usage())
    rm.apply_image(None, single_node_image(NODE, {"t": (T_ID, 2)}))
    rm.append_records({T0: b"abc"}, 1)
    (described,) = rm.describe_log_dirs()
    assert described.path == "/data/kafka-logs"
    assert described.partitions[("t", 0)].size_bytes == 3 and described.partitions[("t", 1)].size_bytes == 0
    assert (described.total_bytes, described.usable_bytes) == (1000, 400)
    (only,) = rm.describe_log_dirs([T1, TopicPartition("nope", 0)])
    assert set(only.partitions) == {("t", 1)}


def test_stray_logs_on_disk_are_deleted_and_recreated_topics_start_empty() -> None:
    from kmirror.testing.replication import memory_log_manager

    clock = ManualClock()
    logs = memory_log_manager(clock)
    old_id = uuid4()
    logs.get_or_create_log(TopicPartition("gone", 0), uuid4())
    stale = logs.get_or_create_log(T0, old_id)
    stale.append_as_leader(build_batch([(b"k", b"v", (), 1)]), 0)
    rm = ReplicaManager(NODE, logs, clock, server_config(NODE))
    rm.apply_image(None, single_node_image(NODE, {"t": (T_ID, 1)}))
    assert logs.get_log(TopicPartition("gone", 0)) is None
    partition = rm.get_partition(T0)
    assert partition is not None and partition.log.log_end_offset == 0 and partition.log.topic_id == T_ID


def test_existing_log_of_the_same_topic_is_kept() -> None:
    from kmirror.records.builder import build_batch
    from kmirror.testing.replication import memory_log_manager

    clock = ManualClock()
    logs = memory_log_manager(clock)
    kept = logs.get_or_create_log(T0, T_ID)
    kept.append_as_leader(build_batch([(b"k", b"v", (), 1)]), 0)
    kept.update_high_watermark(1)
    rm = ReplicaManager(NODE, logs, clock, server_config(NODE))
    rm.apply_image(None, single_node_image(NODE, {"t": (T_ID, 1)}))
    partition = rm.get_partition(T0)
    assert partition is not None and partition.log is kept and partition.high_watermark == 1


class RefuseT0:
    def write_refusal(self, tp: TopicPartition) -> PartitionError | None:
        return PartitionError(ErrorCode.invalid_topic_exception, "read-only") if tp == T0 else None


def test_the_write_guard_refuses_client_appends_and_deletes_but_not_internal_appends() -> None:
    rm, _ = manager()
    rm.write_guard = RefuseT0()
    batch = build_batch([SimpleRecord(b"k", b"v")], now_ms=0)
    results = rm.append_records({T0: batch, T1: batch}, 1)
    assert results[T0] == PartitionError(ErrorCode.invalid_topic_exception, "read-only")
    assert isinstance(results[T1], AppendOutcome)
    assert rm.delete_records({T0: 0})[T0] == PartitionError(ErrorCode.invalid_topic_exception, "read-only")
    assert isinstance(rm.append_records({T0: batch}, 1, internal_topics_allowed=True)[T0], AppendOutcome)


def test_apply_image_steps_yields_every_step_and_ends_as_apply_image() -> None:
    image = single_node_image(NODE, {"big": (uuid4(), 25)})
    stepped = ReplicaManager(NODE, FakeLogManager(), ManualClock(), server_config(NODE))
    steps = stepped.apply_image_steps(None, image, step_partitions=10)
    hosted_between_steps = []
    for _ in steps:
        hosted_between_steps.append(len(stepped.leader_partitions("big")))
    # the scan of the image's 25 partitions is a step, then partitions appear step by step
    assert hosted_between_steps == [0, 9, 19]
    at_once, _ = manager(image)
    assert stepped.leader_partitions("big") == at_once.leader_partitions("big") == list(range(25))


def test_a_refused_isr_change_is_not_sent_again_until_a_new_registration() -> None:
    """A follower caught up: the leader proposes it for the ISR once. Refused with
    INVALID_UPDATE_VERSION (the controller holds a newer registration), the proposal waits for
    that registration (Kafka keeps it pending): the follower's later fetches do not send it
    again, which they did on every fetch (about a thousand requests a second)."""
    image = image_with({"t": (T_ID, {0: PartitionRegistration((NODE, 2), (NODE,), NODE, 0, 0)})})
    rm, _ = manager(image)
    outbox = rm.alter_partition
    assert isinstance(outbox, AlterPartitionOutbox)
    follower_fetch = [FetchPartitionRequest(T0, 0, 1 << 20)]
    rm.fetch(follower_fetch, 1 << 20, READ_UNCOMMITTED, replica_id=2)
    [proposal] = outbox.drain()
    assert proposal.new_isr == (NODE, 2) and proposal.partition_epoch == 0
    rm.handle_alter_partition_response(proposal, ErrorCode.invalid_update_version)
    for _ in range(5):
        rm.fetch(follower_fetch, 1 << 20, READ_UNCOMMITTED, replica_id=2)
    assert outbox.drain() == []
    # the controller's newer registration arrives: the leader proposes again, on its epoch
    rm.apply_image(image, image_with({"t": (T_ID, {0: PartitionRegistration((NODE, 2), (NODE,), NODE, 0, 1)})},
                                     offset=2))
    rm.fetch(follower_fetch, 1 << 20, READ_UNCOMMITTED, replica_id=2)
    [again] = outbox.drain()
    assert again.new_isr == (NODE, 2) and again.partition_epoch == 1


def test_a_follower_the_controller_places_in_a_lost_dir_is_not_proposed_for_the_isr() -> None:
    """KIP-858: while the controller places broker 2's replica in a dir broker 2 does not have
    online (a replaced disk, before broker 2 names the new dir), the controller refuses it with
    INELIGIBLE_REPLICA; the leader does not propose it at each of its fetches, until the image
    places it in an online dir."""
    def image(directory: UUID, offset: int) -> Any:
        reg = PartitionRegistration((NODE, 2), (NODE,), NODE, 0, 0, directories=(DIR, directory))
        base = image_with({"t": (T_ID, {0: reg})}, offset=offset)
        brokers = {b: dataclasses.replace(r, log_dirs=(DIR,)) for b, r in base.brokers.items()}
        return dataclasses.replace(base, brokers=brokers)

    lost = image(UUID(int=0xDEAD), 1)
    rm, _ = manager(lost)
    outbox = rm.alter_partition
    assert isinstance(outbox, AlterPartitionOutbox)
    follower_fetch = [FetchPartitionRequest(T0, 0, 1 << 20)]
    for _ in range(3):
        rm.fetch(follower_fetch, 1 << 20, READ_UNCOMMITTED, replica_id=2)
    assert outbox.drain() == []
    rm.apply_image(lost, image(DIR, 2))  # broker 2 named its dir
    rm.fetch(follower_fetch, 1 << 20, READ_UNCOMMITTED, replica_id=2)
    [proposal] = outbox.drain()
    assert proposal.new_isr == (NODE, 2)
