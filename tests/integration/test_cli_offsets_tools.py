"""`kmirror get-offsets`, `delete-records`, `log-dirs` and `broker-api-versions`
(kafka-get-offsets.sh, kafka-delete-records.sh, kafka-log-dirs.sh,
kafka-broker-api-versions.sh) against a real 2-broker cluster, checked against what
confluent-kafka sees."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kmirror.broker.api import load_handlers
from kmirror.testing.kafka_clients import create_topic
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror

pytestmark = pytest.mark.integration
T0 = 1_790_000_000_000


def get_offsets(bootstrap: str, *args: str) -> list[str]:
    return kmirror("get-offsets", "--bootstrap-server", bootstrap, *args).stdout.splitlines()


def watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
        return int(low), int(high)
    finally:
        consumer.close()


def test_get_offsets_delete_records_log_dirs_and_broker_api_versions(tmp_path: Path) -> None:
    with LocalCluster(dir=tmp_path / "c", port=free_port_block(3), nodes=2) as cluster:
        b = cluster.bootstrap
        create_topic(b, "t", partitions=3, replication_factor=2)
        create_topic(b, "u", partitions=1, replication_factor=1)
        producer = Producer({"bootstrap.servers": b, "acks": "all", "linger.ms": 0})
        for i in range(10):  # t-0: timestamps T0, T0+10, ... T0+90; the largest at offset 7
            producer.produce("t", value=b"v%d" % i, partition=0, timestamp=T0 + (200 if i == 7 else 10 * i))
        for i in range(20):
            producer.produce("t", value=b"w%d" % i, partition=1, timestamp=T0 + i)
        producer.produce("u", value=b"x", partition=0, timestamp=T0)
        assert producer.flush(30) == 0

        latest = get_offsets(b, "--topic", "t")
        assert latest == [f"t:{p}:{watermarks(b, 't', p)[1]}" for p in range(3)] == ["t:0:10", "t:1:20", "t:2:0"]
        assert get_offsets(b, "--topic", "t", "--time", "earliest", "--partitions", "0,2") == ["t:0:0", "t:2:0"]
        assert get_offsets(b, "--topic", "t", "--partitions", "0", "--time", "max-timestamp") == ["t:0:7"]
        # the first offset whose timestamp is at least T0+35; none past the last record's
        assert get_offsets(b, "--topic", "t", "--partitions", "0", "--time", str(T0 + 35)) == ["t:0:4"]
        assert get_offsets(b, "--topic", "t", "--partitions", "0", "--time", str(T0 + 999)) == []
        assert get_offsets(b, "--topic-partitions", "t:1-,u") == ["t:1:20", "t:2:0", "u:0:1"]
        assert "__consumer_offsets" not in " ".join(get_offsets(b, "--exclude-internal-topics"))

        offsets = tmp_path / "delete.json"
        offsets.write_text(json.dumps({"partitions": [{"topic": "t", "partition": 0, "offset": 4},
                                                      {"topic": "t", "partition": 1, "offset": -1}], "version": 1}))
        out = kmirror("delete-records", "--bootstrap-server", b, "--offset-json-file", str(offsets)).stdout
        assert out.splitlines() == ["Executing records delete operation", "Records delete operation completed:",
                                    "partition: t-0\tlow_watermark: 4", "partition: t-1\tlow_watermark: 20"]
        assert watermarks(b, "t", 0) == (4, 10) and watermarks(b, "t", 1) == (20, 20)
        assert get_offsets(b, "--topic", "t", "--time", "-2") == ["t:0:4", "t:1:20", "t:2:0"]

        out = kmirror("log-dirs", "--bootstrap-server", b, "--describe", "--topic-list", "t").stdout.splitlines()
        assert out[:2] == ["Querying brokers for log directories information",
                           "Received log directory information from brokers 1,2"]
        described = json.loads(out[2])
        assert [broker["broker"] for broker in described["brokers"]] == [1, 2] and described["version"] == 1
        for broker in described["brokers"]:
            (log_dir,) = broker["logDirs"]
            assert log_dir["logDir"] == str(cluster.dir / f"node-{broker['broker']}" / "data")
            assert log_dir["error"] is None
            sizes = {p["partition"]: p["size"] for p in log_dir["partitions"]}
            # RF 2 on 2 brokers: each holds every partition of t (and --topic-list leaves out u)
            assert set(sizes) == {"t-0", "t-1", "t-2"} and all(not p["isFuture"] for p in log_dir["partitions"])
            assert sizes["t-0"] > 0 and sizes["t-1"] > 0 and sizes["t-2"] == 0

        versions = kmirror("broker-api-versions", "--bootstrap-server", b).stdout.splitlines()
        heads = [i for i, line in enumerate(versions) if " -> (" in line]
        assert [versions[i] for i in heads] == [
            f"127.0.0.1:{cluster.port + n - 1} (id: {n} rack: null isFenced: false) -> (" for n in (1, 2)]
        assert versions[heads[1] - 1] == ")" and versions[-1] == ")"
        produce = next(h for h in load_handlers("broker") if h.api_key == 0)
        assert f"\tProduce(0): {produce.min_version} to {produce.max_version} [usable: {produce.max_version}]," \
            in versions
        assert "\tVote(52): UNSUPPORTED," in versions  # a controller-quorum API: not on a broker listener
        assert any(line.startswith("\tCreateMirror(94): 0 to 0 [usable: 0]") for line in versions)

        for args, message in (
            (("get-offsets", "--time", "yesterday"), "Error: Malformed time argument yesterday."),
            (("get-offsets", "--topic", "nothing-matches"), "Error: Could not match any topic-partitions"),
            (("get-offsets", "--topic", "t", "--topic-partitions", "t"),
             "Error: --topic-partitions cannot be used with --topic or --partitions"),
            (("log-dirs", "--describe", "--broker-list", "9"),
             "Error: The given brokers do not exist from --broker-list: 9. Current existent brokers: 1,2"),
        ):
            refused = kmirror(args[0], "--bootstrap-server", b, *args[1:], check=False)
            assert refused.returncode == 1 and refused.stderr.startswith(message), refused.stderr
