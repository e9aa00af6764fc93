"""DescribeMirrors (key 99, KIP-1279 "Describe Mirrors"): per mirror, per topic partition:
source offset, destination offset (local log end), lag, state and last mirror epoch.

Each broker answers for the partitions it leads (offsets and lag from the data plane's
`mirror_manager.describe`, -1 when it has none); a partition led elsewhere is still listed
with its coordinator state and LME when it has one, offsets -1 (the client merges the
brokers' answers, keeping the entry with a known source offset). Topics removed from the
mirror stay listed while their states exist, so a failing-back destination learns their LME
from this cluster (KIP "Log Convergence")."""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Iterable
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.mirror_authorization import MIRROR_AUTHORIZATION_FAILED, describable_mirrors
from kmirror.broker.services import BrokerServices
from kmirror.kip1279.errors import MirrorError
from kmirror.kip1279.state import MirrorPartitionState
from kmirror.metadata.mirrors import (
    MIRRORING_DISABLED_MESSAGE,
    UNSUPPORTED_VERSION_CODE,
    mirror,
    mirror_topics,
    mirroring_enabled,
    mirrors,
)
from kmirror.mirror.coordinator.coordinator import PartitionStateResult
from kmirror.mirror.coordinator.records import NO_LAST_MIRRORED_EPOCH, MirrorPartitionKey
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.protocol.mirror.registry import schemas
from kmirror.types import TopicPartition

# Partitions described per step: a describe of 10,000 partitions gives the event loop back to
# other requests between chunks instead of holding it for the whole answer.
PARTITIONS_PER_STEP = 500


@api(99, "DescribeMirrors", 0, 0, schemas=schemas(99))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    mirror_cls, topic_cls = nested(rt, "DescribedMirror"), nested(rt, "TopicPartitions")
    image = services.metadata.image
    if not mirroring_enabled(image):
        return build(rt, throttle_time=datetime.timedelta(0), error_code=UNSUPPORTED_VERSION_CODE,
                     error_message=MIRRORING_DISABLED_MESSAGE, mirrors=())
    # KIP-1279: Describe on the ClusterMirror; describing all lists only the describable ones
    names = list(request.mirror_names) or list(mirrors(image))
    visible = describable_mirrors(services, ctx, names, listing=not request.mirror_names)
    if not request.mirror_names:
        names = [n for n in names if n in visible]
    described = []
    for name in names:
        if name not in visible:
            described.append(build(mirror_cls, error_code=MIRROR_AUTHORIZATION_FAILED, mirror_name=name, topics=()))
            continue
        if mirror(image, name) is None:
            described.append(build(mirror_cls, error_code=int(MirrorError.UNKNOWN_MIRROR), mirror_name=name, topics=()))
            continue
        topics = tuple(build(topic_cls, topic_name=topic_name, partitions=tuple(details))
                       for topic_name, details in (await _partitions(services, name, nested(rt, "PartitionDetail"))).items())
        described.append(build(mirror_cls, error_code=0, mirror_name=name, topics=topics))
    return build(rt, throttle_time=datetime.timedelta(0), error_code=0, mirrors=tuple(described))


Key = tuple[str, int, bool, MirrorPartitionKey]  # topic, partition, led here, state key


async def _partitions(services: BrokerServices, name: str, part_cls: Any) -> dict[str, list[Any]]:
    """Each listed partition's PartitionDetail, by topic, a chunk of partitions per step."""
    image = services.metadata.image
    keys: list[Key] = []
    for topic_name in mirror_topics(image, name, include_removed=True):
        topic = image.topics[topic_name]
        for p, reg in sorted(topic.partitions.items()):
            keys.append((topic_name, p, reg.leader == services.node_id,
                         MirrorPartitionKey(name, topic.topic_id, p)))
    out: dict[str, list[Any]] = {}
    service = services.mirror_coordinator
    if service is None:
        _describe(services, keys, itertools.repeat(None), part_cls, out)
        return out
    async for start, states in service.read_state_results_in_steps([k for *_, k in keys], PARTITIONS_PER_STEP):
        _describe(services, keys[start:start + len(states.partitions)], states.partitions, part_cls, out)
    return out


def _describe(services: BrokerServices, keys: list[Key], stored_states: Iterable[PartitionStateResult | None],
              part_cls: Any, out: dict[str, list[Any]]) -> None:
    """The rows of `keys`, whose coordinator states are `stored_states` in key order."""
    manager = getattr(services, "mirror_manager", None)
    led_tps = [TopicPartition(t, p) for t, p, led, _ in keys if led]
    data_plane = {} if manager is None or not led_tps else manager.describe(led_tps)
    for (topic_name, p, led, _), stored in zip(keys, stored_states, strict=False):
        known = stored is not None and stored.error is ErrorCode.none
        state = stored.state if known and stored is not None else MirrorPartitionState.UNKNOWN
        lme = stored.last_mirrored_epoch if known and stored is not None else NO_LAST_MIRRORED_EPOCH
        src = dest = lag = -1
        reason = None
        if not led:
            if not known or state is MirrorPartitionState.UNKNOWN:
                continue
        elif (desc := data_plane.get(TopicPartition(topic_name, p))) is not None:
            state = desc.state if state is MirrorPartitionState.UNKNOWN else state
            lme = max(lme, desc.last_mirror_epoch)
            reason = desc.reason if state is desc.state else None
            src, dest, lag = desc.source_offset, desc.destination_offset, desc.lag
        elif services.replica_manager is not None:
            local = services.replica_manager.get_partition(TopicPartition(topic_name, p))
            dest = -1 if local is None else int(local.log.log_end_offset)
        # DescribeMirrors has one version (v0): each row takes the schema's fields as they are
        out.setdefault(topic_name, []).append(part_cls(
            partition_index=p, source_offset=src, destination_offset=dest, lag=lag, state=state.name,
            last_mirror_epoch=lme, state_reason=reason))
