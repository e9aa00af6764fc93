"""Admin methods for cluster mirrors (KIP-1279 "Public Interfaces" > Admin Client).

`MirrorAdmin` is mixed into `kmirror.client.admin.Admin`; it needs only `self.cluster`
(a `Cluster`) and `self.timeout_ms`. Method names and semantics are the KIP's:

- `create_mirror(name, configs)` / `delete_mirror(name)`: raise `KafkaError` on failure;
- `add_topics_to_mirror`, `remove_topics_from_mirror`, `pause_mirror_topics`,
  `resume_mirror_topics`: topic name -> None on success or its `KafkaError` (the KIP's
  per-topic futures); a top-level error raises;
- `list_mirrors()` -> `[ListedMirror]`; `describe_mirrors(names, topics)` ->
  `[MirrorPartitionDescription]` sorted by (mirror, topic, partition).

The KIP's errors (134-143) carry their KIP names (`TOPIC_ALREADY_IN_MIRROR`); when a
response has no message, the KIP's default message is used.

Routing: writes go where the Admin sends other admin writes (`controller_connection()`; a
broker forwards them to the controller). ListMirrors reads one broker's metadata cache.
DescribeMirrors is sent to every broker of the cluster and the answers merged, because a
broker reports only the partitions it leads or has lag information for (KIP "Describe
Mirrors"); a partition reported twice keeps the entry with a known source offset and the
highest destination offset.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.client.cluster import Cluster
from kmirror.client.errors import KafkaClientError, KafkaConnectionError, KafkaError, KafkaProtocolError
from kmirror.kip1279 import errors as mirror_errors
from kmirror.protocol.entities import build, has_field, nested
from kmirror.protocol.mirror.registry import MIRROR_APIS

CREATE_MIRROR = 94
ADD_TOPICS_TO_MIRROR = 95
REMOVE_TOPICS_FROM_MIRROR = 96
LIST_MIRRORS = 98
DESCRIBE_MIRRORS = 99
PAUSE_MIRROR_TOPICS = 102
RESUME_MIRROR_TOPICS = 103
DELETE_MIRROR = 104

UNSUPPORTED_VERSION = 35


@dataclass(frozen=True, slots=True)
class ListedMirror:
    name: str
    source_bootstrap: str
    source_cluster_id: str
    topic_count: int


@dataclass(frozen=True, slots=True)
class MirrorPartitionDescription:
    mirror_name: str
    topic: str
    partition: int
    source_offset: int
    destination_offset: int
    lag: int
    state: str
    last_mirror_epoch: int
    reason: str | None = None
    """Why the partition is STOPPED or FAILED, when its leader says (kmirror brokers)."""


ADD_UNKNOWN_TOPIC_MESSAGE = "The topic does not exist on the source cluster"


def mirror_error(code: int, message: str | None, context: str | None) -> KafkaError:
    """A `KafkaError` for `code`, with the KIP's message when the broker sent none."""
    return KafkaError(code, message or mirror_errors.error_message(code), context)


def check_mirror(code: int, message: str | None, context: str | None) -> None:
    if code:
        raise mirror_error(code, message, context)


def request_type(conn: Any, api_key: int) -> type[Any]:
    """The negotiated request entity; UNSUPPORTED_VERSION when the broker lacks the RPC
    (a broker without cluster mirroring)."""
    if api_key not in conn.api_versions:
        name = MIRROR_APIS[api_key][0]
        raise KafkaError(UNSUPPORTED_VERSION, f"{conn.address} does not support {name} (no cluster mirroring)", name)
    rt: type[Any] = conn.request_type(api_key)
    return rt


class MirrorAdmin:
    cluster: Cluster
    timeout_ms: int

    async def create_mirror(self, name: str, configs: Mapping[str, str]) -> None:
        conn = await self.cluster.controller_connection()
        rt = request_type(conn, CREATE_MIRROR)
        Config = nested(rt, "MirrorConfig")
        request = build(rt, mirror_name=name,
                        config=tuple(build(Config, name=k, value=v) for k, v in sorted(configs.items())))
        response = await conn.send(request)
        check_mirror(int(response.error_code), response.error_message, f"mirror {name}")

    async def delete_mirror(self, name: str) -> None:
        conn = await self.cluster.controller_connection()
        response = await conn.send(build(request_type(conn, DELETE_MIRROR), mirror_name=name))
        check_mirror(int(response.error_code), response.error_message, f"mirror {name}")

    async def add_topics_to_mirror(
        self, name: str, topics: Iterable[str], replication_factor: int | None = None
    ) -> dict[str, KafkaError | None]:
        """Topics by name. `replication_factor` is for topics the destination creates from the
        source (None: the destination's `default.replication.factor`), sent in the request's
        tagged `ReplicationFactor` field."""
        extra: dict[str, Any] = {}
        if replication_factor is not None:
            extra["replication_factor"] = replication_factor
        results = await self._topics_request(ADD_TOPICS_TO_MIRROR, name, topics, extra)
        # Add resolves names at the source; the KIP's message for code 3 speaks of the target.
        return {t: KafkaError(e.error_code, ADD_UNKNOWN_TOPIC_MESSAGE, t)
                if e is not None and e.error_code == ErrorCode.unknown_topic_or_partition else e
                for t, e in results.items()}

    async def remove_topics_from_mirror(self, name: str, topics: Iterable[str]) -> dict[str, KafkaError | None]:
        """Failover: the topics leave the mirror and become writable once STOPPED."""
        return await self._topics_request(REMOVE_TOPICS_FROM_MIRROR, name, topics)

    async def pause_mirror_topics(self, name: str, topics: Iterable[str]) -> dict[str, KafkaError | None]:
        return await self._topics_request(PAUSE_MIRROR_TOPICS, name, topics)

    async def resume_mirror_topics(self, name: str, topics: Iterable[str]) -> dict[str, KafkaError | None]:
        return await self._topics_request(RESUME_MIRROR_TOPICS, name, topics)

    async def _topics_request(
        self, api_key: int, name: str, topics: Iterable[str], extra: Mapping[str, Any] | None = None
    ) -> dict[str, KafkaError | None]:
        names = sorted(set(topics))
        conn = await self.cluster.controller_connection()
        rt = request_type(conn, api_key)
        for field_name in extra or {}:
            if not has_field(rt, field_name):
                raise KafkaProtocolError(
                    f"{MIRROR_APIS[api_key][0]} v{rt.__version__} has no {field_name} field; "
                    f"the broker cannot honour it"
                )
        TopicData = nested(rt, "TopicData")
        request = build(rt, mirror_name=name,
                        topics=tuple(build(TopicData, topic_id=None, topic_name=t) for t in names),
                        **(extra or {}))
        response = await conn.send(request)
        check_mirror(int(response.error_code), response.error_message, f"mirror {name}")
        out: dict[str, KafkaError | None] = {}
        for r in response.topics:
            code = int(r.error_code)
            out[r.name] = mirror_error(code, None, r.name) if code else None
        return out

    async def list_mirrors(self) -> list[ListedMirror]:
        conn = await self.cluster.any_connection()
        response = await conn.send(build(request_type(conn, LIST_MIRRORS)))
        check_mirror(int(response.error_code), response.error_message, "ListMirrors")
        return sorted(
            (ListedMirror(m.mirror_name, m.source_bootstrap, m.source_cluster_id, int(m.topic_count))
             for m in response.mirrors),
            key=lambda m: m.name,
        )

    async def describe_mirrors(
        self, names: Iterable[str] | None = None, topics: str | Iterable[str] | None = None
    ) -> list[MirrorPartitionDescription]:
        """Every partition of the named mirrors (None or empty: all mirrors). `topics` filters:
        a full-match regex, or a collection of topic names."""
        wanted = tuple(sorted(set(names or ())))
        brokers = sorted(self.cluster.metadata.brokers)
        connections: list[Any] = []
        failures: list[str] = []
        for broker_id in brokers:
            try:
                connections.append(await self.cluster.connection(broker_id))
            except KafkaConnectionError as exc:
                failures.append(str(exc))
        if not connections:
            connections.append(await self.cluster.any_connection())
        merged: dict[tuple[str, str, int], MirrorPartitionDescription] = {}
        answered = 0
        for conn in connections:
            try:
                response = await conn.send(build(request_type(conn, DESCRIBE_MIRRORS), mirror_names=wanted,
                                                 include_authorized_operations=False))
            except KafkaConnectionError as exc:  # a broker down: the others still answer
                failures.append(str(exc))
                continue
            answered += 1
            check_mirror(int(response.error_code), response.error_message, "DescribeMirrors")
            for m in response.mirrors:
                check_mirror(int(m.error_code), None, f"mirror {m.mirror_name}")
                for t in m.topics:
                    for p in t.partitions:
                        d = MirrorPartitionDescription(
                            m.mirror_name, t.topic_name, int(p.partition_index), int(p.source_offset),
                            int(p.destination_offset), int(p.lag), p.state, int(p.last_mirror_epoch),
                            getattr(p, "state_reason", None))
                        key = (d.mirror_name, d.topic, d.partition)
                        merged[key] = _better(merged.get(key), d)
        if not answered:
            raise KafkaConnectionError("; ".join(failures) or "no broker answered DescribeMirrors")
        matches = _topic_filter(topics)
        return [merged[k] for k in sorted(merged) if matches(k[1])]


def _better(old: MirrorPartitionDescription | None, new: MirrorPartitionDescription) -> MirrorPartitionDescription:
    if old is None:
        return new
    rank_old = (old.source_offset >= 0, old.destination_offset)
    rank_new = (new.source_offset >= 0, new.destination_offset)
    return new if rank_new > rank_old else old


def _topic_filter(topics: str | Iterable[str] | None) -> Any:
    if topics is None:
        return lambda _name: True
    if isinstance(topics, str):
        try:
            pattern = re.compile(topics)
        except re.error as exc:
            raise KafkaClientError(f"invalid topic regex {topics!r}: {exc}") from None
        return lambda name: pattern.fullmatch(name) is not None
    names = frozenset(topics)
    return lambda name: name in names
