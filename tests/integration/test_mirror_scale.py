"""Failover of a wide mirror: 1,000 partitions on one destination node.

The control plane batches the partitions of a pass (state writes, epoch bumps); every
partition must still end exactly as a lone one does: STOPPED, its mirrored batches
untouched, one MIRROR_PID_RESET at the source log end in a leader epoch above every
mirrored one, then writable by an idempotent producer right after it."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer

from kmirror.records.control import ControlType, read_control_type
from kmirror.testing.kafka_clients import end_offsets, produce_delivered
from kmirror.testing.mirror_clusters import create_mirror, describe, wait_until
from kmirror.testing.processes import LocalCluster, kmirror
from kmirror.testing.segments import headers, log_batches

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC = "wide"
PARTITIONS = 1000
RECORDS = 2
WAIT_S = 600


def test_failover_of_1000_partitions_resets_producers_and_makes_every_partition_writable(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    source, dest = clusters
    kmirror("topics", "--bootstrap-server", source.bootstrap, "--create", "--topic", TOPIC,
            "--partitions", str(PARTITIONS), "--replication-factor", "1")
    producer = Producer({"bootstrap.servers": source.bootstrap, "acks": "all", "enable.idempotence": True})
    for p in range(PARTITIONS):
        for i in range(RECORDS):
            producer.produce(TOPIC, value=b"source %d/%d" % (p, i), partition=p)
    assert producer.flush(120) == 0
    ends = end_offsets(source.bootstrap, TOPIC, PARTITIONS)
    assert all(end > 0 for end in ends)

    create_mirror(dest, source, "m", TOPIC, tmp_path / "mirror.properties")
    wait_until(lambda: {p: row for (_, _, p), row in describe(dest.bootstrap).items()}
               == {p: (ends[p], ends[p], 0, "MIRRORING") for p in range(PARTITIONS)},
               "every partition MIRRORING with lag 0", timeout_s=WAIT_S)
    mirrored = {p: log_batches(dest, TOPIC, p) for p in range(PARTITIONS)}
    for p in range(PARTITIONS):
        assert mirrored[p] == log_batches(source, TOPIC, p)

    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--remove", "--topic", TOPIC)
    wait_until(lambda: [row[3] for row in describe(dest.bootstrap).values()] == ["STOPPED"] * PARTITIONS,
               "every partition STOPPED", timeout_s=WAIT_S)

    for p in range(PARTITIONS):
        after = log_batches(dest, TOPIC, p)
        assert after[:len(mirrored[p])] == mirrored[p], p
        assert len(after) == len(mirrored[p]) + 1, p
        reset_offset, reset_raw = after[-1]
        assert reset_offset == ends[p] and read_control_type(reset_raw) is ControlType.MIRROR_PID_RESET, p
        epochs = [h.partition_leader_epoch for h in headers(after)]
        assert epochs[-1] > max(epochs[:-1]), (p, epochs)

    delivered = produce_delivered({"bootstrap.servers": dest.bootstrap, "enable.idempotence": True}, TOPIC,
                                  [(p, None, b"written at the destination") for p in range(PARTITIONS)])
    assert sorted(delivered) == [(p, ends[p] + 1) for p in range(PARTITIONS)]
