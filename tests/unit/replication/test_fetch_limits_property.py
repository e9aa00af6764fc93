"""KIP-74 fetch limits as properties, over the real Log on the memory file system."""

from uuid import uuid4

from hypothesis import given, settings
from hypothesis import strategies as st

from kmirror.ports import ManualClock
from kmirror.records.batch import iter_batches
from kmirror.records.builder import build_batch
from kmirror.replication.outcomes import READ_UNCOMMITTED, ReadOutcome
from kmirror.replication.replica_manager import FetchPartitionRequest, ReplicaManager
from kmirror.testing.replication import memory_log_manager, server_config, single_node_image
from kmirror.types import TopicPartition

PARTITIONS = 3


@settings(max_examples=60, deadline=None)
@given(
    appends=st.lists(
        st.tuples(st.integers(0, PARTITIONS - 1), st.integers(1, 4), st.integers(0, 300)), min_size=1, max_size=25
    ),
    fetch_offsets=st.lists(st.integers(0, 30), min_size=PARTITIONS, max_size=PARTITIONS),
    partition_max_bytes=st.integers(0, 2000),
    max_bytes=st.integers(0, 4000),
)
def test_fetch_respects_kip_74(appends, fetch_offsets, partition_max_bytes, max_bytes) -> None:
    clock = ManualClock()
    rm = ReplicaManager(1, memory_log_manager(clock), clock, server_config(1))
    rm.apply_image(None, single_node_image(1, {"t": (uuid4(), PARTITIONS)}))
    stored: dict[int, list[tuple[int, int, int]]] = {p: [] for p in range(PARTITIONS)}  # (base, next, size)
    for partition, count, value_size in appends:
        batch = build_batch([(b"k", b"x" * value_size, (), 1_000)] * count)
        result = rm.append_records({TopicPartition("t", partition): batch}, 1)
        info = result[TopicPartition("t", partition)]
        stored[partition].append((info.base_offset, info.last_offset + 1, len(batch)))  # type: ignore[union-attr]

    requests = [
        FetchPartitionRequest(TopicPartition("t", p), fetch_offsets[p], partition_max_bytes) for p in range(PARTITIONS)
    ]
    results = rm.fetch(requests, max_bytes, READ_UNCOMMITTED)

    total = 0
    first_nonempty_seen = False
    for p in range(PARTITIONS):
        result = results[TopicPartition("t", p)]
        log_end = stored[p][-1][1] if stored[p] else 0
        if fetch_offsets[p] > log_end:
            assert not isinstance(result, ReadOutcome)
            continue
        assert isinstance(result, ReadOutcome)
        data = bytes(result.records)
        # Whole batches, possibly followed by a partial one cut at the byte limit (as Kafka's
        # FileRecords slices do; clients drop the partial tail).
        headers = [h for _, h in iter_batches(data, allow_truncated_tail=True)]
        assert sum(h.size for h in headers) <= len(data)
        if headers:
            # Starts at the batch holding the fetch offset, in log order.
            assert headers[0].base_offset <= fetch_offsets[p] <= headers[0].last_offset
            assert [h.base_offset for h in headers] == sorted(h.base_offset for h in headers)
            if first_nonempty_seen:
                assert len(data) <= partition_max_bytes and total + len(data) <= max_bytes
            elif len(data) > min(partition_max_bytes, max_bytes):
                assert len(headers) == 1 and headers[0].size == len(data)  # one batch, so the consumer progresses
            first_nonempty_seen = True
        else:
            # Empty only when nothing is there, or the limits leave no room after an earlier partition.
            has_data = any(next_ > fetch_offsets[p] for _, next_, _ in stored[p])
            assert not has_data or first_nonempty_seen
        total += len(data)
