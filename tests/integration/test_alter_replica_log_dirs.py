"""Moving replicas between a node's log dirs (AlterReplicaLogDirs, KIP-113) with kafka-python's
admin client, while a producer writes: the log is copied batch for batch to the destination,
takes the current one's place, and holds every acknowledged record at its offset with the
same bytes; the node restarts on the moved log. A cordoned destination, an unknown one and an
unknown partition are refused with Kafka's errors. DescribeLogDirs shows the move as a future
replica until it is done."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from kmirror.records.batch import iter_batches
from kmirror.testing.kafka_clients import consume_values, create_topic
from kmirror.testing.mirror_clusters import wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror

pytestmark = pytest.mark.integration


def batches_in(partition_dir: Path) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    for path in sorted(partition_dir.glob("*.log")):
        raw = path.read_bytes()
        out.extend((h.base_offset, raw[pos:pos + h.size]) for pos, h in iter_batches(raw))
    return out


def replicas(admin, topic: str) -> list[tuple[int, str, bool]]:
    """(partition, log dir, is future) of every replica of `topic` DescribeLogDirs lists."""
    (broker,) = admin.describe_log_dirs()
    return sorted((p["partition_index"], d["log_dir"], p["is_future_key"])
                  for d in broker["log_dirs"] for t in d["topics"] if t["name"] == topic for p in t["partitions"])


def test_replicas_move_to_another_log_dir_while_written(tmp_path: Path) -> None:
    from kafka import KafkaAdminClient, errors

    node_dir = tmp_path / "one" / "node-1"
    first, second = str(node_dir / "data"), str(node_dir / "data2")
    with LocalCluster(dir=tmp_path / "one", port=free_port_block(), overrides={
            "log.dirs": f"{first},{second}", "log.segment.bytes": "200000"}) as c:
        create_topic(c.bootstrap, "moving", partitions=2)
        acked: list[tuple[int, int, bytes]] = []
        stop = threading.Event()

        def write() -> None:
            producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "compression.type": "lz4",
                                 "linger.ms": 5})
            n = 0
            while not stop.is_set() or n < 40_000:
                value = f"record-{n:06d}-".encode() + os.urandom(400)  # incompressible: a log of some MB
                producer.produce("moving", value=value, partition=n % 2, on_delivery=lambda err, msg: acked.append(
                    (msg.partition(), msg.offset(), msg.value())) if err is None else None)
                n += 1
                if n % 1000 == 0:
                    producer.flush(30)
            producer.flush(30)

        writer = threading.Thread(target=write)
        writer.start()
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap)
        try:
            wait_until(lambda: len(acked) >= 20_000, "records acknowledged before the move")
            before = {p: d for p, d, _ in replicas(admin, "moving")}
            target = {p: (second if d == first else first) for p, d in before.items()}
            prefix = {p: batches_in(Path(d) / f"moving-{p}")[:-1] for p, d in before.items()}
            answered = admin.alter_replica_log_dirs({("moving", p, 1): d for p, d in target.items()} | {
                ("moving", 7, 1): first, ("nope", 0, 1): first})
            assert {(r.topic, r.partition): e for r, e in answered.items()} == {
                ("moving", 0): errors.NoError, ("moving", 1): errors.NoError,
                ("moving", 7): errors.ReplicaNotAvailableError, ("nope", 0): errors.ReplicaNotAvailableError}
            (unknown,) = admin.alter_replica_log_dirs({("moving", 0, 1): "/not/a/log/dir"}).values()
            assert unknown is errors.LogDirNotFoundError
            wait_until(lambda: replicas(admin, "moving") == sorted((p, d, False) for p, d in target.items()),
                       "both replicas in their new log dirs", timeout_s=120)
        finally:
            stop.set()
            writer.join()
            admin.close()
        assert not list(Path(first).glob("*-future")) and not list(Path(second).glob("*-future"))
        assert not any((Path(before[p]) / f"moving-{p}").exists() for p in target)
        moved = {p: batches_in(Path(d) / f"moving-{p}") for p, d in target.items()}
        for p in target:  # what was there before the move is there, batch for batch, byte for byte
            assert len(prefix[p]) > 10 and moved[p][:len(prefix[p])] == prefix[p]

        by_partition: dict[int, dict[int, bytes]] = {0: {}, 1: {}}
        for p, offset, value in acked:
            by_partition[p][offset] = value
        assert all(sorted(r) == list(range(len(r))) for r in by_partition.values())  # no offset lost or twice
        consumer = {"bootstrap.servers": c.bootstrap}
        assert sorted(consume_values(consumer, "moving", len(acked), "g1")) == sorted(v for _, _, v in acked)

        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap)
        try:  # a cordoned log dir takes no replica (KIP-1066)
            cordon = AdminClient({"bootstrap.servers": c.bootstrap})
            resource = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
                ConfigEntry("cordoned.log.dirs", before[0], incremental_operation=AlterConfigOpType.SET)])
            cordon.incremental_alter_configs([resource])[resource].result(30)
            (refused,) = admin.alter_replica_log_dirs({("moving", 0, 1): before[0]}).values()
            assert refused is errors.InvalidReplicationAssignmentError  # INVALID_REPLICA_ASSIGNMENT
        finally:
            admin.close()

        c.kill9()
        c.start_node(1)  # the moved logs load where they now are, byte for byte
        for p, d in target.items():
            assert batches_in(Path(d) / f"moving-{p}") == moved[p]
        assert sorted(consume_values(consumer, "moving", len(acked), "g2")) == sorted(v for _, _, v in acked)


def test_reassign_partitions_moves_a_replica_to_the_log_dir_its_json_names(tmp_path: Path) -> None:
    node_dir = tmp_path / "one" / "node-1"
    first, second = str(node_dir / "data"), str(node_dir / "data2")
    with LocalCluster(dir=tmp_path / "one", port=free_port_block(), overrides={"log.dirs": f"{first},{second}"}) as c:
        create_topic(c.bootstrap, "placed", partitions=1)
        (current,) = [d for d in (first, second) if (Path(d) / "placed-0").exists()]
        target = second if current == first else first
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "placed", "partition": 0, "replicas": [1], "log_dirs": [target]}]}))
        out = kmirror("reassign-partitions", "--bootstrap-server", c.bootstrap, "--execute",
                      "--reassignment-json-file", str(plan), "--replica-alter-log-dirs-throttle", "100000000").stdout
        assert "Successfully started log directory move for: placed-0-1" in out
        assert "The replica-alter-dir throttle limit was set to 100000000 B/s" in out

        def verified() -> bool:
            return "Reassignment of replica placed-0-1 completed successfully." in kmirror(
                "reassign-partitions", "--bootstrap-server", c.bootstrap, "--verify",
                "--reassignment-json-file", str(plan)).stdout
        wait_until(verified, "the replica in its new log dir")
        broker = ConfigResource(ResourceType.BROKER, "1")
        configs = AdminClient({"bootstrap.servers": c.bootstrap})
        rate = configs.describe_configs([broker])[broker].result(30)["replica.alter.log.dirs.io.max.bytes.per.second"]
        assert rate.source != ConfigSource.DYNAMIC_BROKER_CONFIG.value  # --verify removed the throttle
        assert (Path(target) / "placed-0").is_dir() and not (Path(current) / "placed-0").exists()
        described = json.loads(kmirror("log-dirs", "--bootstrap-server", c.bootstrap, "--describe",
                                       "--topic-list", "placed").stdout.splitlines()[-1])
        (broker,) = described["brokers"]
        assert {d["logDir"]: [(p["partition"], p["isFuture"]) for p in d["partitions"]] for d in broker["logDirs"]} \
            == {target: [("placed-0", False)], current: []}


def test_a_throttled_move_goes_on_after_a_kill_9(tmp_path: Path) -> None:
    """replica.alter.log.dirs.io.max.bytes.per.second holds the copy back; a node killed
    mid-move takes the move on from its future log after the restart."""
    from kafka import KafkaAdminClient

    node_dir = tmp_path / "one" / "node-1"
    first, second = str(node_dir / "data"), str(node_dir / "data2")
    with LocalCluster(dir=tmp_path / "one", port=free_port_block(), overrides={"log.dirs": f"{first},{second}"}) as c:
        create_topic(c.bootstrap, "slow", partitions=1)
        producer = Producer({"bootstrap.servers": c.bootstrap, "linger.ms": 20, "compression.type": "none"})
        for i in range(8000):  # about 8 MB
            producer.produce("slow", value=f"{i:06d}".encode() + os.urandom(1000))
            if i % 1000 == 0:
                producer.flush(30)
        assert producer.flush(30) == 0
        (current,) = [d for d in (first, second) if (Path(d) / "slow-0").exists()]
        target = second if current == first else first
        before = batches_in(Path(current) / "slow-0")
        rate = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[ConfigEntry(
            "replica.alter.log.dirs.io.max.bytes.per.second", str(1 << 20), incremental_operation=AlterConfigOpType.SET)])
        configs = AdminClient({"bootstrap.servers": c.bootstrap})
        configs.incremental_alter_configs([rate])[rate].result(30)

        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap)
        try:
            admin.alter_replica_log_dirs({("slow", 0, 1): target})
            started = time.monotonic()
            wait_until(lambda: (0, target, True) in replicas(admin, "slow"), "the future replica")
            time.sleep(2)
            future_bytes = sum(p.stat().st_size for d in Path(target).glob("slow-0.*-future") for p in d.glob("*.log"))
            assert 0 < future_bytes <= (time.monotonic() - started + 1) * (1 << 20) * 1.5  # held to about 1 MB/s
        finally:
            admin.close()

        c.kill9()
        c.start_node(1)
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap)
        try:
            assert (0, target, True) in replicas(admin, "slow")  # the move goes on
            unthrottle = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[ConfigEntry(
                "replica.alter.log.dirs.io.max.bytes.per.second", "", incremental_operation=AlterConfigOpType.DELETE)])
            configs = AdminClient({"bootstrap.servers": c.bootstrap})
            configs.incremental_alter_configs([unthrottle])[unthrottle].result(30)
            wait_until(lambda: replicas(admin, "slow") == [(0, target, False)], "the move done", timeout_s=60)
        finally:
            admin.close()
        assert batches_in(Path(target) / "slow-0") == before
        assert "resuming the move of slow-0" in c.log_text(1)


def test_a_log_dir_asked_before_the_replica_exists_is_where_its_log_is_created(tmp_path: Path) -> None:
    from kafka import KafkaAdminClient, errors

    node_dir = tmp_path / "one" / "node-1"
    first, second = str(node_dir / "data"), str(node_dir / "data2")
    with LocalCluster(dir=tmp_path / "one", port=free_port_block(), overrides={"log.dirs": f"{first},{second}"}) as c:
        create_topic(c.bootstrap, "elsewhere", partitions=4)  # two partitions in each log dir
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap)
        try:
            answers = admin.alter_replica_log_dirs({("later", p, 1): second for p in range(4)})
            assert set(answers.values()) == {errors.ReplicaNotAvailableError}  # Kafka's answer, remembered
        finally:
            admin.close()
        create_topic(c.bootstrap, "later", partitions=4)
        assert sorted(p.name for p in Path(second).glob("later-*")) == [f"later-{p}" for p in range(4)]


def test_a_consumer_reads_on_while_the_log_moves_back_and_forth(tmp_path: Path) -> None:
    """Fetches parked in the purgatory and reads served between copy steps see the same records
    before, during and after each replacement of the log."""
    from confluent_kafka import Consumer
    from kafka import KafkaAdminClient

    node_dir = tmp_path / "one" / "node-1"
    first, second = str(node_dir / "data"), str(node_dir / "data2")
    with LocalCluster(dir=tmp_path / "one", port=free_port_block(), overrides={"log.dirs": f"{first},{second}"}) as c:
        create_topic(c.bootstrap, "busy", partitions=1)
        stop, written = threading.Event(), threading.Event()
        sent: list[bytes] = []

        def write() -> None:
            producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 2})
            n = 0
            while not stop.is_set():
                value = b"v-%06d-" % n + os.urandom(300)
                producer.produce("busy", value=value, on_delivery=lambda err, msg: sent.append(msg.value())
                                 if err is None else None)
                n += 1
                producer.poll(0.001)
            producer.flush(30)
            written.set()  # every acknowledgement is in `sent`

        read: list[tuple[int, bytes]] = []
        errors_seen: list[str] = []

        def consume() -> None:
            consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "reader",
                                 "auto.offset.reset": "earliest", "fetch.wait.max.ms": 200})
            consumer.subscribe(["busy"])
            while not (written.is_set() and len(read) >= len(sent)):
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                if msg.error():
                    errors_seen.append(str(msg.error()))
                    continue
                read.append((msg.offset(), msg.value()))
            consumer.close()

        threads = [threading.Thread(target=write), threading.Thread(target=consume)]
        for t in threads:
            t.start()
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap)
        try:
            for i in range(6):
                more = len(sent) + 2000
                wait_until(lambda more=more: len(sent) > more, "more records written")
                (here,) = [d for d in (first, second) if (Path(d) / "busy-0").exists()]
                there = second if here == first else first
                admin.alter_replica_log_dirs({("busy", 0, 1): there})
                wait_until(lambda there=there: replicas(admin, "busy") == [(0, there, False)], f"move {i} done")
        finally:
            stop.set()
            threads[0].join()
            wait_until(lambda: len(read) >= len(sent), "the consumer at the end", timeout_s=60)
            threads[1].join()
            admin.close()
        assert [o for o, _ in read] == list(range(len(read)))  # every offset once, in order
        assert sorted(v for _, v in read) == sorted(sent) and not errors_seen
        assert "Traceback" not in c.log_text(1)
