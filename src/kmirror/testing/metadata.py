"""Fakes for metadata tests: images with registered brokers, an in-memory metadata log store."""

from __future__ import annotations

import random
import uuid

from kmirror.config.server import ServerConfig
from kmirror.metadata.image import EMPTY_IMAGE, MetadataImage
from kmirror.metadata.records import (
    BrokerEndpoint,
    ClusterIdRecord,
    FeatureLevelRecord,
    Record,
    RegisterBrokerRecord,
)


def server_config(node_id: int = 1, **overrides: str) -> ServerConfig:
    props = {"node.id": str(node_id), "listeners": "PLAINTEXT://127.0.0.1:9092"}
    props.update({k.replace("_", "."): v for k, v in overrides.items()})
    return ServerConfig.from_properties(props)


def image_with_brokers(*broker_ids: int, fenced: tuple[int, ...] = ()) -> MetadataImage:
    records: list[Record] = [ClusterIdRecord("test-cluster"), FeatureLevelRecord("metadata.version", 27)]
    for b in broker_ids:
        records.append(
            RegisterBrokerRecord(
                b,
                uuid.UUID(int=b + 1),
                b * 10,
                (BrokerEndpoint("PLAINTEXT", f"host{b}", 9092),),
                None,
                b in fenced,
            )
        )
    return EMPTY_IMAGE.apply(records, len(records) - 1)


class InMemoryMetadataLogStore:
    """A MetadataLogStore that keeps records in a list; `fail_next_append` simulates a disk error."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, bytes]] = []
        self.bound: tuple[str, int] | None = None
        self.fail_next_append = False

    def read_all(self) -> list[tuple[int, bytes]]:
        return list(self.entries)

    def append(self, encoded: list[bytes]) -> int:
        if self.fail_next_append:
            self.fail_next_append = False
            raise OSError("simulated metadata log write failure")
        for data in encoded:
            self.entries.append((len(self.entries), data))
        return len(self.entries) - 1

    def bind(self, cluster_id: str, node_id: int) -> None:
        self.bound = (cluster_id, node_id)


def seeded_rng(seed: int = 0) -> random.Random:
    return random.Random(seed)
