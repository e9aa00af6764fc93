"""Mirrored transactional data end to end with real processes.

The source is a kmirror cluster. Neither foreign source can hold this data: the librdkafka
mock cluster writes no COMMIT/ABORT markers and keeps no LSO (a read_committed consumer
sees an open transaction), and Tansu keeps an LSO but writes no markers either. To control
the exact layout (interleaved and open transactions at known offsets), the source partition
is written offline, as a transaction coordinator and producers would have written it (data batches of committed, aborted,
interleaved and open transactions, their control markers, plain records), between a
kill -9 and a restart of the source broker, which then recovers it (and rebuilds its
transaction index) and serves it to the mirror over Fetch with read_committed.

Proven: the destination's batches (markers included) and its `.txnindex` are identical to
the source's, at the same offsets, up to the source LSO, and nothing of the open
transaction is copied; confluent-kafka read_committed consumers of both clusters see the
same committed + non-transactional records (up to the destination's LSO), a read_uncommitted
one sees the aborted records too; failover truncates the destination to its LSO (a
transaction whose commit was not copied is open there), writes MIRROR_PID_RESET and a new
producer writes after it."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer

from kmirror.log.config import LogConfig
from kmirror.log.log import Log
from kmirror.records.batch import iter_batches
from kmirror.records.control import ControlType, read_control_type
from kmirror.runtime.node import SystemClock
from kmirror.runtime.os_fs import OsFileSystem
from kmirror.testing.kafka_clients import consume_to_end, produce_delivered, watermarks
from kmirror.testing.mirror_clusters import (
    create_mirror,
    partition_states,
    wait_mirror_fetch_rounds,
    wait_until,
)
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror
from kmirror.testing.segments import log_batches, partition_dir, txn_index_bytes
from kmirror.testing.transactions import TxnWriter
from kmirror.types import TopicPartition as KTopicPartition

pytestmark = pytest.mark.integration

TOPIC = "payments"


@pytest.fixture
def dest_overrides() -> dict[str, str]:
    return {"metrics.port": str(free_port_block())}  # the mirror's Fetch requests, counted


def consume(bootstrap: str, isolation: str, until_offset: int) -> list[tuple[int, bytes]]:
    return consume_to_end(bootstrap, TOPIC, isolation, until_offset=until_offset)


def test_transactions_mirror_byte_identical_read_committed_matches_and_failover_truncates_to_the_lso(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    source, dest = clusters
    kmirror("topics", "--bootstrap-server", source.bootstrap, "--create", "--topic", TOPIC,
            "--partitions", "1", "--replication-factor", "1")
    producer = Producer({"bootstrap.servers": source.bootstrap, "linger.ms": 0})
    for i in range(3):
        producer.produce(TOPIC, key=b"k", value=b"live-%d" % i, partition=0)
        assert producer.flush(30) == 0
    wait_until(lambda: watermarks(source.bootstrap, TOPIC, 0, "read_uncommitted")[1] == 3, "3 live records")

    # Source broker stopped; its partition gets the transactional history.
    source.kill9(1)
    log = Log.open(OsFileSystem(), str(partition_dir(source, TOPIC, 0)), KTopicPartition(TOPIC, 0), LogConfig(),
                   SystemClock(), recovery_point=0)
    assert log.log_end_offset == 3
    w = TxnWriter(log)
    committed = [w.data(5001, b"c1-a", b"c1-b")]
    w.plain(b"p1")
    committed += [w.data(5001, b"c1-c")]
    w.end(ControlType.COMMIT, 5001)
    aborted = [w.data(5002, b"x1")]
    w.plain(b"p2")
    aborted += [w.data(5002, b"x2")]
    w.end(ControlType.ABORT, 5002)
    aborted += [w.data(5003, b"y1")]
    committed += [w.data(5004, b"z1")]
    aborted += [w.data(5003, b"y2")]
    w.end(ControlType.ABORT, 5003)
    w.end(ControlType.COMMIT, 5004)
    w.plain(b"p3")
    late_commit = w.data(5005, b"a1")       # committed only after the open transaction starts
    w.plain(b"p4")
    open_txn = w.data(5006, b"b1")          # never ends: the source LSO stays here
    w.plain(b"p5")
    w.end(ControlType.COMMIT, 5005)
    w.plain(b"p6")
    source_end = log.log_end_offset
    log.close()
    source.start_node(1)

    wait_until(lambda: watermarks(source.bootstrap, TOPIC, 0, "read_uncommitted")[1] == source_end, "the source HW")
    assert watermarks(source.bootstrap, TOPIC, 0, "read_committed")[1] == open_txn  # the source LSO

    create_mirror(dest, source, "m", TOPIC, tmp_path / "mirror.properties")

    # Copied up to the source LSO, byte for byte, markers included; the open transaction
    # (and everything after it) stays behind.
    source_below_lso = [(o, raw) for o, raw in log_batches(source, TOPIC, 0) if o < open_txn]
    wait_until(lambda: watermarks(dest.bootstrap, TOPIC, 0, "read_uncommitted")[1] == open_txn, "the destination HW")
    wait_until(lambda: log_batches(dest, TOPIC, 0) == source_below_lso, "destination batches")
    # three more mirror fetches at the source LSO: a mirror copying past it would have
    wait_mirror_fetch_rounds(int(dest.overrides["metrics.port"]), "m")
    assert log_batches(dest, TOPIC, 0) == source_below_lso
    markers = [o for o, raw in source_below_lso if next(iter_batches(raw))[1].is_control]
    assert len(markers) == 4
    # The transaction index: written by the destination as it appended the mirrored
    # markers, identical to the one the source rebuilt on recovery (Kafka's 34-byte entries).
    assert len(txn_index_bytes(source, TOPIC, 0)) == 2 * 34
    assert txn_index_bytes(dest, TOPIC, 0) == txn_index_bytes(source, TOPIC, 0)

    # On the destination pid 5005's commit is missing: its transaction is open, the LSO is at it.
    assert watermarks(dest.bootstrap, TOPIC, 0, "read_committed")[1] == late_commit
    dest_committed = consume(dest.bootstrap, "read_committed", late_commit)
    source_committed = consume(source.bootstrap, "read_committed", late_commit)
    expected = [(o, v) for o, v in sorted(w.values.items()) if o < late_commit and o not in aborted]
    assert dest_committed == source_committed == [
        *[(o, b"live-%d" % o) for o in range(3)], *[(o, v) for o, v in expected if o >= 3]]
    assert {o for o, _ in dest_committed} >= set(committed)
    uncommitted = consume(dest.bootstrap, "read_uncommitted", open_txn)
    assert {o for o, _ in uncommitted} >= set(aborted)
    assert uncommitted == [*[(o, b"live-%d" % o) for o in range(3)],
                           *[(o, v) for o, v in sorted(w.values.items()) if 3 <= o < open_txn]]

    # Failover: STOPPING truncates to the destination LSO (late_commit), then MIRROR_PID_RESET.
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--remove", "--topic", ".*")
    wait_until(lambda: set(partition_states(dest.bootstrap, TOPIC).values()) == {"STOPPED"}, "the partition STOPPED")
    after = log_batches(dest, TOPIC, 0)
    assert after[:-1] == [(o, raw) for o, raw in source_below_lso if o < late_commit]
    reset_offset, reset_raw = after[-1]
    assert reset_offset == late_commit and read_control_type(reset_raw) is ControlType.MIRROR_PID_RESET

    delivered = produce_delivered({"bootstrap.servers": dest.bootstrap, "enable.idempotence": True}, TOPIC,
                                  [(0, b"k", b"after failover")])
    assert delivered == [(0, late_commit + 1)]
    assert consume(dest.bootstrap, "read_committed", late_commit + 2)[-1] == (late_commit + 1, b"after failover")
