import uuid

from kmirror.cli.common import kafka_uuid
from kmirror.cli.topics import PartitionReport, format_description, min_insync_replicas
from kmirror.client.admin import ConfigEntry, TopicDescription
from kmirror.client.metadata import PartitionMetadata


def pm(partition: int, leader: int, replicas: tuple[int, ...], isr: tuple[int, ...]) -> PartitionMetadata:
    return PartitionMetadata(partition, leader, 0, replicas, isr, ())


TID = uuid.UUID(int=7)
DESC = TopicDescription("t", TID, False, (
    pm(0, 1, (1, 2, 3), (1, 2, 3)),  # healthy
    pm(1, 2, (2, 3, 1), (2, 1)),  # under-replicated, at min ISR 2
    pm(2, 3, (3, 1, 2), (3,)),  # under min ISR, leader 3 not live
    pm(3, -1, (1, 2, 3), (1,)),  # no leader
))
LIVE = {1, 2}
LINES = [
    "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3\tOffline: 3",
    "\tTopic: t\tPartition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,1\tOffline: 3",
    "\tTopic: t\tPartition: 2\tLeader: 3\tReplicas: 3,1,2\tIsr: 3\tOffline: 3",
    "\tTopic: t\tPartition: 3\tLeader: none\tReplicas: 1,2,3\tIsr: 1\tOffline: 3",
]


def describe(report: PartitionReport, min_isr: int | None = 2) -> list[str]:
    return format_description(DESC, {}, LIVE, report=report, min_isr=min_isr)


def test_unfiltered_describe_has_the_topic_line_and_every_partition_with_offline_replicas() -> None:
    lines = describe(PartitionReport())
    assert lines[0] == (f"Topic: t\tTopicId: {kafka_uuid(TID)}\tPartitionCount: 4\tReplicationFactor: 3"
                        "\tConfigs: ")
    assert lines[1:] == LINES


def test_no_offline_column_when_every_replica_is_live() -> None:
    lines = format_description(DESC, {}, {1, 2, 3})
    assert lines[1] == "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3"


def test_under_replicated_partitions() -> None:
    assert describe(PartitionReport(under_replicated=True)) == LINES[1:]


def test_unavailable_partitions_have_no_leader_or_a_leader_that_is_not_live() -> None:
    assert describe(PartitionReport(unavailable=True)) == [LINES[2], LINES[3]]


def test_under_min_isr_partitions_include_leaderless_ones() -> None:
    assert describe(PartitionReport(under_min_isr=True)) == [LINES[2], LINES[3]]
    assert describe(PartitionReport(under_min_isr=True), min_isr=None) == [LINES[3]]


def test_at_min_isr_partitions() -> None:
    assert describe(PartitionReport(at_min_isr=True)) == [LINES[1]]
    assert describe(PartitionReport(at_min_isr=True), min_isr=3) == [LINES[0]]
    assert describe(PartitionReport(at_min_isr=True), min_isr=None) == []


def test_several_filters_select_partitions_matching_any() -> None:
    assert describe(PartitionReport(at_min_isr=True, unavailable=True)) == LINES[1:]


def test_min_insync_replicas_from_described_configs() -> None:
    entries = [ConfigEntry("retention.ms", "5", 1, False, False),
               ConfigEntry("min.insync.replicas", "2", 5, False, False)]
    assert min_insync_replicas(entries) == 2
    assert min_insync_replicas(entries[:1]) is None


def test_describe_flags_parse() -> None:
    from kmirror.cli.main import build_parser

    args = build_parser().parse_args(["topics", "--bootstrap-server", "h:1", "--describe",
                                      "--under-min-isr-partitions", "--at-min-isr-partitions"])
    assert PartitionReport.from_args(args) == PartitionReport(under_min_isr=True, at_min_isr=True)
