import asyncio
import json
import time
from pathlib import Path

import pytest

from kmirror.metadata.controller.topics import CreatableTopic
from kmirror.metadata.controller_service import MetadataService
from kmirror.metadata.image import EMPTY_IMAGE
from kmirror.metadata.records import ClusterIdRecord, encode
from kmirror.metadata.snapshot import RETENTION_CHECK_MS, SegmentInfo, segments_past_retention, snapshot_bytes
from kmirror.metadata.snapshot_service import MetadataSnapshots, SnapshotId
from kmirror.ports import ManualClock
from kmirror.quorum.election_state import ElectionState
from kmirror.records.batch import iter_batches, valid_prefix
from kmirror.runtime.metadata_log import (
    CorruptMetadataLogError,
    FileMetadataLogStore,
    MetaPropertiesError,
    ensure_meta_properties,
)
from kmirror.testing.metadata import seeded_rng, server_config


def test_append_and_read_back(tmp_path: Path) -> None:
    store = FileMetadataLogStore(tmp_path, now_ms=lambda: 1000)
    assert store.load().entries == []
    assert store.append([b"a", b"b"]) == 1
    assert store.append([b"c"]) == 2
    data = store.path.read_bytes()
    assert [h.base_offset for _, h in iter_batches(data)] == [0, 2]
    again = FileMetadataLogStore(tmp_path)
    assert again.load().entries == [(0, b"a"), (1, b"b"), (2, b"c")]
    assert again.append([b"d"]) == 3


def test_torn_tail_is_truncated(tmp_path: Path) -> None:
    store = FileMetadataLogStore(tmp_path, now_ms=lambda: 1000)
    store.load()
    store.append([b"a"])
    store.append([b"b"])
    full = store.path.read_bytes()
    store.path.write_bytes(full[:-3])
    again = FileMetadataLogStore(tmp_path)
    assert again.load().entries == [(0, b"a")]
    assert again.append([b"z"]) == 1
    assert FileMetadataLogStore(tmp_path).load().entries == [(0, b"a"), (1, b"z")]


def test_meta_properties_written_and_checked(tmp_path: Path) -> None:
    props = ensure_meta_properties(tmp_path, "cid", 1)
    assert props["version"] == "1" and props["node.id"] == "1" and props["cluster.id"] == "cid"
    assert len(props["directory.id"]) == 22
    assert ensure_meta_properties(tmp_path, "cid", 1)["directory.id"] == props["directory.id"]
    with pytest.raises(MetaPropertiesError) as info:
        ensure_meta_properties(tmp_path, "cid", 2)
    assert "node.id" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(MetaPropertiesError):
        ensure_meta_properties(tmp_path, "other", 1)


def test_service_on_file_store_survives_restart(tmp_path: Path) -> None:
    cfg = server_config(log_dirs=str(tmp_path))

    async def first() -> None:
        svc = MetadataService(cfg, FileMetadataLogStore(tmp_path), ManualClock(), seeded_rng(1))
        await svc.start()
        await svc.create_topics([CreatableTopic("t", 2, 1)])

    asyncio.run(first())
    assert (tmp_path / "meta.properties").exists()
    svc = MetadataService(cfg, FileMetadataLogStore(tmp_path), ManualClock(), seeded_rng(2))
    asyncio.run(svc.start())
    assert len(svc.image.topics["t"].partitions) == 2
    other = MetadataService(server_config(node_id=5), FileMetadataLogStore(tmp_path), ManualClock(), seeded_rng(3))
    with pytest.raises(MetaPropertiesError):
        asyncio.run(other.start())


def _names(path: Path) -> list[str]:
    return sorted(p.name for p in (path / "__cluster_metadata-0").iterdir())


def test_a_snapshot_rolls_the_log_and_retention_deletes_below_it(tmp_path: Path) -> None:
    store = FileMetadataLogStore(tmp_path, now_ms=lambda: 1000)
    store.load()
    store.append([b"a", b"b"])
    with pytest.raises(ValueError):
        store.write_snapshot(3, [b"x"])  # past the log end
    store.write_snapshot(2, [b"s1"])
    store.append([b"c"])
    assert _names(tmp_path) == ["00000000000000000000.log", "00000000000000000002-0000000000.checkpoint",
                                "00000000000000000002.log"]
    assert store.enforce_retention(-1, -1) == 0  # no limit: nothing deleted
    loaded = FileMetadataLogStore(tmp_path).load()
    assert loaded.snapshot == [b"s1"] and loaded.snapshot_end == 2
    assert loaded.entries == [(0, b"a"), (1, b"b"), (2, b"c")]
    store.write_snapshot(3, [b"s2"])
    assert store.enforce_retention(0, -1) == 3  # over 0 bytes: every segment below the latest snapshot goes
    assert _names(tmp_path) == ["00000000000000000003-0000000000.checkpoint", "00000000000000000003.log"]
    assert store.read_snapshot(SnapshotId(2, 0), 0, 10) is None
    size, chunk = store.read_snapshot(SnapshotId(3, 0), 1, 10) or (0, b"")
    assert chunk == (tmp_path / "__cluster_metadata-0" / "00000000000000000003-0000000000.checkpoint").read_bytes()[1:11]
    store.append([b"d"])
    again = FileMetadataLogStore(tmp_path)
    loaded = again.load()
    assert (loaded.snapshot, loaded.snapshot_end, loaded.entries) == ([b"s2"], 3, [(3, b"d")])
    assert again.log_start_offset == 3 and again.append([b"e"]) == 4


def test_retention_by_time_keeps_the_latest_snapshot_and_the_log_after_it(tmp_path: Path) -> None:
    now = [10_000_000]
    store = FileMetadataLogStore(tmp_path, now_ms=lambda: now[0])
    store.load()
    store.append([b"a"])
    assert store.enforce_retention(-1, 0) == 0  # no snapshot yet: nothing may go
    store.write_snapshot(1, [b"s"])
    store.append([b"b"])
    now[0] = int(time.time() * 1000) + 60_000
    assert store.enforce_retention(-1, 30_000) == 1
    assert _names(tmp_path) == ["00000000000000000001-0000000000.checkpoint", "00000000000000000001.log"]


def test_a_partial_snapshot_is_ignored_and_a_log_below_no_snapshot_is_refused(tmp_path: Path) -> None:
    store = FileMetadataLogStore(tmp_path)
    store.load()
    store.append([b"a"])
    (tmp_path / "__cluster_metadata-0" / "00000000000000000001-0000000000.checkpoint.part").write_bytes(b"torn")
    loaded = FileMetadataLogStore(tmp_path).load()
    assert loaded.snapshot is None and loaded.entries == [(0, b"a")]
    assert _names(tmp_path) == ["00000000000000000000.log"]
    (tmp_path / "__cluster_metadata-0" / "00000000000000000000.log").rename(
        tmp_path / "__cluster_metadata-0" / "00000000000000000005.log")
    with pytest.raises(CorruptMetadataLogError) as info:
        FileMetadataLogStore(tmp_path).load()
    assert "starts at offset 5" in str(info.value)


def test_an_installed_snapshot_replaces_the_log(tmp_path: Path) -> None:
    store = FileMetadataLogStore(tmp_path)
    store.load()
    store.append([b"a", b"b"])
    data = snapshot_bytes([b"x", b"y"], 0)
    assert store.install_snapshot(SnapshotId(40, 0), data) == [b"x", b"y"]
    assert store.append([b"z"]) == 40
    loaded = FileMetadataLogStore(tmp_path).load()
    assert (loaded.snapshot, loaded.snapshot_end, loaded.entries) == ([b"x", b"y"], 40, [(40, b"z")])
    with pytest.raises(CorruptMetadataLogError):
        store.install_snapshot(SnapshotId(50, 0), data[:-1])


def test_time_retention_runs_between_snapshots_on_a_quiet_log(tmp_path: Path) -> None:
    store_now = [int(time.time() * 1000)]
    store = FileMetadataLogStore(tmp_path, now_ms=lambda: store_now[0])
    clock = ManualClock()
    snapshots = MetadataSnapshots(server_config(metadata_log_max_record_bytes_between_snapshots="1",
                                                metadata_max_retention_ms="10000"), store, clock)
    snapshots.load()
    image = EMPTY_IMAGE.apply([ClusterIdRecord("c")], 0)
    store.append([encode(ClusterIdRecord("c"))])
    snapshots.appended([b"x"])
    assert asyncio.run(snapshots.snapshot_if_due(image)) == 0  # a snapshot at 1; the segment below it is new
    clock.advance(1000)
    assert asyncio.run(snapshots.snapshot_if_due(image)) is None  # nothing appended, retention checked just now
    store_now[0] += 20_000
    clock.advance(RETENTION_CHECK_MS)
    assert asyncio.run(snapshots.snapshot_if_due(image)) == 1  # the segment below the snapshot aged out
    assert _names(tmp_path) == ["00000000000000000001-0000000000.checkpoint", "00000000000000000001.log"]


def test_retention_deletes_the_oldest_segments_wholly_below_the_latest_snapshot_while_a_limit_is_passed() -> None:
    segments = [SegmentInfo(0, 100, 1_000), SegmentInfo(10, 100, 5_000), SegmentInfo(20, 100, 9_000),
                SegmentInfo(30, 0, 9_500)]

    def past(snapshot_end: int, max_bytes: int, max_ms: int) -> int:
        return segments_past_retention(segments, 50, snapshot_end, max_bytes, max_ms, now_ms=10_000)

    assert past(30, -1, -1) == 0  # no limit
    assert past(30, 250, -1) == 1  # 350 bytes: the oldest goes, and the 250 left are not past 250
    assert past(30, 249, -1) == 2
    assert past(30, 0, -1) == 3  # everything below the snapshot; never the active segment
    assert past(15, 0, -1) == 1  # the segment from 10 holds offsets past the snapshot's end
    assert past(30, -1, 6_000) == 1  # only the segment last written 9 s ago is past 6 s
    assert past(30, 10**9, 0) == 3


def _batches(store: FileMetadataLogStore) -> list[tuple[int, int, int]]:
    """`(base offset, last offset, partition leader epoch)` of every batch in every segment,
    each segment checked to hold only whole, CRC-valid batches."""
    out: list[tuple[int, int, int]] = []
    for path in sorted((store.path.parent).glob("*.log")):
        data = path.read_bytes()
        n_valid, headers = valid_prefix(data)
        assert n_valid == len(data), f"torn bytes in {path.name}"
        out.extend((h.base_offset, h.last_offset, h.partition_leader_epoch) for h in headers)
    return out


def _epochs_0_0_3_3_5(tmp_path: Path) -> FileMetadataLogStore:
    """Offsets 0-1 of epoch 0, 2-3 of epoch 3, 4-5 of epoch 5."""
    store = FileMetadataLogStore(tmp_path, now_ms=lambda: 1000)
    store.load()
    assert store.append([b"a"], epoch=0) == 0
    assert store.append([b"b"]) == 1
    assert store.append([b"c", b"d"], epoch=3) == 3
    assert store.append([b"e", b"f"], epoch=5) == 5
    return store


def test_epochs_survive_a_reopen(tmp_path: Path) -> None:
    _epochs_0_0_3_3_5(tmp_path)
    store = FileMetadataLogStore(tmp_path)
    assert store.load().entries == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d"), (4, b"e"), (5, b"f")]
    assert _batches(store) == [(0, 0, 0), (1, 1, 0), (2, 3, 3), (4, 5, 5)]
    assert store.log_end_offset == 6 and store.last_epoch == 5
    assert [store.epoch_of(offset) for offset in range(6)] == [0, 0, 3, 3, 5, 5]
    for outside in (-1, 6):
        with pytest.raises(ValueError):
            store.epoch_of(outside)
    assert {epoch: store.end_offset_for_epoch(epoch) for epoch in (-1, 0, 1, 3, 4, 5, 9)} == {
        -1: (-1, -1), 0: (0, 2), 1: (0, 2), 3: (3, 4), 4: (3, 4), 5: (5, 6), 9: (5, 6)}
    with pytest.raises(ValueError):
        store.append([b"g"], epoch=4)  # the log's epochs never go down
    assert store.append([b"g"], epoch=5) == 6 and store.end_offset_for_epoch(5) == (5, 7)


def test_an_epoch_below_the_first_known_has_no_end_offset(tmp_path: Path) -> None:
    store = FileMetadataLogStore(tmp_path)
    assert store.last_epoch == 0 and store.end_offset_for_epoch(0) == (-1, -1)  # nothing at all
    store.load()
    store.append([b"a"], epoch=2)
    assert store.end_offset_for_epoch(1) == (-1, -1)
    assert store.end_offset_for_epoch(2) == (2, 1)


def test_epoch_ranges_split_a_span_where_the_epoch_changes(tmp_path: Path) -> None:
    store = _epochs_0_0_3_3_5(tmp_path)
    assert store.epoch_ranges(0, 6) == [(0, 0, 2), (3, 2, 4), (5, 4, 6)]
    assert store.epoch_ranges(1, 5) == [(0, 1, 2), (3, 2, 4), (5, 4, 5)]
    assert store.epoch_ranges(2, 3) == [(3, 2, 3)]
    assert store.epoch_ranges(4, 4) == []
    with pytest.raises(ValueError):
        store.epoch_ranges(0, 7)


def test_truncating_inside_a_batch_keeps_its_records_below_the_offset(tmp_path: Path) -> None:
    store = FileMetadataLogStore(tmp_path, now_ms=lambda: 1000)
    store.load()
    store.append([b"a", b"b", b"c"], epoch=1)
    store.append([b"d", b"e"], epoch=2)
    store.truncate_to(2)
    assert store.log_end_offset == 2 and store.last_epoch == 1
    assert _batches(store) == [(0, 1, 1)]
    assert store.end_offset_for_epoch(2) == (1, 2)
    assert store.append([b"x"], epoch=4) == 2
    again = FileMetadataLogStore(tmp_path)
    assert again.load().entries == [(0, b"a"), (1, b"b"), (2, b"x")]
    assert [again.epoch_of(offset) for offset in range(3)] == [1, 1, 4]
    assert _batches(again) == [(0, 1, 1), (2, 2, 4)]


def test_truncating_at_a_batch_boundary_drops_whole_batches(tmp_path: Path) -> None:
    store = FileMetadataLogStore(tmp_path, now_ms=lambda: 1000)
    store.load()
    store.append([b"a", b"b"], epoch=0)
    store.append([b"c"], epoch=1)
    store.append([b"d"], epoch=2)
    size = store.path.stat().st_size
    store.truncate_to(4)  # at the log end
    store.truncate_to(9)
    assert store.log_end_offset == 4 and store.path.stat().st_size == size
    store.truncate_to(3)
    assert _batches(store) == [(0, 1, 0), (2, 2, 1)]
    assert store.last_epoch == 1 and store.epoch_ranges(0, 3) == [(0, 0, 2), (1, 2, 3)]
    store.truncate_to(0)  # no snapshot: the whole log may go
    assert _batches(store) == [] and store.log_end_offset == 0 and store.last_epoch == 0
    assert store.append([b"z"], epoch=3) == 0
    again = FileMetadataLogStore(tmp_path)
    assert again.load().entries == [(0, b"z")] and again.last_epoch == 3


def test_truncation_never_goes_below_the_snapshot_and_keeps_the_segment_it_rolled(tmp_path: Path) -> None:
    store = FileMetadataLogStore(tmp_path, now_ms=lambda: 1000)
    store.load()
    store.append([b"a", b"b"], epoch=1)
    store.write_snapshot(2, [b"s"])
    store.append([b"c", b"d"], epoch=2)
    store.append([b"e"], epoch=3)
    store.truncate_to(3)
    assert _batches(store) == [(0, 1, 1), (2, 2, 2)] and store.last_epoch == 2
    store.truncate_to(2)
    assert _names(tmp_path) == ["00000000000000000000.log", "00000000000000000002-0000000001.checkpoint",
                                "00000000000000000002.log"]
    assert store.path.name == "00000000000000000002.log" and store.path.stat().st_size == 0
    assert store.log_end_offset == 2 and store.last_epoch == 1 and store.end_offset_for_epoch(1) == (1, 2)
    with pytest.raises(ValueError):
        store.truncate_to(1)  # committed: in the snapshot
    assert store.log_end_offset == 2
    assert store.append([b"f"], epoch=4) == 2
    again = FileMetadataLogStore(tmp_path)
    loaded = again.load()
    assert (loaded.snapshot, loaded.snapshot_end) == ([b"s"], 2)
    assert loaded.entries == [(0, b"a"), (1, b"b"), (2, b"f")]
    assert [again.epoch_of(offset) for offset in range(3)] == [1, 1, 4]
    assert _batches(again) == [(0, 1, 1), (2, 2, 4)]


def test_truncation_deletes_the_segments_based_above_the_offset(tmp_path: Path) -> None:
    store = FileMetadataLogStore(tmp_path, now_ms=lambda: 1000)
    store.load()
    store.append([b"a", b"b"], epoch=1)
    store.write_snapshot(2, [b"s"])
    store.append([b"c", b"d"], epoch=2)
    store.write_snapshot(4, [b"t"])
    store.append([b"e"], epoch=3)
    # a segment above the latest snapshot: the one it rolled, once that snapshot is gone
    (tmp_path / "__cluster_metadata-0" / "00000000000000000004-0000000002.checkpoint").unlink()
    store = FileMetadataLogStore(tmp_path, now_ms=lambda: 1000)
    store.load()
    store.truncate_to(3)
    assert _names(tmp_path) == ["00000000000000000000.log", "00000000000000000002-0000000001.checkpoint",
                                "00000000000000000002.log"]
    assert _batches(store) == [(0, 1, 1), (2, 2, 2)]
    assert store.append([b"x"], epoch=5) == 3
    again = FileMetadataLogStore(tmp_path)
    assert again.load().entries == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"x")]
    assert [again.epoch_of(offset) for offset in range(4)] == [1, 1, 2, 5]


def test_a_snapshot_below_the_log_end_takes_that_records_epoch_and_does_not_roll(tmp_path: Path) -> None:
    store = FileMetadataLogStore(tmp_path, now_ms=lambda: 1000)
    store.load()
    store.append([b"a", b"b"], epoch=1)
    store.append([b"c"], epoch=2)
    store.write_snapshot(2, [b"s"])
    assert store.latest_snapshot == SnapshotId(2, 1)
    assert _names(tmp_path) == ["00000000000000000000.log", "00000000000000000002-0000000001.checkpoint"]
    store.write_snapshot(3, [b"t"])
    assert store.latest_snapshot == SnapshotId(3, 2)
    assert _names(tmp_path)[-2:] == ["00000000000000000003-0000000002.checkpoint", "00000000000000000003.log"]
    with pytest.raises(ValueError):
        store.write_snapshot(4, [b"u"])
    empty = FileMetadataLogStore(tmp_path / "empty")
    empty.load()
    empty.write_snapshot(0, [])
    assert empty.latest_snapshot == SnapshotId(0, 0)


def test_an_empty_log_above_a_snapshot_reports_the_snapshots_epoch(tmp_path: Path) -> None:
    store = FileMetadataLogStore(tmp_path)
    store.load()
    store.append([b"a"], epoch=1)
    store.install_snapshot(SnapshotId(40, 7), snapshot_bytes([b"x"], 0))
    for s in (store, FileMetadataLogStore(tmp_path)):
        s.load() if s is not store else None
        assert s.log_end_offset == 40 and s.last_epoch == 7 and s.epoch_of(39) == 7
        assert s.end_offset_for_epoch(7) == (7, 40) and s.end_offset_for_epoch(9) == (7, 40)
        assert s.end_offset_for_epoch(6) == (-1, -1)
        with pytest.raises(ValueError):
            s.epoch_of(38)
    assert store.append([b"b"], epoch=8) == 40
    assert store.epoch_ranges(39, 41) == [(7, 39, 40), (8, 40, 41)]
    assert store.end_offset_for_epoch(7) == (7, 40)


def test_retention_keeps_the_epoch_of_the_snapshots_last_record(tmp_path: Path) -> None:
    store = FileMetadataLogStore(tmp_path, now_ms=lambda: 1000)
    store.load()
    store.append([b"a"], epoch=1)
    store.append([b"b", b"c"], epoch=2)
    store.write_snapshot(3, [b"s"])
    assert store.enforce_retention(0, -1) == 3
    for s in (store, FileMetadataLogStore(tmp_path)):
        s.load() if s is not store else None
        assert s.log_start_offset == 3 and s.last_epoch == 2 and s.epoch_of(2) == 2
        assert s.end_offset_for_epoch(2) == (2, 3) and s.end_offset_for_epoch(1) == (-1, -1)


def test_the_election_state_round_trips_through_kafkas_quorum_state_file(tmp_path: Path) -> None:
    store = FileMetadataLogStore(tmp_path / "logs")
    assert store.read_election_state() is None  # before load, no directory yet
    store.write_election_state(ElectionState(2, leader_id=1))
    path = tmp_path / "logs" / "__cluster_metadata-0" / "quorum-state"
    assert path.read_text() == ('{"clusterId":"","leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,'
                                '"currentVoters":[],"data_version":0}')
    assert list(json.loads(path.read_text())) == ["clusterId", "leaderId", "leaderEpoch", "votedId",
                                                  "appliedOffset", "currentVoters", "data_version"]
    assert store.read_election_state() == ElectionState(2, 1, -1)
    store.write_election_state(ElectionState(3, voted_id=4))
    assert sorted(p.name for p in path.parent.iterdir()) == ["quorum-state"]
    again = FileMetadataLogStore(tmp_path / "logs")
    assert again.load().entries == []
    assert again.read_election_state() == ElectionState(3, -1, 4)


@pytest.mark.parametrize("content", [
    b"{not json", b"\xff\xfe", b"[]", b'{"leaderId":1,"leaderEpoch":2,"votedId":-1}',
    b'{"leaderId":1,"leaderEpoch":"2","votedId":-1,"data_version":0}',
    b'{"leaderId":1,"leaderEpoch":2,"votedId":-1,"data_version":7}',
    b'{"leaderId":1,"leaderEpoch":-2,"votedId":-1,"data_version":0}',
])
def test_a_corrupt_quorum_state_file_is_refused(tmp_path: Path, content: bytes) -> None:
    store = FileMetadataLogStore(tmp_path)
    store.load()
    (tmp_path / "__cluster_metadata-0" / "quorum-state").write_bytes(content)
    with pytest.raises(CorruptMetadataLogError) as info:
        store.read_election_state()
    assert "quorum-state" in str(info.value) and "\n" not in str(info.value)


def test_a_quorum_state_of_data_version_1_is_read(tmp_path: Path) -> None:
    store = FileMetadataLogStore(tmp_path)
    store.load()
    (tmp_path / "__cluster_metadata-0" / "quorum-state").write_text(
        '{"leaderId":-1,"leaderEpoch":5,"votedId":2,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}')
    assert store.read_election_state() == ElectionState(5, -1, 2)
