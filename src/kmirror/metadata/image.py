"""`MetadataImage`: the immutable cluster state the metadata log replays into (Kafka's
`MetadataImage` + `MetadataDelta`).

`image.apply(records, offset)` is pure: it returns a new image and shares every unchanged
part with the old one. Copies are per `apply` call and per touched section (the topic map is
copied once for a batch of records, a topic's partition map only when that topic changes).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import IntEnum
from types import MappingProxyType
from typing import NamedTuple, TypeVar, cast

from kmirror.metadata import directories as dir_ids
from kmirror.metadata.records import (
    NO_BROKER,
    NO_LEADER_CHANGE,
    AccessControlEntryRecord,
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ClusterIdRecord,
    ConfigRecord,
    DelegationTokenRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    Record,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveDelegationTokenRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)
from kmirror.security.scram import ScramCredential

K = TypeVar("K")
V = TypeVar("V")


class ConfigResourceType(IntEnum):
    """Kafka's ConfigResource.Type ids."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigResource(NamedTuple):
    type: int
    name: str


class MetadataInvariantError(RuntimeError):
    """A record that cannot apply to the image (e.g. a partition of an unknown topic)."""


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    """During a reassignment `replicas` is the union of the target and the replicas being
    removed; `adding_replicas` are the target's new ones (Kafka's PartitionRegistration)."""
    directories: tuple[uuid.UUID, ...] = ()
    """The log directory of each replica, in the order of `replicas` (KIP-858); empty when not
    tracked (`metadata.directories`)."""

    @property
    def is_reassigning(self) -> bool:
        return bool(self.removing_replicas or self.adding_replicas)

    def directory(self, broker_id: int) -> uuid.UUID:
        """The log directory of `broker_id`'s replica (`MIGRATING` when not tracked)."""
        if self.directories:
            for b, d in zip(self.replicas, self.directories, strict=False):
                if b == broker_id:
                    return d
        return dir_ids.MIGRATING

    def merge(self, change: PartitionChangeRecord) -> PartitionRegistration:
        """Kafka's PartitionRegistration.merge: a new leader bumps the leader epoch; any change
        bumps the partition epoch."""
        leader, leader_epoch = self.leader, self.leader_epoch
        if change.leader != NO_LEADER_CHANGE:
            leader = change.leader
            leader_epoch += 1
        replicas = self.replicas if change.replicas is None else change.replicas
        dirs = change.directories
        if dirs is None:
            dirs = self.directories
            if self.directories and replicas != self.replicas:
                dirs = dir_ids.directories_for(replicas, self.replicas, self.directories)
        return PartitionRegistration(
            replicas=replicas,
            isr=self.isr if change.isr is None else change.isr,
            leader=leader,
            leader_epoch=leader_epoch,
            partition_epoch=self.partition_epoch + 1,
            removing_replicas=self.removing_replicas if change.removing_replicas is None else change.removing_replicas,
            adding_replicas=self.adding_replicas if change.adding_replicas is None else change.adding_replicas,
            directories=dirs,
        )


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionRegistration]


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    incarnation_id: uuid.UUID
    broker_epoch: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool = False
    log_dirs: tuple[uuid.UUID, ...] = ()
    cordoned_log_dirs: tuple[uuid.UUID, ...] | None = None

    @property
    def has_uncordoned_dirs(self) -> bool:
        """Kafka's `BrokerRegistration.hasUncordonedDirs` (KIP-1066): automatic replica placement
        may use the broker. One that has not reported its cordoned directories, or registered
        none, may be used."""
        if self.cordoned_log_dirs is None or not self.log_dirs:
            return True
        return any(d not in self.cordoned_log_dirs for d in self.log_dirs)

    def endpoint(self, listener: str | None = None) -> BrokerEndpoint | None:
        for ep in self.endpoints:
            if listener is None or ep.name == listener:
                return ep
        return self.endpoints[0] if self.endpoints else None


@dataclass(frozen=True, slots=True)
class AclBinding:
    id: uuid.UUID
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


def _frozen(d: Mapping[K, V]) -> Mapping[K, V]:
    return MappingProxyType(d)


_EMPTY_PROXY: Mapping[object, object] = MappingProxyType({})


def _empty() -> Mapping[K, V]:
    """The one shared empty mapping, as any mapping type (it holds nothing)."""
    return cast("Mapping[K, V]", _EMPTY_PROXY)


@dataclass(frozen=True)
class MetadataImage:
    offset: int = -1
    cluster_id: str | None = None
    features: Mapping[str, int] = field(default_factory=_empty)
    topics: Mapping[str, TopicImage] = field(default_factory=_empty)
    topics_by_id: Mapping[uuid.UUID, TopicImage] = field(default_factory=_empty)
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=_empty)
    configs: Mapping[ConfigResource, Mapping[str, str]] = field(default_factory=_empty)
    acls: Mapping[uuid.UUID, AclBinding] = field(default_factory=_empty)
    scram_credentials: Mapping[tuple[str, int], ScramCredential] = field(default_factory=_empty)
    """(user name, ScramMechanism type) -> credential, from UserScramCredentialRecords."""
    delegation_tokens: Mapping[str, DelegationTokenRecord] = field(default_factory=_empty)
    client_quotas: Mapping[tuple[tuple[str, str | None], ...], Mapping[str, float]] = field(
        default_factory=_empty)
    """Client quota entity (sorted `(entity_type, entity_name)` pairs, None: default) -> key -> value."""
    next_producer_id: int = 0
    producer_id_floor: int = 0
    """No producer id below this may be handed out any more: set by a ProducerIdsRecord with
    broker id -1 (`controller.producer_ids.fence_producer_ids`, KIP-1279 failover), which
    makes every broker drop the ids left in blocks it was given before."""

    def apply(self, records: Iterable[Record], offset: int) -> MetadataImage:
        """The image after replaying `records`; `offset` is the last one's log offset."""
        delta = _Delta(self)
        for record in records:
            delta.replay(record)
        return delta.build(offset)

    # -- conveniences for handlers and other services --------------------------------------

    def topic_config(self, topic: str) -> Mapping[str, str]:
        return self.configs.get(ConfigResource(ConfigResourceType.TOPIC, topic), _empty())

    def broker_config(self, node_id: int) -> Mapping[str, str]:
        """The dynamic configs set for this one broker (not the cluster-wide default)."""
        return self.configs.get(ConfigResource(ConfigResourceType.BROKER, str(node_id)), _empty())

    def is_isr_eligible(self, broker_id: int, broker_epoch: int = -1) -> bool:
        """Kafka `Partition.isReplicaIsrEligible`: the broker is registered, unfenced, not in
        controlled shutdown, and `broker_epoch` (the one its fetches carry; -1 unknown) is its
        registration's."""
        b = self.brokers.get(broker_id)
        return (b is not None and not b.fenced and not b.in_controlled_shutdown
                and broker_epoch in (-1, b.broker_epoch))

    def offline_replicas(self, reg: PartitionRegistration) -> tuple[int, ...]:
        """Replicas of `reg` whose log directory is not online on their broker (KIP-858): they
        may not lead nor join the ISR. An unregistered broker's replicas are not counted here."""
        if not reg.directories:
            return ()
        out = []
        for b, d in zip(reg.replicas, reg.directories, strict=False):
            broker = self.brokers.get(b)
            if broker is not None and not dir_ids.is_online(d, broker.log_dirs):
                out.append(b)
        return tuple(out)

    def is_new_replica(self, reg: PartitionRegistration, broker_id: int) -> bool:
        """Whether `broker_id` may create its replica's log anew while one of its log dirs is
        offline (KIP-858): the controller has placed it in no directory yet, or in one the
        broker has online (the log was never created). A replica placed in a failed or unknown
        directory may have its log there."""
        directory = reg.directory(broker_id)
        broker = self.brokers.get(broker_id)
        return directory == dir_ids.UNASSIGNED or (
            broker is not None and not dir_ids.is_reserved(directory) and directory in broker.log_dirs)

    def live_brokers(self) -> list[BrokerRegistration]:
        """Registered, unfenced brokers sorted by id."""
        return [b for _, b in sorted(self.brokers.items()) if not b.fenced]

    def topics_deleted_since(self, old: MetadataImage | None) -> set[str]:
        """Topics of `old` whose topic id this image no longer has: deleted, or deleted and
        re-created under the same name (Kafka's `TopicsDelta.deletedTopicIds`)."""
        if old is None:
            return set()
        return {name for name, topic in old.topics.items() if topic.topic_id not in self.topics_by_id}


EMPTY_IMAGE = MetadataImage()


class _Delta:
    """Mutable working copies of the sections a batch of records touches."""

    def __init__(self, base: MetadataImage) -> None:
        self.base = base
        self.cluster_id = base.cluster_id
        self.next_producer_id = base.next_producer_id
        self.producer_id_floor = base.producer_id_floor
        self.features: dict[str, int] | None = None
        self.topics: dict[str, TopicImage] | None = None
        self.topics_by_id: dict[uuid.UUID, TopicImage] | None = None
        self.partitions: dict[uuid.UUID, dict[int, PartitionRegistration]] = {}
        self.brokers: dict[int, BrokerRegistration] | None = None
        self.configs: dict[ConfigResource, dict[str, str]] | None = None
        self.touched_configs: set[ConfigResource] = set()
        self.acls: dict[uuid.UUID, AclBinding] | None = None
        self.scram: dict[tuple[str, int], ScramCredential] | None = None
        self.tokens: dict[str, DelegationTokenRecord] | None = None
        self.client_quotas: dict[tuple[tuple[str, str | None], ...], Mapping[str, float]] | None = None

    # lazy copies
    def _topics(self) -> tuple[dict[str, TopicImage], dict[uuid.UUID, TopicImage]]:
        if self.topics is None or self.topics_by_id is None:
            self.topics = dict(self.base.topics)
            self.topics_by_id = dict(self.base.topics_by_id)
        return self.topics, self.topics_by_id

    def _partitions(self, topic_id: uuid.UUID) -> dict[int, PartitionRegistration]:
        parts = self.partitions.get(topic_id)
        if parts is None:
            _, by_id = self._topics()
            topic = by_id.get(topic_id)
            if topic is None:
                raise MetadataInvariantError(f"partition record for unknown topic id {topic_id}")
            parts = dict(topic.partitions)
            self.partitions[topic_id] = parts
        return parts

    def _brokers(self) -> dict[int, BrokerRegistration]:
        if self.brokers is None:
            self.brokers = dict(self.base.brokers)
        return self.brokers

    def _configs(self) -> dict[ConfigResource, dict[str, str]]:
        if self.configs is None:
            self.configs = dict(self.base.configs)  # type: ignore[arg-type]
        return self.configs

    def _config_of(self, resource: ConfigResource) -> dict[str, str]:
        configs = self._configs()
        if resource not in self.touched_configs:
            configs[resource] = dict(configs.get(resource, {}))
            self.touched_configs.add(resource)
        return configs[resource]

    def _acls(self) -> dict[uuid.UUID, AclBinding]:
        if self.acls is None:
            self.acls = dict(self.base.acls)
        return self.acls

    def _scram(self) -> dict[tuple[str, int], ScramCredential]:
        if self.scram is None:
            self.scram = dict(self.base.scram_credentials)
        return self.scram

    def replay(self, record: Record) -> None:
        match record:
            case TopicRecord(name=name, topic_id=topic_id):
                topics, by_id = self._topics()
                if name in topics or topic_id in by_id:
                    raise MetadataInvariantError(f"topic {name} ({topic_id}) already exists")
                t = TopicImage(name, topic_id, _empty())
                topics[name] = t
                by_id[topic_id] = t
                self.partitions[topic_id] = {}
            case PartitionRecord():
                self._partitions(record.topic_id)[record.partition_id] = PartitionRegistration(
                    record.replicas, record.isr, record.leader, record.leader_epoch, record.partition_epoch,
                    record.removing_replicas, record.adding_replicas, record.directories,
                )
            case PartitionChangeRecord():
                parts = self._partitions(record.topic_id)
                current = parts.get(record.partition_id)
                if current is None:
                    raise MetadataInvariantError(f"change of unknown partition {record.topic_id}:{record.partition_id}")
                parts[record.partition_id] = current.merge(record)
            case RemoveTopicRecord(topic_id=topic_id):
                topics, by_id = self._topics()
                topic = by_id.pop(topic_id, None)
                if topic is None:
                    raise MetadataInvariantError(f"removal of unknown topic id {topic_id}")
                del topics[topic.name]
                self.partitions.pop(topic_id, None)
                resource = ConfigResource(ConfigResourceType.TOPIC, topic.name)
                if resource in self.base.configs or resource in self.touched_configs:
                    self._configs().pop(resource, None)
                    self.touched_configs.discard(resource)
            case ConfigRecord():
                resource = ConfigResource(record.resource_type, record.resource_name)
                values = self._config_of(resource)
                if record.value is None:
                    values.pop(record.name, None)
                else:
                    values[record.name] = record.value
            case FeatureLevelRecord(name=name, feature_level=level):
                if self.features is None:
                    self.features = dict(self.base.features)
                if level == 0:
                    self.features.pop(name, None)
                else:
                    self.features[name] = level
            case RegisterBrokerRecord():
                self._brokers()[record.broker_id] = BrokerRegistration(
                    record.broker_id,
                    record.incarnation_id,
                    record.broker_epoch,
                    record.endpoints,
                    record.rack,
                    record.fenced,
                    log_dirs=record.log_dirs,
                    cordoned_log_dirs=record.cordoned_log_dirs,
                )
            case UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=epoch):
                brokers = self._brokers()
                b = brokers.get(broker_id)
                if b is not None and b.broker_epoch == epoch:
                    del brokers[broker_id]
            case FenceBrokerRecord(id=broker_id) | UnfenceBrokerRecord(id=broker_id):
                brokers = self._brokers()
                b = brokers.get(broker_id)
                if b is None:
                    raise MetadataInvariantError(f"fencing change of unknown broker {broker_id}")
                brokers[broker_id] = replace(b, fenced=isinstance(record, FenceBrokerRecord))
            case BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=epoch):
                brokers = self._brokers()
                b = brokers.get(broker_id)
                if b is not None and b.broker_epoch == epoch:
                    if record.in_controlled_shutdown == 1:
                        b = brokers[broker_id] = replace(b, in_controlled_shutdown=True)
                    if record.cordoned_log_dirs is not None:
                        b = brokers[broker_id] = replace(b, cordoned_log_dirs=record.cordoned_log_dirs)
                    if record.log_dirs is not None:
                        brokers[broker_id] = replace(b, log_dirs=record.log_dirs)
            case AccessControlEntryRecord():
                self._acls()[record.id] = AclBinding(
                    record.id,
                    record.resource_type,
                    record.resource_name,
                    record.pattern_type,
                    record.principal,
                    record.host,
                    record.operation,
                    record.permission_type,
                )
            case RemoveAccessControlEntryRecord(id=acl_id):
                if self._acls().pop(acl_id, None) is None:
                    raise MetadataInvariantError(f"removal of unknown ACL {acl_id}")
            case UserScramCredentialRecord():
                self._scram()[(record.name, record.mechanism)] = ScramCredential(
                    record.salt, record.stored_key, record.server_key, record.iterations)
            case RemoveUserScramCredentialRecord(name=name, mechanism=mechanism):
                if self._scram().pop((name, mechanism), None) is None:
                    raise MetadataInvariantError(f"removal of unknown SCRAM credential {name} ({mechanism})")
            case DelegationTokenRecord() | RemoveDelegationTokenRecord():
                tokens = self.tokens = dict(self.base.delegation_tokens) if self.tokens is None else self.tokens
                if isinstance(record, DelegationTokenRecord):
                    tokens[record.token_id] = record
                else:
                    tokens.pop(record.token_id, None)  # Kafka's replay ignores an unknown id too
            case ClientQuotaRecord(entity=entity, key=key):
                if self.client_quotas is None:
                    self.client_quotas = dict(self.base.client_quotas)
                quota_values: dict[str, float] = dict(self.client_quotas.get(entity, {}))
                if record.remove:
                    quota_values.pop(key, None)
                else:
                    quota_values[key] = float(record.value)
                if quota_values:
                    self.client_quotas[entity] = _frozen(quota_values)
                else:
                    self.client_quotas.pop(entity, None)
            case ProducerIdsRecord(broker_id=owner, next_producer_id=next_id):
                if next_id < self.next_producer_id:
                    raise MetadataInvariantError(f"producer id block going backwards to {next_id}")
                self.next_producer_id = next_id
                if owner == NO_BROKER:
                    self.producer_id_floor = next_id
            case ClusterIdRecord(cluster_id=cluster_id):
                self.cluster_id = cluster_id
            case NoOpRecord():
                pass
            case _:
                raise MetadataInvariantError(f"unsupported metadata record {type(record).__name__}")

    def build(self, offset: int) -> MetadataImage:
        base = self.base
        topics: Mapping[str, TopicImage] = base.topics
        topics_by_id: Mapping[uuid.UUID, TopicImage] = base.topics_by_id
        if self.topics is not None and self.topics_by_id is not None:
            for topic_id, parts in self.partitions.items():
                old = self.topics_by_id.get(topic_id)
                if old is None:
                    continue
                t = TopicImage(old.name, topic_id, _frozen(parts))
                self.topics[old.name] = t
                self.topics_by_id[topic_id] = t
            topics, topics_by_id = _frozen(self.topics), _frozen(self.topics_by_id)
        configs: Mapping[ConfigResource, Mapping[str, str]] = base.configs
        if self.configs is not None:
            for resource in self.touched_configs:
                values = self.configs.get(resource)
                if values is None:
                    continue
                if values:
                    self.configs[resource] = _frozen(values)  # type: ignore[assignment]
                else:
                    del self.configs[resource]
            configs = _frozen(self.configs)
        return MetadataImage(
            offset=offset,
            cluster_id=self.cluster_id,
            features=base.features if self.features is None else _frozen(self.features),
            topics=topics,
            topics_by_id=topics_by_id,
            brokers=base.brokers if self.brokers is None else _frozen(self.brokers),
            configs=configs,
            acls=base.acls if self.acls is None else _frozen(self.acls),
            scram_credentials=base.scram_credentials if self.scram is None else _frozen(self.scram),
            delegation_tokens=base.delegation_tokens if self.tokens is None else _frozen(self.tokens),
            client_quotas=base.client_quotas if self.client_quotas is None else _frozen(self.client_quotas),
            next_producer_id=self.next_producer_id,
            producer_id_floor=self.producer_id_floor,
        )
