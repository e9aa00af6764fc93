import asyncio
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
from kmirror.records.batch import iter_batches
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
        store.write_snapshot(1, [b"x"])  # a snapshot is of the whole log
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
