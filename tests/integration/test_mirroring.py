"""KIP-1279 end to end with real processes: a source and a destination cluster, records
produced with every compression type, keys and headers; `kmirror mirrors` copies them; every
destination batch is byte-identical at the same offset, with the same topic id; the mirror
topic refuses Produce with READ_ONLY_TOPIC; `--describe` shows lag 0 while MIRRORING; failover
with `--remove --topic '.*'` stops the partitions and makes the topic writable after a
MIRROR_PID_RESET control record, in a leader epoch above every mirrored one."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer

from kmirror.kip1279.errors import MirrorError
from kmirror.records.control import ControlType, read_control_type
from kmirror.testing.kafka_clients import end_offsets, produce_delivered, produce_refused
from kmirror.testing.mirror_clusters import create_mirror, describe, topic_id, wait_until
from kmirror.testing.processes import LocalCluster, kmirror
from kmirror.testing.segments import headers, log_batches

pytestmark = pytest.mark.integration

TOPIC = "orders"
PARTITIONS = 2
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def produce_everything(bootstrap: str) -> None:
    """Several producers (one per codec, idempotent), keys and headers, both partitions."""
    for codec in CODECS:
        producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "enable.idempotence": True,
                             "linger.ms": 20})
        for i in range(60):
            producer.produce(TOPIC, key=f"{codec}-{i % 7}".encode(), value=f"{codec} value {i} ".encode() * 8,
                             partition=i % PARTITIONS, headers=[("codec", codec.encode()), ("i", str(i).encode())])
        assert producer.flush(30) == 0


def test_mirror_copies_byte_identical_batches_refuses_produce_and_fails_over(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    source, dest = clusters
    kmirror("topics", "--bootstrap-server", source.bootstrap, "--create", "--topic", TOPIC,
            "--partitions", str(PARTITIONS), "--replication-factor", "1")
    produce_everything(source.bootstrap)
    source_ends = end_offsets(source.bootstrap, TOPIC, PARTITIONS)
    assert all(end > 0 for end in source_ends)

    create_mirror(dest, source, "m", TOPIC, tmp_path / "mirror.properties")

    wait_until(lambda: end_offsets(dest.bootstrap, TOPIC, PARTITIONS) == source_ends, "the destination to reach the source log end")
    assert topic_id(dest.bootstrap, TOPIC) == topic_id(source.bootstrap, TOPIC)
    for p in range(PARTITIONS):
        src_batches = log_batches(source, TOPIC, p)
        assert len(src_batches) >= len(CODECS)
        wait_until(lambda p=p: len(log_batches(dest, TOPIC, p)) == len(log_batches(source, TOPIC, p)),
                   f"partition {p} segment bytes")
        assert log_batches(dest, TOPIC, p) == src_batches  # same offsets, same bytes

    # A mirror topic is read-only.
    # READ_ONLY_TOPIC (KIP-1279 code 135; librdkafka has no name for it yet)
    assert produce_refused(dest.bootstrap, TOPIC) == MirrorError.READ_ONLY_TOPIC == 135

    # --describe: caught up, lag 0, MIRRORING.
    rows = describe(dest.bootstrap)
    assert sorted(rows) == [("m", TOPIC, p) for p in range(PARTITIONS)]
    for p in range(PARTITIONS):
        assert rows[("m", TOPIC, p)] == (source_ends[p], source_ends[p], 0, "MIRRORING")
    mirrored = {p: log_batches(dest, TOPIC, p) for p in range(PARTITIONS)}

    # Failover: every mirror topic leaves the mirror; partitions go STOPPING -> STOPPED.
    out = kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--remove", "--topic", ".*").stdout
    assert f"Removed 1 topic(s) from mirror m: [{TOPIC}]" in out
    wait_until(lambda: {row[3] for row in describe(dest.bootstrap).values()} == {"STOPPED"}, "partitions STOPPED")

    # The topic is writable: an idempotent producer succeeds at sequence 0.
    delivered = produce_delivered({"bootstrap.servers": dest.bootstrap, "enable.idempotence": True}, TOPIC,
                                  [(p, b"after", b"written at the destination") for p in range(PARTITIONS)])
    # The last mirrored offset is source_end - 1; MIRROR_PID_RESET takes source_end; the
    # first record produced after failover lands at source_end + 1.
    assert sorted(delivered) == [(p, source_ends[p] + 1) for p in range(PARTITIONS)]
    assert end_offsets(dest.bootstrap, TOPIC, PARTITIONS) == [end + 2 for end in source_ends]

    mirrored_pids = {h.producer_id for p in range(PARTITIONS) for h in headers(mirrored[p]) if h.producer_id >= 0}
    for p in range(PARTITIONS):
        after = log_batches(dest, TOPIC, p)
        assert after[:len(mirrored[p])] == mirrored[p]  # the mirrored prefix is untouched
        assert after[:len(mirrored[p])] == log_batches(source, TOPIC, p)
        reset, new = headers(after[len(mirrored[p]):])
        max_mirrored_epoch = max(h.partition_leader_epoch for h in headers(mirrored[p]))
        # MIRROR_PID_RESET: one control record (type 7) at the source log end.
        assert reset.is_control and reset.base_offset == source_ends[p] and reset.records_count == 1
        assert read_control_type(after[len(mirrored[p])][1]) == ControlType.MIRROR_PID_RESET == 7
        # The leader epoch was bumped above every mirrored epoch before the first write.
        assert reset.partition_leader_epoch > max_mirrored_epoch
        assert new.partition_leader_epoch >= reset.partition_leader_epoch
        # The producer starts fresh at sequence 0, with a producer id above every mirrored
        # one (KIP-1279: "separate from previously mirrored IDs"): the failover fenced the
        # ids up to the greatest mirrored one (BumpLeaderEpochs' MinProducerId).
        assert new.base_offset == source_ends[p] + 1 and new.base_sequence == 0 and new.producer_epoch == 0
        assert not new.is_control and new.producer_id > max(mirrored_pids)
    assert len(mirrored_pids) == len(CODECS)
