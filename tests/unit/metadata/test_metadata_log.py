import asyncio
from pathlib import Path

import pytest

from kmirror.metadata.controller.topics import CreatableTopic
from kmirror.metadata.controller_service import MetadataService
from kmirror.ports import ManualClock
from kmirror.records.batch import iter_batches
from kmirror.runtime.metadata_log import FileMetadataLogStore, MetaPropertiesError, ensure_meta_properties
from kmirror.testing.metadata import seeded_rng, server_config


def test_append_and_read_back(tmp_path: Path) -> None:
    store = FileMetadataLogStore(tmp_path, now_ms=lambda: 1000)
    assert store.read_all() == []
    assert store.append([b"a", b"b"]) == 1
    assert store.append([b"c"]) == 2
    data = store.path.read_bytes()
    assert [h.base_offset for _, h in iter_batches(data)] == [0, 2]
    again = FileMetadataLogStore(tmp_path)
    assert again.read_all() == [(0, b"a"), (1, b"b"), (2, b"c")]
    assert again.append([b"d"]) == 3


def test_torn_tail_is_truncated(tmp_path: Path) -> None:
    store = FileMetadataLogStore(tmp_path, now_ms=lambda: 1000)
    store.read_all()
    store.append([b"a"])
    store.append([b"b"])
    full = store.path.read_bytes()
    store.path.write_bytes(full[:-3])
    again = FileMetadataLogStore(tmp_path)
    assert again.read_all() == [(0, b"a")]
    assert again.append([b"z"]) == 1
    assert FileMetadataLogStore(tmp_path).read_all() == [(0, b"a"), (1, b"z")]


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
