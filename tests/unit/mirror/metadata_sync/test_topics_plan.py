"""The topic sync plan: cluster id validation, partition expansion, config alignment."""

from __future__ import annotations

import uuid

import pytest

from kmirror.config.mirror import MirrorConfig, parse_mirror_config
from kmirror.metadata.controller.config_ops import AlterableConfig, AlterConfigOp
from kmirror.mirror.metadata_sync.topics_plan import (
    AlterTopicConfigs,
    CreatePartitions,
    DestinationTopic,
    HaltSync,
    MirrorTopicsView,
    TopicSyncPlan,
    cluster_id_mismatch,
    config_ops,
    plan_topic_sync,
)
from kmirror.mirror.source_lookup import SourceDescription, SourceTopic

TID = uuid.UUID(int=7)
DEFAULT = MirrorConfig(("src:9092",))
SET, DELETE = AlterConfigOp.SET, AlterConfigOp.DELETE


def view(configs: dict[str, str] | None = None, partitions: int = 2, cluster_id: str = "src-cluster",
         config: MirrorConfig = DEFAULT) -> MirrorTopicsView:
    return MirrorTopicsView("m", cluster_id, config,
                            {"t": DestinationTopic(TID, partitions, {"mirror.name": "m", **(configs or {})})})


def source(configs: dict[str, str] | None = None, partitions: int = 2, cluster_id: str = "src-cluster",
           topic_id: uuid.UUID = TID) -> SourceDescription:
    return SourceDescription(cluster_id, {"t": SourceTopic("t", topic_id, partitions, configs or {})})


def test_in_sync_topic_needs_nothing() -> None:
    assert plan_topic_sync(view({"retention.ms": "1"}), source({"retention.ms": "1"})) == TopicSyncPlan()


@pytest.mark.parametrize(("expected", "observed", "mismatch"), [
    ("a", "a", False), ("a", "b", True), ("", "b", False), ("a", "", False), ("", "", False)])
def test_cluster_id_mismatch_needs_both_ids_known(expected: str, observed: str, mismatch: bool) -> None:
    assert cluster_id_mismatch(expected, observed) is mismatch


def test_other_source_cluster_halts_everything() -> None:
    plan = plan_topic_sync(view(partitions=1), source({"retention.ms": "1"}, partitions=3, cluster_id="other"))
    assert plan == TopicSyncPlan(halt=HaltSync("m", "src-cluster", "other"))
    assert plan.halt is not None and "other" in plan.halt.reason and "src-cluster" in plan.halt.reason


def test_no_recorded_cluster_id_syncs() -> None:
    plan = plan_topic_sync(view(partitions=1, cluster_id=""), source(partitions=3, cluster_id="any"))
    assert plan == TopicSyncPlan(actions=(CreatePartitions("t", 3),))


@pytest.mark.parametrize(("dest", "src", "expected"), [(2, 5, (CreatePartitions("t", 5),)), (2, 2, ()), (5, 2, ())])
def test_partition_expansion_only_grows(dest: int, src: int, expected: tuple[CreatePartitions, ...]) -> None:
    assert plan_topic_sync(view(partitions=dest), source(partitions=src)).actions == expected


def test_config_ops_set_changed_and_added_delete_removed() -> None:
    ops = config_ops(DEFAULT, {"retention.ms": "2", "cleanup.policy": "compact"},
                     {"retention.ms": "1", "segment.ms": "9"})
    assert ops == (AlterableConfig("cleanup.policy", SET, "compact"), AlterableConfig("retention.ms", SET, "2"),
                   AlterableConfig("segment.ms", DELETE, None))


def test_excluded_properties_are_neither_copied_nor_deleted() -> None:
    # KIP default exclusions: min.insync.replicas, unclean.leader.election.enable, ...
    ops = config_ops(DEFAULT, {"min.insync.replicas": "2", "retention.ms": "1"},
                     {"unclean.leader.election.enable": "true", "retention.ms": "1"})
    assert ops == ()


def test_exclusion_regexes_are_full_match() -> None:
    config = parse_mirror_config({"bootstrap.servers": "s:1", "mirror.topic.properties.exclude": "retention.*,seg"})
    assert isinstance(config, MirrorConfig)
    ops = config_ops(config, {"retention.ms": "1", "retention.bytes": "2", "segment.ms": "3"},
                     {"min.insync.replicas": "2"})
    # segment.ms is not matched by "seg"; min.insync.replicas is no longer excluded: deleted
    assert ops == (AlterableConfig("segment.ms", SET, "3"), AlterableConfig("min.insync.replicas", DELETE, None))


def test_mirror_name_and_destination_local_configs_are_never_touched() -> None:
    config = parse_mirror_config({"bootstrap.servers": "s:1", "mirror.topic.properties.exclude": ""})
    assert isinstance(config, MirrorConfig)
    ops = config_ops(config, {"mirror.name": "other", "mirror.support.unclean.leader.election": "true"},
                     {"mirror.name": "m", "mirror.replication.throttled.replicas": "*"})
    assert ops == ()


def test_a_source_topic_with_another_id_is_not_synced() -> None:
    plan = plan_topic_sync(view(), source({"retention.ms": "1"}, partitions=4, topic_id=uuid.UUID(int=8)))
    assert plan == TopicSyncPlan()


@pytest.mark.parametrize("answer", [3, 100])  # UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID
def test_a_topic_the_source_answered_with_an_error_is_skipped(answer: int) -> None:
    assert plan_topic_sync(view(), SourceDescription("src-cluster", {"t": answer})) == TopicSyncPlan()


def test_topics_are_planned_in_name_order_partitions_before_configs() -> None:
    topics = {name: DestinationTopic(uuid.UUID(int=i), 1, {}) for i, name in enumerate(("b", "a"))}
    answers = {name: SourceTopic(name, uuid.UUID(int=i), 2, {"retention.ms": "5"}) for i, name in enumerate(("b", "a"))}
    plan = plan_topic_sync(MirrorTopicsView("m", "c", DEFAULT, topics), SourceDescription("c", answers))
    op = (AlterableConfig("retention.ms", SET, "5"),)
    assert plan.actions == (CreatePartitions("a", 2), AlterTopicConfigs("a", op),
                            CreatePartitions("b", 2), AlterTopicConfigs("b", op))
