"""ElectLeaders and DescribeCluster on three real brokers, asked by confluent-kafka's admin
client: a preferred election after the preferred leader returns, ELECTION_NOT_NEEDED, an unclean
election of a partition whose only ISR member is down, and the cluster description."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import ElectionType, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, ClusterMetadata, NewTopic

from kmirror.testing.processes import LocalCluster

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster3(module_cluster3: LocalCluster) -> LocalCluster:
    """The module's tests share the three brokers; the one that kills brokers comes last."""
    return module_cluster3


def wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except Exception as exc:  # metadata may be briefly unavailable during elections
            last = exc
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what} (last: {last!r})")


def state(admin: AdminClient, topic: str) -> tuple[int, list[int]]:
    p = admin.list_topics(topic, timeout=10).topics[topic].partitions[0]
    return p.leader, list(p.isrs)


def elect(admin: AdminClient, kind: ElectionType, topic: str):
    return admin.elect_leaders(kind, [TopicPartition(topic, 0)]).result(30)[TopicPartition(topic, 0)]


def test_describe_cluster_lists_every_broker(cluster3):
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap})
    described = admin.describe_cluster(include_authorized_operations=True).result(30)
    assert sorted(n.id for n in described.nodes) == [1, 2, 3]
    assert described.controller.id in (1, 2, 3)
    assert described.cluster_id == admin.list_topics(timeout=10).cluster_id
    assert described.authorized_operations


def test_preferred_and_unclean_elections(cluster3):
    b = cluster3.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic("pref", num_partitions=1, replica_assignment=[[1, 2, 3]]),
                         NewTopic("lost", num_partitions=1, replica_assignment=[[2, 3]])])["pref"].result(30)
    wait_for(lambda: state(admin, "pref") == (1, [1, 2, 3]) and len(state(admin, "lost")[1]) == 2, 30, "in sync")

    error = elect(admin, ElectionType.PREFERRED, "pref")
    assert error is not None and error.code() == KafkaError.ELECTION_NOT_NEEDED

    cluster3.kill9(1)
    wait_for(lambda: state(admin, "pref")[0] in (2, 3), 30, "a leader other than 1")
    cluster3.start_node(1)
    wait_for(lambda: 1 in state(admin, "pref")[1], 60, "broker 1 back in the ISR")
    assert state(admin, "pref")[0] != 1
    assert elect(admin, ElectionType.PREFERRED, "pref") is None
    wait_for(lambda: state(admin, "pref")[0] == 1, 30, "the preferred leader elected")

    # "lost": the ISR shrinks to 2, then 2 dies too: no leader, and 3 is not in the ISR
    cluster3.kill9(3)
    wait_for(lambda: state(admin, "lost")[1] == [2], 30, "ISR [2]")
    cluster3.kill9(2)
    wait_for(lambda: state(admin, "lost")[0] == -1, 30, "no leader")
    cluster3.start_node(3)
    # the controller elects leaders of offline partitions in the batch that unfences a broker:
    # in metadata that lists 3, a clean election would have happened
    def with_broker_3() -> ClusterMetadata | None:
        md = admin.list_topics("lost", timeout=10)
        return md if 3 in md.brokers else None

    md = wait_for(with_broker_3, 30, "broker 3 unfenced in one broker's metadata")
    assert md.topics["lost"].partitions[0].leader == -1  # clean elections only: 3 is not in the ISR
    error = elect(admin, ElectionType.PREFERRED, "lost")
    assert error is not None and error.code() == KafkaError.PREFERRED_LEADER_NOT_AVAILABLE
    assert elect(admin, ElectionType.UNCLEAN, "lost") is None
    wait_for(lambda: state(admin, "lost") == (3, [3]), 30, "3 elected uncleanly")
    error = elect(admin, ElectionType.UNCLEAN, "lost")
    assert error is not None and error.code() == KafkaError.ELECTION_NOT_NEEDED
    error = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("nope", 0)]).result(30)[TopicPartition("nope", 0)]
    assert error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
