"""The Admin client: topic, partition, config, offset and cluster operations.

Every method raises `KafkaError` (carrying Kafka's error name) for the first failed
resource, with the resource as context, so `TOPIC_ALREADY_EXISTS` reads
`t: TOPIC_ALREADY_EXISTS: Topic 't' already exists.`. Topic descriptions come from
Metadata (partitions, leader, replicas, isr, topic id) as in Kafka's Admin.describeTopics.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.client.acls import AclAdmin
from kmirror.client.cluster import REFRESH_ERRORS, Cluster
from kmirror.client.delegation_tokens import DelegationTokenAdmin
from kmirror.client.errors import KafkaError, check
from kmirror.client.metadata import BrokerMetadata, TopicMetadata
from kmirror.client.mirrors import MirrorAdmin
from kmirror.client.quotas import QuotaAdmin
from kmirror.client.reassignments import ReassignmentAdmin
from kmirror.client.scram_credentials import ScramAdmin
from kmirror.client.share_groups import ShareGroupAdmin
from kmirror.client.transactions import TransactionAdmin
from kmirror.config.topic import ConfigSource
from kmirror.protocol.entities import build, nested
from kmirror.types import TopicPartition

CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS = 19, 20, 21
DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 44
LIST_OFFSETS, CREATE_PARTITIONS, DESCRIBE_CLUSTER = 2, 37, 60
ELECT_LEADERS = 43

# ListOffsets special timestamps (Kafka ListOffsetsRequest).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3


class ConfigResourceType(IntEnum):
    """Kafka's ConfigResource.Type codes."""

    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    GROUP = 32  # KIP-848 group configs
    MIRROR = 64  # KIP-1279 (kmirror.metadata.mirror_records.MIRROR_CONFIG_RESOURCE_TYPE)


PER_BROKER_RESOURCES = frozenset({ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER})
"""Config resources a broker answers for itself (its own id as the name)."""


class AlterConfigOp(IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class ElectionType(IntEnum):
    """Kafka's ElectionType: PREFERRED elects the first replica if it is in the ISR; UNCLEAN
    elects any live replica when the ISR has none."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True)
class NewTopic:
    name: str
    num_partitions: int = -1  # -1: the broker's num.partitions
    replication_factor: int = -1  # -1: the broker's default.replication.factor
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    read_only: bool
    is_sensitive: bool
    synonyms: tuple[tuple[str, str | None, int], ...] = ()

    @property
    def source_name(self) -> str:
        try:
            return ConfigSource(self.source).name
        except ValueError:
            return "UNKNOWN"


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    topic_id: uuid.UUID | None
    is_internal: bool
    partitions: tuple[Any, ...]  # PartitionMetadata, by partition id


@dataclass(frozen=True, slots=True)
class ListedOffset:
    offset: int
    timestamp: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerMetadata, ...]

    def broker_ids(self) -> list[int]:
        return [b.node_id for b in self.brokers]


def _ms(ms: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ms)


class Admin(MirrorAdmin, TransactionAdmin, ShareGroupAdmin, AclAdmin, ScramAdmin, DelegationTokenAdmin, QuotaAdmin,
            ReassignmentAdmin):
    """Kafka's Admin; the cluster mirror methods (KIP-1279) come from `MirrorAdmin`, the
    consumer and share group ones from `ShareGroupAdmin` (on `GroupAdmin`), the ACL ones from `AclAdmin`, the transaction
    ones from `TransactionAdmin`, the client quota ones from `QuotaAdmin`, the partition
    reassignment ones from `ReassignmentAdmin`."""

    def __init__(self, cluster: Cluster, *, timeout_ms: int = 30_000) -> None:
        self.cluster = cluster
        self.timeout_ms = timeout_ms

    @classmethod
    async def connect(cls, bootstrap_servers: str, **kwargs: Any) -> Admin:
        cluster = Cluster(bootstrap_servers, **kwargs)
        await cluster.connect()
        return cls(cluster)

    async def close(self) -> None:
        await self.cluster.close()

    async def __aenter__(self) -> Admin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # topics

    async def create_topics(self, topics: Iterable[NewTopic], *, validate_only: bool = False) -> dict[str, uuid.UUID | None]:
        """Topic name -> topic id (None if the broker's version does not return it)."""
        conn = await self.cluster.controller_connection()
        rt = conn.request_type(CREATE_TOPICS)
        Topic, Config = nested(rt, "CreatableTopic"), nested(rt, "CreatableTopicConfig")
        request = build(
            rt,
            topics=tuple(
                build(
                    Topic,
                    name=t.name,
                    num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
                    assignments=(),
                    configs=tuple(build(Config, name=k, value=v) for k, v in t.configs.items()),
                )
                for t in topics
            ),
            timeout=_ms(self.timeout_ms),
            validate_only=validate_only,
        )
        response = await conn.send(request)
        out: dict[str, uuid.UUID | None] = {}
        for r in response.topics:
            check(r.error_code, getattr(r, "error_message", None), r.name)
            out[r.name] = getattr(r, "topic_id", None)
        return out

    async def delete_topics(self, names: Iterable[str]) -> None:
        names = list(names)
        conn = await self.cluster.controller_connection()
        rt = conn.request_type(DELETE_TOPICS)
        extra: dict[str, Any] = {"topic_names": tuple(names)}
        if rt.__version__ >= 6:
            State = nested(rt, "DeleteTopicState")
            extra = {"topics": tuple(build(State, name=n, topic_id=uuid.UUID(int=0)) for n in names)}
        response = await conn.send(build(rt, timeout=_ms(self.timeout_ms), **extra))
        for r in response.responses:
            check(r.error_code, getattr(r, "error_message", None), r.name)

    async def list_topics(self, include_internal: bool = False) -> list[str]:
        metadata = await self.cluster.refresh()
        return sorted(n for n, t in metadata.topics.items() if include_internal or not t.is_internal)

    async def describe_topics(self, names: Iterable[str] | None = None) -> dict[str, TopicDescription]:
        """All topics when `names` is None; UNKNOWN_TOPIC_OR_PARTITION for a missing named topic."""
        out: dict[str, TopicDescription] = {}
        for name, described in (await self.describe_topics_results(names)).items():
            if isinstance(described, KafkaError):
                raise described
            out[name] = described
        return out

    async def describe_topics_results(self, names: Iterable[str] | None = None
                                      ) -> dict[str, TopicDescription | KafkaError]:
        """`describe_topics` in one Metadata request, each named topic answered with its
        description or its own error (UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED...)."""
        wanted = None if names is None else list(names)
        metadata = await self.cluster.refresh(wanted)
        out: dict[str, TopicDescription | KafkaError] = {}
        for name in sorted(metadata.topics) if wanted is None else wanted:
            t: TopicMetadata | None = metadata.topics.get(name)
            if t is None or t.error_code:
                out[name] = KafkaError(3 if t is None else t.error_code, context=name)
            else:
                out[name] = TopicDescription(t.name, t.topic_id, t.is_internal, tuple(t.partitions.values()))
        return out

    async def create_partitions(self, new_counts: Mapping[str, int], *, validate_only: bool = False) -> None:
        """Increase each topic's partition count to the given total."""
        conn = await self.cluster.controller_connection()
        rt = conn.request_type(CREATE_PARTITIONS)
        Topic = nested(rt, "CreatePartitionsTopic")
        request = build(
            rt,
            topics=tuple(build(Topic, name=n, count=c, assignments=None) for n, c in new_counts.items()),
            timeout=_ms(self.timeout_ms),
            validate_only=validate_only,
        )
        response = await conn.send(request)
        for r in response.results:
            check(r.error_code, getattr(r, "error_message", None), r.name)

    # configs

    async def describe_configs(
        self, resource_type: ConfigResourceType, name: str, keys: Iterable[str] | None = None
    ) -> list[ConfigEntry]:
        described = (await self.describe_configs_results(resource_type, [name], keys)).get(name, [])
        if isinstance(described, KafkaError):
            raise described
        return described

    async def describe_configs_results(
        self, resource_type: ConfigResourceType, names: Sequence[str], keys: Iterable[str] | None = None
    ) -> dict[str, list[ConfigEntry] | KafkaError]:
        """One DescribeConfigs for many resources of a type: name -> its configs or its error.
        A broker's resources are answered by that broker: one name at a time for those."""
        if resource_type in PER_BROKER_RESOURCES and len(names) > 1:
            raise ValueError("broker configs are described one broker at a time")
        conn = await self._config_connection(resource_type, names[0] if names else "")
        if DESCRIBE_CONFIGS not in conn.api_versions:  # Kafka's UnsupportedVersionException
            raise KafkaError(ErrorCode.unsupported_version, f"{conn.address} does not support DescribeConfigs",
                             f"{resource_type.name.lower()} {', '.join(names)}")
        rt = conn.request_type(DESCRIBE_CONFIGS)
        Resource = nested(rt, "DescribeConfigsResource")
        wanted = None if keys is None else tuple(keys)
        request = build(
            rt,
            resources=tuple(build(Resource, resource_type=int(resource_type), resource_name=name,
                                  configuration_keys=wanted) for name in names),
            include_synonyms=True,
            include_documentation=False,
        )
        response = await conn.send(request)
        out: dict[str, list[ConfigEntry] | KafkaError] = {}
        for result in response.results:
            context = f"{resource_type.name.lower()} {result.resource_name}"
            if result.error_code:
                out[result.resource_name] = KafkaError(result.error_code, getattr(result, "error_message", None),
                                                       context)
                continue
            entries = out[result.resource_name] = []
            for c in result.configs:
                source = getattr(c, "config_source", -1)
                if source == -1:  # v0: is_default
                    source = ConfigSource.DEFAULT_CONFIG if getattr(c, "is_default", False) else ConfigSource.UNKNOWN
                entries.append(
                    ConfigEntry(
                        name=c.name,
                        value=c.value,
                        source=int(source),
                        read_only=bool(c.read_only),
                        is_sensitive=bool(c.is_sensitive),
                        synonyms=tuple((s.name, s.value, int(s.source)) for s in getattr(c, "synonyms", ())),
                    )
                )
        return out

    async def alter_configs(
        self, resource_type: ConfigResourceType, name: str, configs: Mapping[str, str], *, validate_only: bool = False
    ) -> None:
        """Legacy AlterConfigs: replaces the resource's whole dynamic config with `configs`."""
        conn = await self._config_connection(resource_type, name)
        rt = conn.request_type(ALTER_CONFIGS)
        Resource, Config = nested(rt, "AlterConfigsResource"), nested(rt, "AlterableConfig")
        request = build(
            rt,
            resources=(
                build(
                    Resource,
                    resource_type=int(resource_type),
                    resource_name=name,
                    configs=tuple(build(Config, name=k, value=v) for k, v in configs.items()),
                ),
            ),
            validate_only=validate_only,
        )
        response = await conn.send(request)
        for r in response.responses:
            check(r.error_code, getattr(r, "error_message", None), f"{resource_type.name.lower()} {name}")

    async def incremental_alter_configs(
        self,
        resource_type: ConfigResourceType,
        name: str,
        ops: Iterable[tuple[str, AlterConfigOp, str | None]],
        *,
        validate_only: bool = False,
    ) -> None:
        conn = await self._config_connection(resource_type, name)
        rt = conn.request_type(INCREMENTAL_ALTER_CONFIGS)
        Resource, Config = nested(rt, "AlterConfigsResource"), nested(rt, "AlterableConfig")
        request = build(
            rt,
            resources=(
                build(
                    Resource,
                    resource_type=int(resource_type),
                    resource_name=name,
                    configs=tuple(build(Config, name=k, config_operation=int(op), value=v) for k, op, v in ops),
                ),
            ),
            validate_only=validate_only,
        )
        response = await conn.send(request)
        for r in response.responses:
            check(r.error_code, getattr(r, "error_message", None), f"{resource_type.name.lower()} {name}")

    async def _config_connection(self, resource_type: ConfigResourceType, name: str) -> Any:
        # Broker configs are served by that broker (an empty name: the cluster default), a
        # broker's loggers only by that broker; any broker serves the others (Kafka's
        # least loaded node), so a connection already open does.
        if resource_type in PER_BROKER_RESOURCES and name.isdigit():
            if int(name) not in self.cluster.metadata.brokers:
                await self.cluster.refresh([])
            if int(name) in self.cluster.metadata.brokers:
                return await self.cluster.connection(int(name))
        return await self.cluster.any_connection()

    # offsets and records

    async def list_offsets(
        self, requests: Mapping[TopicPartition, int], *, isolation_level: int = 0
    ) -> dict[TopicPartition, ListedOffset]:
        """Offsets for timestamps (or EARLIEST_TIMESTAMP / LATEST_TIMESTAMP / MAX_TIMESTAMP), per leader."""
        out: dict[TopicPartition, ListedOffset] = {}
        pending = dict(requests)
        for attempt in range(3):
            by_leader = await self.cluster.by_leader(pending)
            retry: dict[TopicPartition, int] = {}
            for conn, tps in by_leader:
                rt = conn.request_type(LIST_OFFSETS)
                Topic, Partition = nested(rt, "ListOffsetsTopic"), nested(rt, "ListOffsetsPartition")
                request = build(
                    rt,
                    replica_id=-1,
                    isolation_level=isolation_level,
                    topics=tuple(
                        build(
                            Topic,
                            name=topic,
                            partitions=tuple(
                                build(Partition, partition_index=p, timestamp=pending[TopicPartition(topic, p)],
                                      current_leader_epoch=-1, max_num_offsets=1)
                                for p in parts
                            ),
                        )
                        for topic, parts in _by_topic(tps).items()
                    ),
                    timeout=_ms(self.timeout_ms),
                )
                response = await conn.send(request)
                for t in response.topics:
                    for p in t.partitions:
                        tp = TopicPartition(t.name, int(p.partition_index))
                        if p.error_code in REFRESH_ERRORS and attempt < 2:
                            retry[tp] = pending[tp]
                            continue
                        check(p.error_code, context=str(tp))
                        offset = getattr(p, "offset", None)
                        if offset is None:  # v0: old_style_offsets
                            offsets = getattr(p, "old_style_offsets", ())
                            offset = offsets[0] if offsets else -1
                        out[tp] = ListedOffset(int(offset), int(getattr(p, "timestamp", -1)),
                                               int(getattr(p, "leader_epoch", -1)))
            if not retry:
                break
            await self.cluster.refresh(sorted({tp.topic for tp in retry}))
            pending = retry
        return out

    async def delete_records(self, before_offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Advance each partition's log start offset; returns the new low watermarks."""
        out: dict[TopicPartition, int] = {}
        for conn, tps in await self.cluster.by_leader(before_offsets):
            rt = conn.request_type(DELETE_RECORDS)
            Topic, Partition = nested(rt, "DeleteRecordsTopic"), nested(rt, "DeleteRecordsPartition")
            request = build(
                rt,
                topics=tuple(
                    build(Topic, name=topic, partitions=tuple(
                        build(Partition, partition_index=p, offset=before_offsets[TopicPartition(topic, p)])
                        for p in parts
                    ))
                    for topic, parts in _by_topic(tps).items()
                ),
                timeout=_ms(self.timeout_ms),
            )
            response = await conn.send(request)
            for t in response.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, int(p.partition_index))
                    check(p.error_code, context=str(tp))
                    out[tp] = int(p.low_watermark)
        return out

    # leadership

    async def elect_leaders(
        self, election_type: ElectionType, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, KafkaError | None]:
        """ElectLeaders (Kafka Admin.electLeaders): partition -> None when elected, else its error
        (ELECTION_NOT_NEEDED when a valid leader already leads). `partitions=None` asks for every
        partition; the answer then lists what the controller considered. A top-level error raises."""
        conn = await self.cluster.controller_connection()
        rt = conn.request_type(ELECT_LEADERS)
        if rt.__version__ == 0 and election_type != ElectionType.PREFERRED:
            raise KafkaError(35, "the broker's ElectLeaders v0 only elects preferred leaders", "ElectLeaders")
        topic_partitions = None
        if partitions is not None:
            Topic = nested(rt, "TopicPartitions")
            topic_partitions = tuple(
                build(Topic, topic=topic, partitions=tuple(parts)) for topic, parts in _by_topic(partitions).items()
            )
        request = build(rt, election_type=int(election_type), topic_partitions=topic_partitions,
                        timeout=_ms(self.timeout_ms))
        response = await conn.send(request)
        check(int(getattr(response, "error_code", 0)), None, "ElectLeaders")
        out: dict[TopicPartition, KafkaError | None] = {}
        for result in response.replica_election_results:
            for p in result.partition_result:
                tp = TopicPartition(result.topic, int(p.partition_id))
                code = int(p.error_code)
                out[tp] = KafkaError(code, p.error_message, str(tp)) if code else None
        return out

    # cluster

    async def describe_cluster(self) -> ClusterDescription:
        conn = await self.cluster.any_connection()
        if DESCRIBE_CLUSTER in conn.api_versions:
            response = await conn.send(
                conn.build_request(DESCRIBE_CLUSTER, include_cluster_authorized_operations=False, endpoint_type=1)
            )
            check(response.error_code, getattr(response, "error_message", None), "DescribeCluster")
            brokers = tuple(
                BrokerMetadata(int(b.broker_id), b.host, int(b.port), b.rack) for b in response.brokers
            )
            return ClusterDescription(response.cluster_id, int(response.controller_id), brokers)
        metadata = await self.cluster.refresh([])
        return ClusterDescription(metadata.cluster_id, metadata.controller_id, tuple(metadata.brokers.values()))


def _by_topic(tps: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in sorted(tps):
        out.setdefault(tp.topic, []).append(tp.partition)
    return out
