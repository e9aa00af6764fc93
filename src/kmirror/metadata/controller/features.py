"""Finalized feature levels and the bootstrap records of a freshly formatted metadata log."""

from __future__ import annotations

from kmirror.metadata.records import ClusterIdRecord, FeatureLevelRecord, Record

# The metadata.version this node writes when formatting (Kafka 4.2's IBP_4_2_IV1 is 27;
# ApiVersions advertises 1..27).
BOOTSTRAP_METADATA_VERSION = 27


def bootstrap_records(cluster_id: str, metadata_version: int = BOOTSTRAP_METADATA_VERSION) -> list[Record]:
    """What FORMAT writes first: the cluster id and `metadata.version` (mirror.version stays 0,
    i.e. absent, until an operator enables it with UpdateFeatures)."""
    return [ClusterIdRecord(cluster_id), FeatureLevelRecord("metadata.version", metadata_version)]
