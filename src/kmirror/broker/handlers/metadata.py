"""Metadata (key 3, v0-13): brokers, cluster id, controller id and topic/partition state from
the image, auto-creating unknown topics when `auto.create.topics.enable` and the request
allow it (Kafka's KafkaApis.handleTopicMetadataRequest + AutoTopicCreationManager).

A freshly auto-created topic is answered with LEADER_NOT_AVAILABLE and no partitions, as
Kafka does; clients retry. One request auto-creates at most
MAX_AUTO_CREATED_PARTITIONS_PER_REQUEST partitions (whole topics of `num.partitions`); the
unknown topics past that budget are answered LEADER_NOT_AVAILABLE too and created by a later
request, so a Metadata request naming thousands of unknown topics costs bounded time. Brokers are listed with their endpoint on the listener the
request came in on. Each auto-creation is logged at INFO with the client id that asked for it.

Authorization (Kafka's): listing all topics lists those the principal may DESCRIBE; a topic
asked for by name without DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED, by id
UNKNOWN_TOPIC_ID (its existence is not revealed); auto-creation needs CREATE on the cluster
or on the topic, else TOPIC_AUTHORIZATION_FAILED. The authorized-operations fields report
the operations the principal may do.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import uuid
from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import CLUSTER, CREATE, DESCRIBE, TOPIC
from kmirror.broker.services import BrokerServices
from kmirror.metadata.controller.acls import CLUSTER_NAME, AclOperation
from kmirror.metadata.controller.topics import CreatableTopic, is_internal_topic, validate_topic_name
from kmirror.metadata.controller_service import MetadataOperationError
from kmirror.metadata.image import MetadataImage, PartitionRegistration, TopicImage
from kmirror.protocol.entities import build, nested

log = logging.getLogger(__name__)

AUTHORIZED_OPERATIONS_OMITTED = -2147483648
GROUP_METADATA_TOPIC = "__consumer_offsets"
MAX_AUTO_CREATED_PARTITIONS_PER_REQUEST = 1000

TOPIC_OPERATIONS = (
    AclOperation.READ,
    AclOperation.WRITE,
    AclOperation.CREATE,
    AclOperation.DELETE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
)
CLUSTER_OPERATIONS = (
    AclOperation.CREATE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
    AclOperation.CLUSTER_ACTION,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE,
)


def operations_bitfield(operations: Sequence[int]) -> int:
    """Kafka's authorized-operations encoding: bit n set when operation code n is allowed
    (no authorizer: everything is allowed)."""
    bits = 0
    for op in operations:
        bits |= 1 << int(op)
    return bits


@api(3, "Metadata", 0, 13)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    version = ctx.api_version
    metadata = services.metadata
    config = services.config
    include_ops = bool(getattr(request, "include_topic_authorized_operations", False))

    requested = request.topics
    all_topics = requested is None or (version == 0 and len(requested) == 0)
    allow_auto = bool(getattr(request, "allow_auto_topic_creation", True)) and config.auto_create_topics_enable

    topic_entries: list[Any] = []
    authorization = services.authorization
    if all_topics:
        image = metadata.image
        # Kafka: listing every topic leaves out the undescribable ones, not a refusal
        describable = authorization.filter(ctx, DESCRIBE, TOPIC, image.topics, log_if_denied=False)
        topic_entries = [_topic(rt, image, t, include_ops) for name, t in sorted(image.topics.items())
                         if name in describable]
    else:
        to_create: list[str] = []
        describable = authorization.filter(ctx, DESCRIBE, TOPIC, {t.name for t in requested if t.name is not None})
        by_id = {t.topic_id for t in requested if getattr(t, "topic_id", None) is not None}
        id_names = {metadata.image.topics_by_id[i].name for i in by_id if i in metadata.image.topics_by_id}
        describable |= authorization.filter(ctx, DESCRIBE, TOPIC, id_names)
        may_create_all: bool | None = None  # asked at the first topic to create (Kafka: a probe)
        deferred: dict[str, ErrorCode] = {n: ErrorCode.topic_authorization_failed
                                          for t in requested if (n := t.name) is not None and n not in describable}
        seen: set[str] = set()
        budget = MAX_AUTO_CREATED_PARTITIONS_PER_REQUEST
        wanted: list[tuple[str | None, uuid.UUID | None]] = []
        for t in requested:
            name = getattr(t, "name", None)
            topic_id = getattr(t, "topic_id", None)
            if topic_id is not None and topic_id.int == 0:
                topic_id = None
            wanted.append((name, topic_id))
            image = metadata.image
            if (
                name is not None
                and name not in image.topics
                and allow_auto
                and name not in seen
                and name not in deferred
                and validate_topic_name(name) is None
            ):
                seen.add(name)
                if may_create_all is None:
                    may_create_all = authorization.authorize_cluster(ctx, CREATE, log_if_denied=False)
                if not may_create_all and not authorization.authorize(ctx, CREATE, TOPIC, name):
                    deferred[name] = ErrorCode.topic_authorization_failed
                elif budget >= config.num_partitions or name == GROUP_METADATA_TOPIC:
                    budget -= config.num_partitions
                    to_create.append(name)
                else:
                    deferred[name] = ErrorCode.leader_not_available
        if to_create:
            # which client re-creates a deleted topic is an operator's first question
            log.info("auto-creating topics %s for client %r (Metadata v%d from %s)", to_create, ctx.header.client_id,
                     version, ctx.client_host)
        created_errors = {**deferred, **await _auto_create(services, to_create)}
        image = metadata.image
        for name, topic_id in wanted:
            hidden = image.topics_by_id.get(topic_id) if name is None and topic_id is not None else None
            if hidden is not None and hidden.name not in describable:
                topic_entries.append(build(nested(rt, "MetadataResponseTopic"), error_code=ErrorCode.unknown_topic_id,
                                           name=None, topic_id=topic_id, is_internal=False, partitions=()))
                continue
            topic_entries.append(_requested_topic(rt, image, name, topic_id, created_errors, include_ops))

    if include_ops and not authorization.unrestricted(ctx):
        topic_entries = [_with_operations(authorization, ctx, t) for t in topic_entries]
    broker_cls = nested(rt, "MetadataResponseBroker")
    brokers = []
    for b in metadata.image.live_brokers():
        ep = b.endpoint(ctx.listener)
        if ep is None:
            continue
        brokers.append(build(broker_cls, node_id=i32(b.broker_id), host=ep.host, port=i32(ep.port), rack=b.rack))

    include_cluster_ops = bool(getattr(request, "include_cluster_authorized_operations", False))
    return build(
        rt,
        throttle_time=datetime.timedelta(0),
        brokers=tuple(brokers),
        cluster_id=metadata.image.cluster_id,
        controller_id=i32(metadata.controller_id),
        topics=tuple(topic_entries),
        cluster_authorized_operations=i32(
            operations_bitfield(authorization.authorized_operations(ctx, CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS))
            if include_cluster_ops else AUTHORIZED_OPERATIONS_OMITTED
        ),
        error_code=ErrorCode.none,
    )


def _with_operations(authorization: Any, ctx: RequestContext, entry: Any) -> Any:
    """A described topic's entry with the operations this principal may do on it."""
    if entry.name is None or entry.error_code != ErrorCode.none:
        return entry
    allowed = authorization.authorized_operations(ctx, TOPIC, entry.name, TOPIC_OPERATIONS)
    return dataclasses.replace(entry, topic_authorized_operations=i32(operations_bitfield(allowed)))


async def _auto_create(services: BrokerServices, names: list[str]) -> dict[str, ErrorCode]:
    """Create missing topics; the error each name should be answered with."""
    if not names:
        return {}
    metadata = services.metadata
    config = services.config
    out: dict[str, ErrorCode] = {}
    user_topics: list[CreatableTopic] = []
    for name in names:
        if name == GROUP_METADATA_TOPIC:
            try:
                await metadata.ensure_internal_topic(
                    name,
                    config.offsets_topic_num_partitions,
                    config.offsets_topic_replication_factor,
                    {"cleanup.policy": "compact", "segment.bytes": str(config.get("offsets.topic.segment.bytes"))},
                )
                out[name] = ErrorCode.leader_not_available
            except MetadataOperationError:
                out[name] = ErrorCode.invalid_replication_factor
        elif is_internal_topic(name):
            out[name] = ErrorCode.unknown_topic_or_partition
        else:
            user_topics.append(CreatableTopic(name))
    if user_topics:
        for result in await metadata.create_topics(user_topics):
            code = result.error.code
            # Another request created it first: it exists, so answer with its metadata.
            out[result.name] = ErrorCode.leader_not_available if code in (ErrorCode.none,) else code
            if code == ErrorCode.topic_already_exists:
                out.pop(result.name)
    return out


def _requested_topic(
    rt: type,
    image: MetadataImage,
    name: str | None,
    topic_id: uuid.UUID | None,
    created: dict[str, ErrorCode],
    include_ops: bool,
) -> Any:
    topic_cls = nested(rt, "MetadataResponseTopic")
    if name is None:
        topic = image.topics_by_id.get(topic_id) if topic_id is not None else None
        if topic is None:
            return build(topic_cls, error_code=ErrorCode.unknown_topic_id, name=None, topic_id=topic_id or uuid.UUID(int=0),
                         is_internal=False, partitions=())
        return _topic(rt, image, topic, include_ops)
    if name in created:
        return build(topic_cls, error_code=created[name], name=name, topic_id=uuid.UUID(int=0),
                     is_internal=is_internal_topic(name), partitions=())
    topic = image.topics.get(name)
    if topic is None:
        err = validate_topic_name(name)
        code = err.code if err is not None else ErrorCode.unknown_topic_or_partition
        return build(topic_cls, error_code=code, name=name, topic_id=uuid.UUID(int=0), is_internal=False, partitions=())
    return _topic(rt, image, topic, include_ops)


class _TopicEntries:
    """Topic entries of the current metadata image, per response version and `include_ops`:
    an image is immutable, so an entry is built once for it (and its encoding kept with it:
    `kmirror.protocol.item_cache`)."""

    def __init__(self) -> None:
        self.image: MetadataImage | None = None
        self.entries: dict[tuple[type, bool, str], Any] = {}

    def get(self, rt: type, image: MetadataImage, topic: TopicImage, include_ops: bool) -> Any:
        if self.image is not image:
            self.image, self.entries = image, {}
        key = (rt, include_ops, topic.name)
        entry = self.entries.get(key)
        if entry is None:
            entry = self.entries[key] = _build_topic(rt, image, topic, include_ops)
        return entry


_topic = _TopicEntries().get


def partition_fields(index: int, p: PartitionRegistration, live: set[int], image: MetadataImage) -> dict[str, Any]:
    """A partition's leader (-1 when its broker is not live), epoch, replicas, ISR and offline
    replicas (a broker not live, or a log dir of its broker offline, KIP-858), as Metadata and
    DescribeTopicPartitions answer them."""
    offline = image.offline_replicas(p)
    return {
        "partition_index": i32(index),
        "leader_id": i32(p.leader if p.leader in live else -1),
        "leader_epoch": i32(p.leader_epoch),
        "replica_nodes": tuple(i32(r) for r in p.replicas),
        "isr_nodes": tuple(i32(r) for r in p.isr),
        "offline_replicas": tuple(i32(r) for r in p.replicas if r not in live or r in offline),
    }


def _build_topic(rt: type, image: MetadataImage, topic: TopicImage, include_ops: bool) -> Any:
    topic_cls = nested(rt, "MetadataResponseTopic")
    partition_cls = nested(rt, "MetadataResponsePartition")
    live = {b.broker_id for b in image.live_brokers()}
    partitions = []
    for index, p in sorted(topic.partitions.items()):
        fields = partition_fields(index, p, live, image)
        error = ErrorCode.none if fields["leader_id"] != -1 else ErrorCode.leader_not_available
        partitions.append(build(partition_cls, error_code=error, **fields))
    return build(
        topic_cls,
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=is_internal_topic(topic.name),
        partitions=tuple(partitions),
        topic_authorized_operations=i32(
            operations_bitfield(TOPIC_OPERATIONS) if include_ops else AUTHORIZED_OPERATIONS_OMITTED
        ),
    )
