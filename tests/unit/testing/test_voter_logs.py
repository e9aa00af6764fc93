"""The chaos check that the voters of a quorum hold the same metadata log, on real files."""

from __future__ import annotations

import uuid
from pathlib import Path

from kmirror.metadata.controller.features import bootstrap_records
from kmirror.metadata.records import RegisterBrokerRecord, encode
from kmirror.metadata.snapshot import snapshot_records
from kmirror.metadata.snapshot_service import snapshot_image
from kmirror.runtime.metadata_log import BROKER_METADATA_DIR, FileMetadataLogStore
from kmirror.testing.chaos_checks import metadata_images_agree, voter_logs_agree
from kmirror.testing.processes import LocalCluster


def write_log(node_dir: Path, batches: list[tuple[int, list[bytes]]]) -> FileMetadataLogStore:
    store = FileMetadataLogStore(node_dir / "data")
    store.load()
    for epoch, values in batches:
        store.append(values, epoch)
    return store


def test_voters_agree_only_on_the_same_records_of_the_same_epochs_and_the_same_end(tmp_path: Path) -> None:
    cluster = LocalCluster(dir=tmp_path, port=0, nodes=3, controllers=2)
    write_log(tmp_path / "node-3000", [(1, [b"a", b"b"]), (2, [b"c"])])
    write_log(tmp_path / "node-3001", [(1, [b"a", b"b"]), (2, [b"c"])])
    assert voter_logs_agree(cluster)
    write_log(tmp_path / "node-3001", [(2, [b"d"])])
    assert not voter_logs_agree(cluster)  # one ends further
    write_log(tmp_path / "node-3000", [(3, [b"d"])])
    assert not voter_logs_agree(cluster)  # the same bytes at offset 3, of another epoch


def test_a_voter_whose_log_a_snapshot_emptied_ends_where_its_new_segment_begins(tmp_path: Path) -> None:
    cluster = LocalCluster(dir=tmp_path, port=0, nodes=3, controllers=2)
    write_log(tmp_path / "node-3000", [(1, [b"a", b"b"]), (2, [b"c"])])
    emptied = write_log(tmp_path / "node-3001", [(1, [b"a", b"b"]), (2, [b"c", b"d"])])
    emptied.write_snapshot(4, [b"image"])
    emptied.enforce_retention(0, 0)
    assert not list((tmp_path / "node-3001" / "data" / "__cluster_metadata-0").glob("0*0.log"))
    assert not voter_logs_agree(cluster)  # 3000 ends at 3, 3001 at 4
    write_log(tmp_path / "node-3000", [(2, [b"d"])])
    assert voter_logs_agree(cluster)


def test_every_copy_of_the_metadata_loads_the_same_image_or_the_check_fails(tmp_path: Path) -> None:
    """A voter's snapshot is written from its image, a broker's replica replays the log: a
    snapshot that lacks a committed record (its log holds it) is told apart."""
    cluster = LocalCluster(dir=tmp_path, port=0, nodes=1, combined=True)
    records = [encode(r) for r in bootstrap_records("c1")]
    records.append(encode(RegisterBrokerRecord(1, uuid.UUID(int=1), 5, (), None, True)))
    node = tmp_path / "node-1" / "data"
    voter = FileMetadataLogStore(node)
    voter.load()
    voter.append(records, 1)
    replica = FileMetadataLogStore(node, directory=BROKER_METADATA_DIR)
    replica.load()
    replica.append(records, 1)
    assert metadata_images_agree(cluster)
    # the voter's snapshot at the log end, written from an image that lost the registration
    voter.write_snapshot(len(records), [encode(r) for r in snapshot_records(snapshot_image(records[:-1], len(records)))])
    voter.enforce_retention(0, 0)
    assert not metadata_images_agree(cluster)
