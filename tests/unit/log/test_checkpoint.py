import uuid

import pytest

from kmirror.log.checkpoint import (
    CorruptCheckpointError,
    LeaderEpochCheckpoint,
    OffsetCheckpoint,
)
from kmirror.log.epoch_cache import EpochCache, EpochEntry
from kmirror.log.partition_metadata import (
    PartitionMetadataFile,
    topic_id_from_string,
    topic_id_to_string,
)
from kmirror.testing.memory_fs import MemoryFileSystem
from kmirror.types import TopicPartition


def _fs():
    fs = MemoryFileSystem()
    fs.mkdirs("/logs/t-0")
    return fs


def test_leader_epoch_checkpoint_text_is_kafkas():
    fs = _fs()
    cp = LeaderEpochCheckpoint(fs, "/logs/t-0")
    cp.write(EpochCache([EpochEntry(0, 0), EpochEntry(4, 120)]))
    assert fs.read("/logs/t-0/leader-epoch-checkpoint", 0, 100) == b"0\n2\n0 0\n4 120\n"
    assert cp.read().entries == [EpochEntry(0, 0), EpochEntry(4, 120)]
    assert not fs.exists("/logs/t-0/leader-epoch-checkpoint.tmp")
    assert LeaderEpochCheckpoint(fs, "/logs/other").read() == EpochCache()


def test_offset_checkpoint_text_is_kafkas():
    fs = _fs()
    cp = OffsetCheckpoint(fs, "/logs", "recovery-point-offset-checkpoint")
    cp.write({TopicPartition("b", 1): 7, TopicPartition("a", 0): 42})
    assert fs.read(cp.path, 0, 100) == b"0\n2\na 0 42\nb 1 7\n"
    assert cp.read() == {TopicPartition("a", 0): 42, TopicPartition("b", 1): 7}


@pytest.mark.parametrize("text", [b"", b"1\n0\n", b"0\n2\na 0 1\n", b"0\n1\na x 1\n"])
def test_corrupt_checkpoints_raise(text):
    fs = _fs()
    fs.write_file("/logs/log-start-offset-checkpoint", text)
    with pytest.raises(CorruptCheckpointError):
        OffsetCheckpoint(fs, "/logs", "log-start-offset-checkpoint").read()


def test_partition_metadata_file():
    fs = _fs()
    topic_id = uuid.UUID("5f6a4e3c-1b2d-4e8f-9a0b-1c2d3e4f5a6b")
    text = topic_id_to_string(topic_id)
    assert len(text) == 22 and "=" not in text
    assert topic_id_from_string(text) == topic_id
    pm = PartitionMetadataFile(fs, "/logs/t-0")
    assert pm.read() is None
    pm.write_unsynced(topic_id, new_dir=True)
    assert pm.dirty and fs.unflushed_bytes(pm.path) > 0
    pm.maybe_flush()
    assert not pm.dirty and fs.unflushed_bytes(pm.path) == 0
    assert fs.read(pm.path, 0, 100) == f"version: 0\ntopic_id: {text}\n".encode()
    assert pm.read() == topic_id
