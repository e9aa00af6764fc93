"""Which replica a consumer should fetch from (KIP-392, Kafka `RackAwareReplicaSelector`).

With a client rack: the leader if it is in that rack, else the same-rack replica with the
highest log end offset (ties: the most recently caught up); the leader when no replica
shares the client's rack. Without a client rack: the leader.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kmirror.config.server import ServerConfig
from kmirror.metadata.image import MetadataImage
from kmirror.replication.log_port import PartitionLog
from kmirror.replication.outcomes import ReadOutcome
from kmirror.replication.partition import Partition

RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@dataclass(frozen=True, slots=True)
class ReplicaView:
    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_last_caught_up_ms: int


def select_preferred_read_replica(client_rack: str | None, replicas: Sequence[ReplicaView], leader_id: int) -> int | None:
    """The chosen broker id (None when `replicas` is empty)."""
    if not replicas:
        return None
    if not client_rack:
        return leader_id
    same_rack = [r for r in replicas if r.rack == client_rack]
    if not same_rack:
        return leader_id
    if any(r.broker_id == leader_id for r in same_rack):
        return leader_id
    best = max(same_rack, key=lambda r: (r.log_end_offset, -r.time_since_last_caught_up_ms))
    return best.broker_id


def preferred_read_replica(
    partition: Partition[PartitionLog], image: MetadataImage | None, config: ServerConfig, node_id: int,
    client_rack: str | None, fetch_offset: int, now_ms: int,
) -> ReadOutcome | None:
    """KIP-392 on the leader `node_id`: an answer naming another replica, or None to read here.
    Only with `replica.selector.class` set to the rack-aware selector."""
    if client_rack is None or not partition.is_leader or not _rack_aware_selector(config):
        return None
    views = [ReplicaView(node_id, _rack_of(image, node_id), partition.log.log_end_offset, 0)]
    for replica in partition.replicas:
        st = partition.replica_state(replica)
        # Kafka: only ISR followers that hold `fetch_offset` (others may lag or truncate).
        if st is None or replica not in partition.isr or not (st.log_start_offset <= fetch_offset <= st.log_end_offset):
            continue
        views.append(ReplicaView(replica, _rack_of(image, replica), st.log_end_offset, now_ms - st.last_caught_up_time_ms))
    chosen = select_preferred_read_replica(client_rack, views, leader_id=node_id)
    if chosen is None or chosen == node_id:
        return None
    log = partition.log
    return ReadOutcome(
        b"", log.high_watermark, log.last_stable_offset, log.log_start_offset, log.log_end_offset,
        preferred_read_replica=chosen,
    )


def may_prefer_another_replica(config: ServerConfig) -> bool:
    """Whether `preferred_read_replica` can name another replica than the leader for a
    consumer with a rack (only with the rack-aware selector; an empty rack never)."""
    return _rack_aware_selector(config)


def _rack_aware_selector(config: ServerConfig) -> bool:
    selector = config.values.get("replica.selector.class")
    return selector is not None and str(selector).rsplit(".", 1)[-1] == "RackAwareReplicaSelector"


def _rack_of(image: MetadataImage | None, broker_id: int) -> str | None:
    registration = None if image is None else image.brokers.get(broker_id)
    return None if registration is None else registration.rack
