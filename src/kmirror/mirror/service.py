"""`MirrorCoordinatorService`: the asyncio shell of the mirror control plane on a broker.

It owns the sans-IO `MirrorCoordinator` (partition states and LMEs by mirror partition) and
the connection to source clusters the control plane needs (AddTopicsToMirror reads the source
topic's id, partition count and configs; the source cluster id is learned on first contact).

Contract for the data plane and the handlers:
- `await read_states(keys)` -> {key: MirrorPartitionState}: a partition the coordinator knows
  nothing about is UNKNOWN (KIP: the initial state);
- `await write_states(writes)` -> StatesResult, through the coordinator (transition table
  enforced there); states are held in memory only (persistence in `__mirror_state`,
  loading on leadership and routing to the coordinator broker are still to come);
- `await describe_source_topics(mirror, names)` -> SourceDescription.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from kmirror.mirror.config import MirrorConfig
from kmirror.mirror.coordinator.coordinator import MirrorCoordinator, StatesResult, StateWrite
from kmirror.mirror.coordinator.records import MirrorPartitionKey
from kmirror.mirror.state import MirrorPartitionState
from kmirror.protocol.errors import ErrorCode

DYNAMIC_TOPIC_CONFIG = 1  # Kafka ConfigSource: only configs set on the source topic are copied


@dataclass(frozen=True, slots=True)
class SourceTopic:
    name: str
    topic_id: UUID
    num_partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SourceDescription:
    cluster_id: str
    topics: Mapping[str, SourceTopic | int]
    """Per requested name: the source topic, or the Kafka error code the source answered."""


SourceLookup = Callable[[MirrorConfig, Sequence[str]], Awaitable[SourceDescription]]


async def admin_source_lookup(config: MirrorConfig, names: Sequence[str]) -> SourceDescription:
    """Describe topics at the source with the Admin client (Metadata with topic ids,
    DescribeConfigs), connecting with the mirror's source connection configs."""
    from kmirror.client.admin import Admin, ConfigResourceType
    from kmirror.client.errors import KafkaError

    admin = await Admin.connect(",".join(config.bootstrap_servers))
    try:
        cluster = await admin.describe_cluster()
        topics: dict[str, SourceTopic | int] = {}
        for name in names:
            try:
                desc = (await admin.describe_topics([name]))[name]
                entries = await admin.describe_configs(ConfigResourceType.TOPIC, name)
            except KafkaError as e:
                topics[name] = int(getattr(e, "code", ErrorCode.unknown_topic_or_partition))
                continue
            if desc.topic_id is None:
                topics[name] = int(ErrorCode.unknown_topic_id)
                continue
            configs = {e.name: e.value for e in entries
                       if e.source == DYNAMIC_TOPIC_CONFIG and e.value is not None and not e.is_sensitive}
            topics[name] = SourceTopic(name, desc.topic_id, len(desc.partitions), configs)
        return SourceDescription(cluster.cluster_id or "", topics)
    finally:
        await admin.close()


class MirrorCoordinatorService:
    def __init__(self, coordinator: MirrorCoordinator, source_lookup: SourceLookup = admin_source_lookup) -> None:
        self.coordinator = coordinator
        self._source_lookup = source_lookup
        self._request_ids = itertools.count()

    async def describe_source_topics(self, config: MirrorConfig, names: Sequence[str]) -> SourceDescription:
        return await self._source_lookup(config, names)

    def cached_state(self, mirror_name: str, topic_id: UUID, partition: int) -> MirrorPartitionState | None:
        """The state if this broker coordinates the partition and has loaded it, else None."""
        key = MirrorPartitionKey(mirror_name, topic_id, partition)
        if self.coordinator.coordinator_error(key) is not None:
            return None
        value = self.coordinator.state_of(key)
        return MirrorPartitionState.UNKNOWN if value is None else value.state

    async def read_states(self, keys: Sequence[MirrorPartitionKey]) -> dict[MirrorPartitionKey, MirrorPartitionState]:
        """The coordinator's state of each key; UNKNOWN when it holds none."""
        out: dict[MirrorPartitionKey, MirrorPartitionState] = {}
        for key in keys:
            value = self.coordinator.state_of(key)
            out[key] = MirrorPartitionState.UNKNOWN if value is None else value.state
        return out

    async def write_states(self, writes: Sequence[StateWrite]) -> StatesResult:
        request_id = next(self._request_ids)
        output = self.coordinator.write_states(request_id, writes)
        # The __mirror_state append is not wired yet: appends are acknowledged in memory.
        for append in output.appends:
            output.extend(self.coordinator.on_append_completed(append.ticket))
        result: Any = output.response_for(request_id)
        assert isinstance(result, StatesResult)
        return result


async def topic_partition_states(
    service: MirrorCoordinatorService | None, mirror_name: str, topic_id: UUID, num_partitions: int
) -> list[MirrorPartitionState]:
    """Every partition's state of one topic in one mirror (UNKNOWN without a coordinator)."""
    if service is None:
        return [MirrorPartitionState.UNKNOWN] * num_partitions
    keys = [MirrorPartitionKey(mirror_name, topic_id, p) for p in range(num_partitions)]
    states = await service.read_states(keys)
    return [states[k] for k in keys]
