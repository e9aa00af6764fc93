"""The chaos check that the voters of a quorum hold the same metadata log, on real files."""

from __future__ import annotations

from pathlib import Path

from kmirror.runtime.metadata_log import FileMetadataLogStore
from kmirror.testing.chaos_checks import voter_logs_agree
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
