"""Share partition states on the group coordinator: the record round trip, writes fenced by
leader and state epochs, a write visible once appended, replay at load, tombstones when the
group is deleted, and other record loaders skipping the record."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from kmirror.coordinator.consumer_group import records as consumer_records
from kmirror.coordinator.consumer_group.ports import TopicInfo
from kmirror.coordinator.group.admin import delete_groups
from kmirror.coordinator.offsets import records as offset_records
from kmirror.coordinator.share_group import state_records, state_store
from kmirror.coordinator.share_group.heartbeat import ShareHeartbeatRequest, heartbeat
from kmirror.coordinator.share_group.state_records import ShareSnapshot, ShareStateKey
from kmirror.protocol.errors import ErrorCode
from kmirror.testing.groups import CoreHarness

T = uuid.UUID(int=7)
KEY = ShareStateKey("sg", T, 3)

batches = st.lists(st.tuples(st.integers(0, 2**62), st.integers(0, 2**62), st.sampled_from([0, 1, 2, 4]),
                             st.integers(0, 2**15 - 1)), max_size=5)


@given(st.text(max_size=20), st.integers(0, 2**31 - 1), st.integers(-1, 2**31 - 1), st.integers(0, 2**62), batches)
def test_records_round_trip(group: str, state_epoch: int, leader_epoch: int, start: int,
                            state_batches: list[tuple[int, int, int, int]]) -> None:
    key = ShareStateKey(group, T, 5)
    snapshot = ShareSnapshot(state_epoch, leader_epoch, start, tuple(state_batches))
    assert state_records.decode_key(state_records.encode_key(key)) == key
    assert state_records.decode_value(state_records.encode_value(snapshot)) == snapshot


def test_the_other_loaders_skip_the_record() -> None:
    key = state_records.encode_key(KEY)
    assert offset_records.decode_key(key) is None
    assert consumer_records.decode_key(key) is None
    assert state_records.decode_key(offset_records.encode_offset_commit_key(
        offset_records.OffsetCommitKey("g", "t", 0))) is None


def write(h: CoreHarness, snapshot: ShareSnapshot, key: ShareStateKey = KEY) -> ErrorCode:
    rid = h.next_request_id()
    h.run(state_store.write(h.core, rid, key, snapshot))
    result = h.responses[rid]
    assert isinstance(result, state_store.ShareStateWritten)
    return result.error


def test_a_write_is_stored_and_read_back_and_replayed_at_load() -> None:
    h = CoreHarness()
    assert state_store.read(h.core, KEY) is None
    snapshot = ShareSnapshot(0, 4, 100, ((100, 104, 2, 1), (105, 105, 0, 2)))
    assert write(h, snapshot) == ErrorCode.none
    assert state_store.read(h.core, KEY) == snapshot
    h.core.unload(0)
    assert state_store.read(h.core, KEY) == ErrorCode.not_coordinator
    h.core.begin_load(0)
    h.core.complete_load(0, h.log.read_all(0))
    assert state_store.read(h.core, KEY) == snapshot


def test_writes_of_an_older_leader_or_state_epoch_are_fenced() -> None:
    h = CoreHarness()
    write(h, ShareSnapshot(1, 5, 10))
    assert write(h, ShareSnapshot(1, 4, 20)) == ErrorCode.fenced_leader_epoch
    assert write(h, ShareSnapshot(0, 6, 20)) == ErrorCode.fenced_state_epoch
    assert state_store.read(h.core, KEY) == ShareSnapshot(1, 5, 10)
    assert write(h, ShareSnapshot(1, 6, 20)) == ErrorCode.none


def test_deleting_the_share_group_tombstones_its_states() -> None:
    h = CoreHarness()
    h.topics["t"] = TopicInfo(T, 4)
    h.run(heartbeat(h.core, 90, ShareHeartbeatRequest("sg", "m", 0, subscribed_topic_names=("t",)), h.topics))
    h.run(heartbeat(h.core, 91, ShareHeartbeatRequest("sg", "m", -1), h.topics))
    write(h, ShareSnapshot(0, 1, 10))
    write(h, ShareSnapshot(0, 1, 10), ShareStateKey("other", T, 0))
    h.run(delete_groups(h.core, 99, ["sg"]))
    assert state_store.read(h.core, KEY) is None
    h.core.unload(0)
    h.core.begin_load(0)
    h.core.complete_load(0, h.log.read_all(0))
    assert state_store.read(h.core, KEY) is None
    assert "sg" not in h.core.share_groups
    assert state_store.read(h.core, ShareStateKey("other", T, 0)) == ShareSnapshot(0, 1, 10)


def test_a_state_no_share_partition_could_have_is_refused() -> None:
    h = CoreHarness()
    for bad in (ShareSnapshot(0, 1, -5), ShareSnapshot(0, 1, 10, ((9, 12, 0, 1),)),
                ShareSnapshot(0, 1, 10, ((10, 12, 3, 1),)), ShareSnapshot(0, 1, 10, ((12, 11, 0, 1),)),
                ShareSnapshot(0, 1, 10, ((10, 12, 0, 1), (12, 13, 0, 1))),
                ShareSnapshot(0, 1, 10, ((10, 2**62, 0, 1),))):
        assert write(h, bad) == ErrorCode.invalid_request, bad
    assert write(h, ShareSnapshot(0, 1, 0), ShareStateKey("", T, 0)) == ErrorCode.invalid_request
    assert state_store.read(h.core, KEY) is None


def test_a_deleted_topics_share_states_are_tombstoned() -> None:
    h = CoreHarness()
    h.topics["t"] = TopicInfo(T, 4)
    other = uuid.UUID(int=8)
    h.topics["u"] = TopicInfo(other, 1)
    write(h, ShareSnapshot(0, 1, 10))
    write(h, ShareSnapshot(0, 1, 3), ShareStateKey("sg", other, 0))
    del h.topics["t"]
    h.run(h.core.on_topics_deleted(["t"]))
    assert state_store.read(h.core, KEY) is None
    h.core.unload(0)
    h.core.begin_load(0)
    h.core.complete_load(0, h.log.read_all(0))
    assert state_store.read(h.core, KEY) is None
    assert state_store.read(h.core, ShareStateKey("sg", other, 0)) == ShareSnapshot(0, 1, 3)
