"""A log dir that fails under a running broker (KIP-858, JBOD): the broker takes that dir
offline and keeps serving its other dir; the controller, told by the broker's heartbeat, moves
the leaderships and ISR memberships of the replicas that were in the failed dir to the other
brokers, while an idempotent acks=all producer keeps writing; nothing acknowledged is lost.
kafka-python's DescribeLogDirs and `kmirror log-dirs` show the failed dir's error. Restarted
with the disk still failed, the broker starts without that dir; restarted with the disk
replaced (empty), it copies those replicas again and they rejoin their ISRs.
The failure is made as Kafka's own tests make it: the dir is replaced by a file, so the next
file the broker creates there (a segment roll) fails with ENOTDIR."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kmirror.testing.acked_writer import AckedWriter, assert_acked_mirrored_once
from kmirror.testing.kafka_clients import create_topic
from kmirror.testing.mirror_clusters import wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror

pytestmark = pytest.mark.integration

TOPIC = "jbod"
PARTITIONS = 6
KAFKA_STORAGE_ERROR = 56


def test_a_failed_log_dir_goes_offline_and_its_partitions_move_while_the_broker_serves_the_other(
        tmp_path: Path) -> None:
    from kafka import KafkaAdminClient

    base = tmp_path / "c"
    second = base / "node-1" / "data2"
    with LocalCluster(dir=base, port=free_port_block(3), nodes=3,
                      overrides={"log.segment.bytes": "60000", "min.insync.replicas": "2"},
                      per_broker=lambda n: {"log.dirs": f"{base / 'node-1' / 'data'},{second}"} if n == 1 else {}) as c:
        create_topic(c.bootstrap, TOPIC, partitions=PARTITIONS, replication_factor=3)
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap)
        writer = AckedWriter(c.bootstrap, "jbod", TOPIC, PARTITIONS, batch_size=16384)  # below log.segment.bytes
        writer.start()
        try:
            wait_until(lambda: len(writer.acked) >= 3000, "records acknowledged before the failure")
            in_second = sorted(int(d.name.rsplit("-", 1)[1]) for d in second.glob(f"{TOPIC}-*"))
            assert 0 < len(in_second) < PARTITIONS, in_second  # broker 1 holds replicas in both dirs

            def partitions() -> dict[int, dict[str, object]]:
                (topic,) = admin.describe_topics([TOPIC])
                return {p["partition_index"]: p for p in topic["partitions"]}

            # the controller knows which dir holds broker 1's replicas: nothing offline yet
            assert all(p["offline_replicas"] == [] and 1 in p["isr_nodes"] for p in partitions().values())
            second.rename(base / "node-1" / "failed-disk")  # in one step: the broker writes there meanwhile
            second.write_text("")  # the dir is now a file: the next file created there fails

            def moved() -> bool:
                now = partitions()
                return all(now[p]["leader_id"] != 1 and 1 not in now[p]["isr_nodes"] and now[p]["offline_replicas"] == [1]
                           for p in in_second)

            wait_until(moved, "replicas of the failed dir out of their ISRs and leaderships", timeout_s=60)
            after_failure = len(writer.acked)
            wait_until(lambda: len(writer.acked) >= after_failure + 2000, "records acknowledged after the failure")
        finally:
            writer.finish()

        assert not c.exited(1), "the broker halted instead of serving its other log dir"
        log = c.log_text(1)
        assert f"Stopping serving replicas in dir {second}" in log
        now = partitions()
        for p in set(range(PARTITIONS)) - set(in_second):  # the dir still online keeps its replicas in sync
            assert 1 in now[p]["isr_nodes"] and now[p]["offline_replicas"] == [], now[p]
        (broker,) = admin.describe_log_dirs(brokers=[1])
        errors = {d["log_dir"]: d["error_code"] for d in broker["log_dirs"]}
        assert errors == {str(base / "node-1" / "data"): 0, str(second): KAFKA_STORAGE_ERROR}
        out = kmirror("log-dirs", "--bootstrap-server", c.bootstrap, "--describe", "--broker-list", "1").stdout
        dirs = {d["logDir"]: d for d in json.loads(out.splitlines()[-1])["brokers"][0]["logDirs"]}
        assert dirs[str(second)] == {"partitions": [], "error": "org.apache.kafka.common.errors.KafkaStorageException",
                                     "logDir": str(second)}
        assert dirs[str(base / "node-1" / "data")]["error"] is None
        assert writer.failed == []
        assert_acked_mirrored_once(c.bootstrap, writer)

        # restarted with the disk still failed: broker 1 starts without that dir, its replicas
        # there stay offline, the others catch up and rejoin their ISRs
        c.kill9(1)
        c.start_node(1)
        assert f"Error while loading log dir {second}" in c.log_text(1)
        in_first = set(range(PARTITIONS)) - set(in_second)
        wait_until(lambda: all(1 in partitions()[p]["isr_nodes"] for p in in_first), "the online dir's replicas in sync")
        now = partitions()
        assert all(now[p]["offline_replicas"] == [1] and 1 not in now[p]["isr_nodes"] for p in in_second), now

        # the disk replaced (an empty dir, a new directory id): broker 1 copies those replicas
        # again from their leaders, names their new dir, and every replica is back in sync
        c.kill9(1)
        second.unlink()
        second.mkdir()
        c.start_node(1)
        wait_until(lambda: all(1 in p["isr_nodes"] and p["offline_replicas"] == [] for p in partitions().values()),
                   "every replica of broker 1 back in sync after the disk was replaced", timeout_s=60)
        (broker,) = admin.describe_log_dirs(brokers=[1])
        assert all(d["error_code"] == 0 for d in broker["log_dirs"])
        assert_acked_mirrored_once(c.bootstrap, writer)
        admin.close()

