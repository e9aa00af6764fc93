"""Metadata snapshots (KIP-630): the image written back out as the records that rebuild it.

`snapshot_records(image)` is the image as records: replaying them onto an empty image gives
`image` again (the round trip `tests/property/metadata/test_snapshot_roundtrip.py` holds it
to, for images built by any sequence of records). A snapshot at end offset E holds the image
of every record below E, so a node can start from it and replay only the log from E, and the
log below E can be deleted (`SnapshotPolicy`, docs/design/controller.md "Metadata snapshots").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from kmirror.metadata.image import MetadataImage
from kmirror.metadata.records import (
    NO_BROKER,
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ClusterIdRecord,
    ConfigRecord,
    FeatureLevelRecord,
    PartitionRecord,
    ProducerIdsRecord,
    Record,
    RegisterBrokerRecord,
    TopicRecord,
    UserScramCredentialRecord,
)
from kmirror.records.batch import iter_batches
from kmirror.records.builder import SimpleRecord, build_batch
from kmirror.records.record import decode_records

UNKNOWN_BLOCK_OWNER = -2
"""ProducerIdsRecord.broker_id in a snapshot: the image keeps the next producer id, not which
broker took the block below it (and -1 is the fence, `NO_BROKER`)."""


def snapshot_records(image: MetadataImage) -> list[Record]:
    """The records that rebuild `image` on an empty one, in Kafka's snapshot order: cluster and
    features, brokers, topics and their partitions, configs, quotas, ACLs, SCRAM, producer ids."""
    out: list[Record] = []
    if image.cluster_id is not None:
        out.append(ClusterIdRecord(image.cluster_id))
    out.extend(FeatureLevelRecord(name, level) for name, level in sorted(image.features.items()))
    for broker_id, b in sorted(image.brokers.items()):
        out.append(RegisterBrokerRecord(broker_id, b.incarnation_id, b.broker_epoch, b.endpoints, b.rack, b.fenced,
                                        b.log_dirs, b.cordoned_log_dirs))
        if b.in_controlled_shutdown:
            out.append(BrokerRegistrationChangeRecord(broker_id, b.broker_epoch, 1))
    for name, topic in sorted(image.topics.items()):
        out.append(TopicRecord(name, topic.topic_id))
        out.extend(
            PartitionRecord(index, topic.topic_id, p.replicas, p.isr, p.leader, p.leader_epoch, p.partition_epoch,
                            p.removing_replicas, p.adding_replicas, p.directories)
            for index, p in sorted(topic.partitions.items())
        )
    for resource, values in sorted(image.configs.items()):
        out.extend(ConfigRecord(resource.type, resource.name, key, value) for key, value in sorted(values.items()))
    for entity, quotas in sorted(image.client_quotas.items(), key=lambda item: repr(item[0])):
        out.extend(ClientQuotaRecord(entity, key, value) for key, value in sorted(quotas.items()))
    for acl in sorted(image.acls.values(), key=lambda a: a.id):
        out.append(AccessControlEntryRecord(acl.id, acl.resource_type, acl.resource_name, acl.pattern_type,
                                            acl.principal, acl.host, acl.operation, acl.permission_type))
    for (user, mechanism), cred in sorted(image.scram_credentials.items()):
        out.append(UserScramCredentialRecord(user, mechanism, cred.salt, cred.stored_key, cred.server_key,
                                             cred.iterations))
    out.extend(token for _, token in sorted(image.delegation_tokens.items()))
    if image.producer_id_floor > 0:
        out.append(ProducerIdsRecord(NO_BROKER, -1, image.producer_id_floor))
    if image.next_producer_id > image.producer_id_floor:
        out.append(ProducerIdsRecord(UNKNOWN_BLOCK_OWNER, -1, image.next_producer_id))
    return out


RETENTION_CHECK_MS = 60_000
"""How often retention runs between snapshots."""


@dataclass(slots=True)
class SnapshotPolicy:
    """When a node writes a snapshot of its image (Kafka's `SnapshotGenerator`): once
    `max_bytes_between` bytes of records were appended since the last one
    (`metadata.log.max.record.bytes.between.snapshots`), or `max_interval_ms` after it with
    any record appended (`metadata.log.max.snapshot.interval.ms`, 0 never). Retention runs
    after each snapshot and every `RETENTION_CHECK_MS` between them, so that
    `metadata.max.retention.ms` passes on a quiet log too."""

    max_bytes_between: int
    max_interval_ms: int
    last_snapshot_ms: int
    bytes_since: int = 0
    last_retention_ms: int = 0

    def retention_due(self, now_ms: int) -> bool:
        if now_ms - self.last_retention_ms < RETENTION_CHECK_MS:
            return False
        self.last_retention_ms = now_ms
        return True

    def appended(self, size: int) -> None:
        self.bytes_since += size

    def due(self, now_ms: int) -> bool:
        if self.bytes_since <= 0:
            return False
        if self.bytes_since >= self.max_bytes_between:
            return True
        return 0 < self.max_interval_ms <= now_ms - self.last_snapshot_ms

    def taken(self, now_ms: int) -> None:
        self.bytes_since = 0
        self.last_snapshot_ms = self.last_retention_ms = now_ms


class SegmentInfo(NamedTuple):
    base_offset: int
    size: int
    last_modified_ms: int


def segments_past_retention(segments: Sequence[SegmentInfo], snapshots_size: int, latest_snapshot_end: int,
                            max_bytes: int, max_ms: int, now_ms: int) -> int:
    """How many of the oldest segments (oldest first) the metadata log's retention deletes
    (Kafka's `KafkaMetadataLog` soft limits): while the segments and the snapshots together
    exceed `max_bytes` (`metadata.max.retention.bytes`), or the oldest segment is older than
    `max_ms` (`metadata.max.retention.ms`; each < 0: no limit), the oldest segment goes if it
    lies wholly below the latest snapshot. The active segment always stays."""
    total = snapshots_size + sum(segment.size for segment in segments)
    deleted = 0
    while deleted + 1 < len(segments) and segments[deleted + 1].base_offset <= latest_snapshot_end:
        oldest = segments[deleted]
        if not (0 <= max_bytes < total or 0 <= max_ms < now_ms - oldest.last_modified_ms):
            break
        total -= oldest.size
        deleted += 1
    return deleted


SNAPSHOT_BATCH_RECORDS = 1000


def snapshot_bytes(encoded: list[bytes], now_ms: int) -> bytes:
    """A snapshot file's content: its records in RecordBatch v2 batches of up to
    `SNAPSHOT_BATCH_RECORDS`, offsets from 0 (as Kafka's snapshot writer numbers them)."""
    return b"".join(
        build_batch([SimpleRecord(None, value, (), now_ms) for value in encoded[i:i + SNAPSHOT_BATCH_RECORDS]],
                    base_offset=i)
        for i in range(0, len(encoded), SNAPSHOT_BATCH_RECORDS)
    )


def batch_entries_by_epoch(data: bytes) -> list[tuple[int, list[tuple[int, bytes]]]]:
    """`(leader epoch, [(offset, value), ...])` of each whole batch in `data` (a Fetch answer)."""
    return [(header.partition_leader_epoch, [(rec.offset, rec.value) for rec in decode_records(data, pos)
                                             if rec.value is not None])
            for pos, header in iter_batches(data)]


def batch_entries(data: bytes) -> list[tuple[int, bytes]]:
    """`(offset, value)` of every record with a value in whole batches `data` (a metadata log
    segment, a Fetch answer or a snapshot)."""
    out: list[tuple[int, bytes]] = []
    pos = 0
    for _, header in iter_batches(data):
        out.extend((rec.offset, rec.value) for rec in decode_records(data, pos) if rec.value is not None)
        pos += header.size
    return out
