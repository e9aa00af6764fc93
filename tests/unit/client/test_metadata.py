import datetime
import uuid

from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12 import response as v12
from kio.static.primitive import i32

from kmirror.client.metadata import ClusterMetadata
from kmirror.types import TopicPartition


def response(leader: int) -> v12.MetadataResponse:
    tid = uuid.UUID(int=5)
    partition = v12.MetadataResponsePartition(
        error_code=ErrorCode.none, partition_index=i32(0), leader_id=i32(leader), leader_epoch=i32(3),
        replica_nodes=(i32(1), i32(2)), isr_nodes=(i32(1),), offline_replicas=(),
    )
    topic = v12.MetadataResponseTopic(error_code=ErrorCode.none, name="t", topic_id=tid, is_internal=False,
                                      partitions=(partition,), topic_authorized_operations=i32(-2147483648))
    broker = v12.MetadataResponseBroker(node_id=i32(1), host="h", port=i32(9092), rack=None)
    return v12.MetadataResponse(throttle_time=datetime.timedelta(0), brokers=(broker,), cluster_id="c",
                                controller_id=i32(1), topics=(topic,))


def test_metadata_parsing_and_leader_lookup() -> None:
    md = ClusterMetadata.from_response(response(leader=1))
    assert md.cluster_id == "c" and md.controller_id == 1 and md.brokers[1].port == 9092
    p = md.topics["t"].partitions[0]
    assert (p.leader, p.leader_epoch, p.replicas, p.isr) == (1, 3, (1, 2), (1,))
    assert md.topics["t"].topic_id == uuid.UUID(int=5)
    assert md.leader_for(TopicPartition("t", 0)) == 1
    assert md.leader_for(TopicPartition("t", 1)) is None
    assert md.leader_for(TopicPartition("u", 0)) is None
    assert md.partitions_for("t") == [TopicPartition("t", 0)]


def test_no_leader_is_unknown() -> None:
    md = ClusterMetadata.from_response(response(leader=-1))
    assert md.leader_for(TopicPartition("t", 0)) is None
