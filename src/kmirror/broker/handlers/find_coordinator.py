"""FindCoordinator (key 10, v0-v6; v4+ batches `coordinator_keys`).

GROUP keys: the leader of the group's `__consumer_offsets` partition (any broker of the
cluster, at its endpoint for the request's listener), created on first use
(Kafka auto-creates the internal topic here). COORDINATOR_NOT_AVAILABLE while the topic or
partition is not ready, so clients retry; when the leader is this node and it is still
loading the partition, the answer waits for the load (at most `LOAD_WAIT_MS`).
TRANSACTION keys: the same for the transactional id's `__transaction_state` partition; an
empty or over-long id is INVALID_REQUEST. SHARE (2) is INVALID_REQUEST.
MIRROR keys (3, KIP-1279, `<mirror>:<topic id>:<partition>`): the leader of the key's
`__mirror_state` partition, the topic created on first use; INVALID_REQUEST for a key that
does not parse, UNSUPPORTED_VERSION while `mirror.version` is 0.

Authorization: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) or on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), as Kafka's; a MIRROR key needs CLUSTER_ACTION on the
cluster (KIP-1279 "Security Control"; CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import datetime
import logging
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import CLUSTER_ACTION, DESCRIBE, GROUP, TRANSACTIONAL_ID
from kmirror.broker.services import BrokerServices
from kmirror.coordinator.transaction.config import MAX_TRANSACTIONAL_ID_BYTES, TRANSACTION_STATE_TOPIC
from kmirror.metadata.mirrors import MIRRORING_DISABLED_MESSAGE, mirroring_enabled
from kmirror.mirror.coordinator.records import MirrorPartitionKey
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.protocol.mirror.find_coordinator import (
    MIRROR_COORDINATOR_TYPE,
    InvalidMirrorCoordinatorKey,
    MirrorCoordinatorKey,
)

log = logging.getLogger("kmirror.coordinator")

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
CONSUMER_OFFSETS = "__consumer_offsets"
# How long FindCoordinator waits for this node to finish loading a partition the metadata
# says it leads, before answering COORDINATOR_NOT_AVAILABLE. Clients retry that answer only
# a few times within a few hundred ms (librdkafka: twice, 100 ms apart, then it waits for a
# broker state change), while loading a fresh `__consumer_offsets` on a busy node takes longer.
LOAD_WAIT_MS = 5000
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "104857600", "compression.type": "producer"}


@api(10, "FindCoordinator", 0, 6)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    key_type = int(getattr(request, "key_type", GROUP_KEY_TYPE))
    if ctx.api_version >= 4:
        Coordinator = nested(rt, "Coordinator")
        answers = []
        for key in request.coordinator_keys:
            error, message, node_id, host, port = await _find(services, ctx, key_type, key)
            answers.append(Coordinator(key=key, node_id=node_id, host=host, port=port, error_code=error,
                                       error_message=message))
        return build(rt, throttle_time=datetime.timedelta(0), coordinators=tuple(answers))
    error, message, node_id, host, port = await _find(services, ctx, key_type, request.key)
    return build(rt, throttle_time=datetime.timedelta(0), error_code=error, error_message=message,
                 node_id=node_id, host=host, port=port)


async def _find(
    services: BrokerServices, ctx: RequestContext, key_type: int, key: str
) -> tuple[ErrorCode, str | None, int, str, int]:
    def fail(error: ErrorCode, message: str | None = None) -> tuple[ErrorCode, str | None, int, str, int]:
        return error, message, -1, "", -1

    authorization = services.authorization
    if key_type == TRANSACTION_KEY_TYPE and not authorization.authorize(ctx, DESCRIBE, TRANSACTIONAL_ID, key):
        return fail(ErrorCode.transactional_id_authorization_failed)
    if key_type == GROUP_KEY_TYPE and not authorization.authorize(ctx, DESCRIBE, GROUP, key):
        return fail(ErrorCode.group_authorization_failed)
    if key_type == MIRROR_COORDINATOR_TYPE and not authorization.authorize_cluster(ctx, CLUSTER_ACTION):
        return fail(ErrorCode.cluster_authorization_failed)
    if key_type == TRANSACTION_KEY_TYPE:
        return await _find_transaction(services, ctx, key)
    if key_type == MIRROR_COORDINATOR_TYPE:
        return await _find_mirror(services, ctx, key)
    if key_type != GROUP_KEY_TYPE:
        return fail(ErrorCode.invalid_request, f"unsupported coordinator key type {key_type}")
    coordinator = services.groups
    config = coordinator.core_config
    return await _find_internal(
        services, ctx, coordinator, key, CONSUMER_OFFSETS, num_partitions=config.offsets_topic_num_partitions,
        replication_factor=config.offsets_topic_replication_factor,
        configs={**OFFSETS_TOPIC_CONFIGS, "segment.bytes": str(config.offsets_topic_segment_bytes)})


async def _find_transaction(
    services: BrokerServices, ctx: RequestContext, key: str
) -> tuple[ErrorCode, str | None, int, str, int]:
    """The leader of the transactional id's `__transaction_state` partition (Kafka
    `TransactionStateManager.partitionFor`), the topic created on first use."""
    coordinator = services.transaction_coordinator
    if coordinator is None:
        return ErrorCode.coordinator_not_available, None, -1, "", -1
    if not key or len(key.encode()) > MAX_TRANSACTIONAL_ID_BYTES:
        return ErrorCode.invalid_request, "invalid transactional id", -1, "", -1
    config = coordinator.config
    return await _find_internal(
        services, ctx, coordinator, key, TRANSACTION_STATE_TOPIC,
        num_partitions=config.transaction_state_log_num_partitions,
        replication_factor=config.transaction_state_log_replication_factor, configs=config.topic_configs())


async def _find_internal(
    services: BrokerServices, ctx: RequestContext, coordinator: Any, key: str, topic: str, *,
    num_partitions: int, replication_factor: int, configs: dict[str, str],
) -> tuple[ErrorCode, str | None, int, str, int]:
    """The coordinator of `key`: the leader of its partition of the internal `topic`."""

    def fail(error: ErrorCode, message: str | None = None) -> tuple[ErrorCode, str | None, int, str, int]:
        return error, message, -1, "", -1

    metadata = services.metadata
    if metadata is not None:
        try:
            await metadata.ensure_internal_topic(
                topic, num_partitions=num_partitions, replication_factor=replication_factor, configs=configs)
        except Exception as exc:  # e.g. not enough brokers yet: the client retries
            log.warning("cannot create %s: %s", topic, exc)
            return fail(ErrorCode.coordinator_not_available, str(exc))
    # The coordinator is the leader of the key's partition of the topic (Kafka).
    leader = _partition_leader(metadata, coordinator.partition_for(key), topic) if metadata is not None else None
    if leader is not None and leader != services.node_id:
        broker = metadata.image.brokers.get(leader)
        endpoint = None if broker is None or broker.fenced else broker.endpoint(ctx.listener)
        if endpoint is None:
            return fail(ErrorCode.coordinator_not_available)
        return ErrorCode.none, None, leader, endpoint.host, endpoint.port
    if leader == services.node_id and coordinator.coordinator_error(key) is not None:
        # The metadata names this node the leader (e.g. of a partition just created above):
        # its replica becomes leader and the coordinator loads the partition in a moment.
        await coordinator.until_loaded(coordinator.partition_for(key), LOAD_WAIT_MS)
    error = coordinator.coordinator_error(key)
    if error is not None:
        # Not led yet (election in progress) or still loading: the client retries.
        return fail(ErrorCode.coordinator_not_available)
    listener = services.config.advertised_listener(ctx.listener)
    return ErrorCode.none, None, services.node_id, listener.host, listener.port


def _partition_leader(metadata: Any, partition: int, topic_name: str = CONSUMER_OFFSETS) -> int | None:
    image = getattr(metadata, "image", None)
    if image is None:
        return None
    topic = image.topics.get(topic_name)
    reg = None if topic is None else topic.partitions.get(partition)
    return None if reg is None or reg.leader < 0 else int(reg.leader)


async def _find_mirror(
    services: BrokerServices, ctx: RequestContext, key: str
) -> tuple[ErrorCode, str | None, int, str, int]:
    def fail(error: ErrorCode, message: str | None = None) -> tuple[ErrorCode, str | None, int, str, int]:
        return error, message, -1, "", -1

    try:
        parsed = MirrorCoordinatorKey.parse(key)
    except InvalidMirrorCoordinatorKey as exc:
        return fail(ErrorCode.invalid_request, str(exc))
    service = services.mirror_coordinator
    if services.metadata is None or not mirroring_enabled(services.metadata.image):
        return fail(ErrorCode.unsupported_version, MIRRORING_DISABLED_MESSAGE)
    if service is None:
        return fail(ErrorCode.coordinator_not_available)
    if await service.ensure_state_topic() is not ErrorCode.none:
        return fail(ErrorCode.coordinator_not_available)
    mkey = MirrorPartitionKey(parsed.mirror_name, parsed.topic_id, parsed.partition)
    leader = service.coordinator_node(mkey)
    if leader is None:
        return fail(ErrorCode.coordinator_not_available)
    if leader == services.node_id:
        if service.coordinator.coordinator_error(mkey) is not None:
            return fail(ErrorCode.coordinator_not_available)  # electing or loading: the client retries
        listener = services.config.advertised_listener(ctx.listener)
        return ErrorCode.none, None, services.node_id, listener.host, listener.port
    broker = services.metadata.image.brokers.get(leader)
    endpoint = None if broker is None or broker.fenced else broker.endpoint(ctx.listener)
    if endpoint is None:
        return fail(ErrorCode.coordinator_not_available)
    return ErrorCode.none, None, leader, endpoint.host, endpoint.port
