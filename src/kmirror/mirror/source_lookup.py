"""What the mirror control plane asks a source cluster about its topics: each topic's id,
partition count and configs, and the source's cluster id (AddTopicsToMirror, and the
metadata sync's topic pass).

The source is often a region away, and each request is a round trip. A lookup costs one
Metadata and one DescribeConfigs, sent together on one connection, whatever the number of
topics, and the cluster id comes with the Metadata answer. `MirrorSourceLookups` keeps one
Admin client per mirror between lookups (the metadata sync's `SyncAdmins`, replaced when the
mirror's connection configs change), so a lookup does not open a connection (TCP, TLS, SASL,
ApiVersions) each time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from uuid import UUID

from kmirror.client.admin import Admin, ConfigEntry, ConfigResourceType
from kmirror.client.errors import KafkaError
from kmirror.config.mirror import MirrorConfig
from kmirror.config.topic import ConfigSource
from kmirror.mirror.metadata_sync.admins import SyncAdmins, client_admin
from kmirror.protocol.errors import ErrorCode

log = logging.getLogger("kmirror.mirror.coordinator")


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


SourceLookup = Callable[[str, MirrorConfig, Sequence[str]], Awaitable[SourceDescription]]
"""(mirror name, its config, topic names) -> what the mirror's source says of them."""


async def admin_source_lookup(mirror_name: str, config: MirrorConfig, names: Sequence[str]) -> SourceDescription:
    """`describe_source` with an Admin of its own, closed afterwards."""
    admin = client_admin(",".join(config.bootstrap_servers), f"mirror-{mirror_name}-lookup", config)
    try:
        return await describe_source(admin, names)
    finally:
        await admin.close()


async def describe_source(admin: Admin, names: Sequence[str]) -> SourceDescription:
    """The source cluster id and `describe_source_topics`, in one round trip on a connected
    Admin: the cluster id is that of the Metadata answer (every version since v2 carries it).
    No Metadata of every topic: a source's topics may number thousands of partitions each."""
    await admin.cluster.any_connection()  # one connection, then both requests on it together
    topics = await describe_source_topics(admin, names)
    return SourceDescription(admin.cluster.metadata.cluster_id or "", topics)


async def describe_source_topics(admin: Admin, names: Sequence[str]) -> dict[str, SourceTopic | int]:
    """Each source topic, or the Kafka error code to answer for it, from one Metadata and one
    DescribeConfigs sent together (every name a resource), whatever their number.

    A topic without an id (a source reporting none or the zero UUID) is UNKNOWN_TOPIC_ID:
    mirror states and failback are keyed by the source's topic id, a made-up one would not
    be it. A source without DescribeConfigs (not a consumer API; librdkafka's mock cluster
    lacks it) has no topic configs to copy: the topic gets the destination's defaults, as
    for a source topic that sets none."""
    described, configs = await asyncio.gather(admin.describe_topics_results(names), _topic_configs(admin, names))
    out: dict[str, SourceTopic | int] = {}
    for name in names:
        desc = described.get(name, KafkaError(ErrorCode.unknown_topic_or_partition, context=name))
        if isinstance(desc, KafkaError):
            out[name] = desc.error_code
            continue
        if desc.topic_id is None:
            out[name] = int(ErrorCode.unknown_topic_id)
            continue
        entries = configs.get(name, KafkaError(ErrorCode.unknown_server_error, None, f"topic {name}: no answer"))
        if isinstance(entries, KafkaError):
            out[name] = entries.error_code
            continue
        out[name] = SourceTopic(name, desc.topic_id, len(desc.partitions), {
            e.name: e.value for e in entries
            if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG and e.value is not None and not e.is_sensitive})
    return out


async def _topic_configs(admin: Admin, names: Sequence[str]) -> dict[str, list[ConfigEntry] | KafkaError]:
    if not names:
        return {}
    try:
        return await admin.describe_configs_results(ConfigResourceType.TOPIC, list(names))
    except KafkaError as e:
        if e.error_code != ErrorCode.unsupported_version:
            raise
        log.info("source topics %s: the source does not support DescribeConfigs, no topic configs copied",
                 ", ".join(names))
        return {name: [] for name in names}


class MirrorSourceLookups:
    """A `SourceLookup` through one Admin client per mirror (`SyncAdmins.source`), kept
    connected between lookups; the one of a mirror whose connection configs changed is closed
    after the lookup that replaced it."""

    def __init__(self, admins: SyncAdmins) -> None:
        self.admins = admins

    async def __call__(self, mirror_name: str, config: MirrorConfig, names: Sequence[str]) -> SourceDescription:
        try:
            return await describe_source(self.admins.source(mirror_name, config), names)
        finally:
            await self.admins.close_retired()

    async def close(self) -> None:
        await self.admins.close()
