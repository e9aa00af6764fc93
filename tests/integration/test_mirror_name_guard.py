"""`mirror.name` belongs to the mirror APIs (KIP-1279: "can only be modified through mirror
management APIs"), checked with real clients against a running mirror.

The legacy AlterConfigs replaces every config of a topic. kafka-python sends it when asked
(`incremental=False`), filling in the configs DescribeConfigs shows, which never include
`mirror.name`. The mirror topic keeps its membership: Produce is still READ_ONLY_TOPIC and the
next source records still arrive byte-identical. A client naming `mirror.name` in CreateTopics,
AlterConfigs or IncrementalAlterConfigs gets INVALID_CONFIG and changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from kafka.admin import ConfigResource as LegacyConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from kmirror.kip1279.errors import MirrorError
from kmirror.testing.kafka_clients import end_offsets, produce_delivered, produce_refused
from kmirror.testing.mirror_clusters import create_mirror, describe, wait_until
from kmirror.testing.processes import LocalCluster, kmirror
from kmirror.testing.segments import log_batches

pytestmark = pytest.mark.integration

TOPIC = "orders"


def incremental_error(admin: AdminClient, topic: str, op: AlterConfigOpType, value: str | None) -> KafkaError:
    resource = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("mirror.name", value, incremental_operation=op)])
    (future,) = admin.incremental_alter_configs([resource]).values()
    with pytest.raises(KafkaException) as refused:
        future.result(30)
    error: KafkaError = refused.value.args[0]
    return error


def legacy_alter(bootstrap: str, topic: str, configs: dict[str, str]) -> str:
    """kafka-python's answer for the topic: its error's text, or no error."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        result = admin.alter_configs([LegacyConfigResource(ConfigResourceType.TOPIC, topic, configs=configs)],
                                     raise_on_unknown=False, incremental=False)
    finally:
        admin.close()
    return str(result["topic"][topic])


def test_only_the_mirror_apis_change_mirror_name(clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path) -> None:
    source, dest = clusters
    kmirror("topics", "--bootstrap-server", source.bootstrap, "--create", "--topic", TOPIC, "--partitions", "1")
    kmirror("topics", "--bootstrap-server", dest.bootstrap, "--create", "--topic", "plain", "--partitions", "1")
    produce_delivered({"bootstrap.servers": source.bootstrap}, TOPIC, [(0, b"k", b"before") for _ in range(20)])
    create_mirror(dest, source, "m", TOPIC, tmp_path / "mirror.properties")
    wait_until(lambda: end_offsets(dest.bootstrap, TOPIC, 1) == [20], "the first records mirrored")

    # The legacy AlterConfigs replaces the topic's configs; mirror.name is not among them.
    outcome = legacy_alter(dest.bootstrap, TOPIC, {"retention.ms": "86400000"})
    assert "Error" not in outcome, outcome
    assert produce_refused(dest.bootstrap, TOPIC) == MirrorError.READ_ONLY_TOPIC
    assert {row[3] for row in describe(dest.bootstrap).values()} == {"MIRRORING"}
    produce_delivered({"bootstrap.servers": source.bootstrap}, TOPIC, [(0, b"k", b"after") for _ in range(20)])
    wait_until(lambda: end_offsets(dest.bootstrap, TOPIC, 1) == [40], "the records written after the alter mirrored")
    wait_until(lambda: log_batches(dest, TOPIC, 0) == log_batches(source, TOPIC, 0), "byte-identical batches")

    # Naming mirror.name: INVALID_CONFIG, nothing changed.
    admin = AdminClient({"bootstrap.servers": dest.bootstrap})
    for topic, op, value in ((TOPIC, AlterConfigOpType.DELETE, None), (TOPIC, AlterConfigOpType.SET, "other"),
                             ("plain", AlterConfigOpType.SET, "m")):
        error = incremental_error(admin, topic, op, value)
        assert error.code() == KafkaError.INVALID_CONFIG and "mirror APIs" in error.str(), (topic, op, error)
    legacy = legacy_alter(dest.bootstrap, "plain", {"mirror.name": "m"})
    assert legacy.startswith("[Error 40] InvalidConfigurationError") and "mirror APIs" in legacy, legacy
    (created,) = admin.create_topics([NewTopic("sneaky", 1, 1, config={"mirror.name": "m"})]).values()
    with pytest.raises(KafkaException) as refused:
        created.result(30)
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert "sneaky" not in admin.list_topics(timeout=30).topics

    assert produce_refused(dest.bootstrap, TOPIC) == MirrorError.READ_ONLY_TOPIC
    assert produce_delivered({"bootstrap.servers": dest.bootstrap}, "plain", [(0, b"k", b"v")]) == [(0, 0)]
    assert sorted(describe(dest.bootstrap)) == [("m", TOPIC, 0)]
