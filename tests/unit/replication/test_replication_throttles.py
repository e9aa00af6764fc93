"""Throttled replica movement: the leader and follower quotas follow the dynamic broker rates
and the topics' throttled replica lists, and in-sync replicas are never held back."""

from __future__ import annotations

import uuid

from kmirror.metadata.image import ConfigResourceType
from kmirror.metadata.records import ConfigRecord, TopicRecord
from kmirror.replication.replication_quota import UNLIMITED
from kmirror.replication.replication_throttles import FollowerThrottle, ReplicationThrottles
from kmirror.testing.metadata import image_with_brokers
from kmirror.types import TopicPartition


class _Clock:
    def monotonic_ms(self) -> int:
        return 0


def _image(*configs: ConfigRecord):
    image = image_with_brokers(1, 2, 3)
    return image.apply([TopicRecord("t", uuid.UUID(int=5)), *configs], image.offset + 1)


def test_rates_come_from_this_broker_else_the_cluster_default() -> None:
    throttles = ReplicationThrottles(2, None, _Clock())
    throttles.on_image(_image())
    assert throttles.leader.rate == UNLIMITED and throttles.follower.rate == UNLIMITED
    throttles.on_image(_image(
        ConfigRecord(ConfigResourceType.BROKER, "", "leader.replication.throttled.rate", "1000"),
        ConfigRecord(ConfigResourceType.BROKER, "2", "follower.replication.throttled.rate", "500"),
        ConfigRecord(ConfigResourceType.BROKER, "3", "follower.replication.throttled.rate", "7"),
    ))
    assert throttles.leader.rate == 1000 and throttles.follower.rate == 500


def test_replica_lists_name_the_throttled_broker() -> None:
    throttles = ReplicationThrottles(2, None, _Clock())
    throttles.on_image(_image(
        ConfigRecord(ConfigResourceType.BROKER, "", "leader.replication.throttled.rate", "1000"),
        ConfigRecord(ConfigResourceType.BROKER, "", "follower.replication.throttled.rate", "1000"),
        ConfigRecord(ConfigResourceType.TOPIC, "t", "leader.replication.throttled.replicas", "0:1,1:2"),
        ConfigRecord(ConfigResourceType.TOPIC, "t", "follower.replication.throttled.replicas", "*"),
    ))
    assert throttles.leader.is_throttled(TopicPartition("t", 1))
    assert not throttles.leader.is_throttled(TopicPartition("t", 0))
    assert throttles.follower.is_throttled(TopicPartition("t", 0))
    in_sync = {TopicPartition("t", 0)}
    follower = FollowerThrottle(throttles.follower, in_sync.__contains__)
    assert not follower.is_throttled(TopicPartition("t", 0)) and follower.is_throttled(TopicPartition("t", 1))
