"""Admin methods for partition reassignment (Kafka Admin `alterPartitionReassignments`,
`listPartitionReassignments`, KIP-455), which go where other admin writes go (a broker forwards
them to the active controller), and for a broker's log dirs (`describeLogDirs`,
`alterReplicaLogDirs`, `describeReplicaLogDirs`, KIP-113), sent to that broker.
`ReassignmentAdmin` is mixed into `kmirror.client.admin.Admin`; it needs `self.cluster`."""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from kmirror.client.cluster import Cluster
from kmirror.client.errors import KafkaError, check
from kmirror.protocol.entities import build, nested
from kmirror.types import TopicPartition

ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS = 45, 46
ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS = 34, 35


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """Kafka's PartitionReassignment: the replica set during the move (target first, then the
    replicas being removed), what is being added and what is being removed."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class LogDirReplica:
    """A replica in a log dir (DescribeLogDirs): its size, and for a future replica (moving
    there, AlterReplicaLogDirs) how far it is behind."""

    size: int
    offset_lag: int
    is_future: bool


def _by_topic(tps: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in sorted(tps):
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


class ReassignmentAdmin:
    cluster: Cluster

    async def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, tuple[int, ...] | None],
        *,
        allow_replication_factor_change: bool = True,
        timeout_ms: int = 60_000,
    ) -> dict[TopicPartition, KafkaError | None]:
        """Start (target replicas) or cancel (None) reassignments: partition -> None when
        accepted, else its error. A top-level error raises."""
        conn = await self.cluster.controller_connection()
        rt = conn.request_type(ALTER_PARTITION_REASSIGNMENTS)
        topic_cls, part_cls = nested(rt, "ReassignableTopic"), nested(rt, "ReassignablePartition")
        topics = tuple(
            build(topic_cls, name=topic, partitions=tuple(
                build(part_cls, partition_index=p, replicas=reassignments[TopicPartition(topic, p)]) for p in parts
            ))
            for topic, parts in _by_topic(reassignments).items()
        )
        extra = {"allow_replication_factor_change": allow_replication_factor_change} if rt.__version__ >= 1 else {}
        if rt.__version__ < 1 and not allow_replication_factor_change:
            raise KafkaError(35, "the broker's AlterPartitionReassignments cannot keep the replication factor",
                             "AlterPartitionReassignments")
        response = await conn.send(
            build(rt, timeout=datetime.timedelta(milliseconds=timeout_ms), topics=topics, **extra))
        check(response.error_code, response.error_message, "AlterPartitionReassignments")
        out: dict[TopicPartition, KafkaError | None] = {}
        for t in response.responses:
            for p in t.partitions:
                tp = TopicPartition(t.name, int(p.partition_index))
                code = int(p.error_code)
                out[tp] = KafkaError(code, p.error_message, str(tp)) if code else None
        return out

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None, *, timeout_ms: int = 60_000
    ) -> dict[TopicPartition, PartitionReassignment]:
        """The ongoing reassignments of `partitions` (None: of every partition)."""
        conn = await self.cluster.controller_connection()
        rt = conn.request_type(LIST_PARTITION_REASSIGNMENTS)
        topics = None
        if partitions is not None:
            topic_cls = nested(rt, "ListPartitionReassignmentsTopics")
            topics = tuple(build(topic_cls, name=t, partition_indexes=tuple(ps)) for t, ps in _by_topic(partitions).items())
        response = await conn.send(build(rt, timeout=datetime.timedelta(milliseconds=timeout_ms), topics=topics))
        check(response.error_code, response.error_message, "ListPartitionReassignments")
        return {
            TopicPartition(t.name, int(p.partition_index)): PartitionReassignment(
                tuple(int(b) for b in p.replicas), tuple(int(b) for b in p.adding_replicas),
                tuple(int(b) for b in p.removing_replicas))
            for t in response.topics
            for p in t.partitions
        }

    async def alter_replica_log_dirs(self, broker_id: int,
                                     moves: Mapping[TopicPartition, str]) -> dict[TopicPartition, ErrorCode]:
        """AlterReplicaLogDirs on `broker_id` (KIP-113): each partition's replica there to the
        given log dir; the error of each (NONE: the move has started, or is not needed)."""
        conn = await self.cluster.connection(broker_id)
        rt = conn.request_type(ALTER_REPLICA_LOG_DIRS)
        dir_cls, topic_cls = nested(rt, "AlterReplicaLogDir"), nested(rt, "AlterReplicaLogDirTopic")
        by_dir: dict[str, list[TopicPartition]] = {}
        for tp, path in moves.items():
            by_dir.setdefault(path, []).append(tp)
        dirs = tuple(build(dir_cls, path=path, topics=tuple(build(topic_cls, name=t, partitions=tuple(ps))
                                                              for t, ps in _by_topic(tps).items()))
                     for path, tps in by_dir.items())
        response = await conn.send(build(rt, dirs=dirs))
        return {TopicPartition(t.topic_name, int(p.partition_index)): ErrorCode(int(p.error_code))
                for t in response.results for p in t.partitions}

    async def replica_log_dirs(self, broker_id: int,
                               tps: Iterable[TopicPartition]) -> dict[TopicPartition, tuple[str | None, str | None]]:
        """Kafka Admin `describeReplicaLogDirs`: the current and the future (moving to) log dir
        of each partition's replica on `broker_id` (None: none)."""
        wanted = set(tps)
        conn = await self.cluster.connection(broker_id)
        rt = conn.request_type(DESCRIBE_LOG_DIRS)
        topic_cls = nested(rt, "DescribableLogDirTopic")
        response = await conn.send(build(rt, topics=tuple(
            build(topic_cls, topic=t, partitions=tuple(ps)) for t, ps in _by_topic(wanted).items())))
        check(getattr(response, "error_code", 0), context=f"DescribeLogDirs on broker {broker_id}")
        out: dict[TopicPartition, tuple[str | None, str | None]] = {tp: (None, None) for tp in wanted}
        for result in response.results:
            for t in result.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, int(p.partition_index))
                    current, future = out.get(tp, (None, None))
                    out[tp] = (current, result.log_dir) if p.is_future_key else (result.log_dir, future)
        return out

    async def describe_log_dirs(self, broker_id: int) -> dict[str, dict[TopicPartition, LogDirReplica] | ErrorCode]:
        """log dir -> partition -> its replica there, as reported by `broker_id`; a dir the
        broker answers with an error (KAFKA_STORAGE_ERROR: it failed, KIP-858) -> that error."""
        conn = await self.cluster.connection(broker_id)
        response = await conn.send(conn.build_request(DESCRIBE_LOG_DIRS, topics=None))
        check(getattr(response, "error_code", 0), context=f"DescribeLogDirs on broker {broker_id}")
        out: dict[str, dict[TopicPartition, LogDirReplica] | ErrorCode] = {}
        for result in response.results:
            if result.error_code != ErrorCode.none:
                out[result.log_dir] = ErrorCode(result.error_code)
                continue
            out[result.log_dir] = {
                TopicPartition(t.name, int(p.partition_index)): LogDirReplica(
                    int(p.partition_size), int(p.offset_lag), bool(p.is_future_key))
                for t in result.topics
                for p in t.partitions
            }
        return out
