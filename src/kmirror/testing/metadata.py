"""Fakes for metadata tests: images with registered brokers, an in-memory metadata log store."""

from __future__ import annotations

import asyncio
import inspect
import io
import random
import uuid
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from kmirror.broker.api import RequestContext, build_registry, load_handlers
from kmirror.broker.services import BrokerServices
from kmirror.config.server import ServerConfig
from kmirror.metadata.controller_service import MetadataService
from kmirror.metadata.image import EMPTY_IMAGE, MetadataImage
from kmirror.metadata.records import (
    BrokerEndpoint,
    ClusterIdRecord,
    FeatureLevelRecord,
    Record,
    RegisterBrokerRecord,
)
from kmirror.metadata.snapshot import batch_entries, snapshot_bytes
from kmirror.metadata.snapshot_service import LoadedLog, SnapshotId
from kmirror.ports import ManualClock
from kmirror.protocol.codec import RequestHeaderView
from kmirror.protocol.entities import build, nested
from kmirror.quorum.election_state import ElectionState


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
    """A MetadataLogStore that keeps records and snapshots in memory; `fail_next_append`
    simulates a disk error."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, bytes]] = []
        self.snapshots: dict[SnapshotId, bytes] = {}
        self.bound: tuple[str, int] | None = None
        self.fail_next_append = False
        self._next_offset = 0
        self.epochs: dict[int, int] = {}
        """The leader epoch of each stored offset."""
        self.election: ElectionState | None = None

    @property
    def log_start_offset(self) -> int:
        return self.entries[0][0] if self.entries else self._next_offset

    @property
    def latest_snapshot(self) -> SnapshotId | None:
        return max(self.snapshots) if self.snapshots else None

    def load(self) -> LoadedLog:
        latest = self.latest_snapshot
        records = None if latest is None else [v for _, v in batch_entries(self.snapshots[latest])]
        return LoadedLog(records, 0 if latest is None else latest.end_offset, list(self.entries))

    def append(self, encoded: list[bytes], epoch: int = 0) -> int:
        if self.fail_next_append:
            self.fail_next_append = False
            raise OSError("simulated metadata log write failure")
        for data in encoded:
            self.entries.append((self._next_offset, data))
            self.epochs[self._next_offset] = epoch
            self._next_offset += 1
        return self._next_offset - 1

    @property
    def log_end_offset(self) -> int:
        return self._next_offset

    @property
    def last_epoch(self) -> int:
        return self.epoch_of(self._next_offset - 1) if self._next_offset else 0

    def epoch_of(self, offset: int) -> int:
        latest = self.latest_snapshot
        return self.epochs.get(offset, latest.epoch if latest is not None else 0)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        known = sorted({e for o, e in self.epochs.items() if o < self._next_offset and e <= epoch})
        if not known:
            return -1, -1
        later = [o for o, e in self.epochs.items() if e > known[-1] and o < self._next_offset]
        return known[-1], min(later, default=self._next_offset)

    def epoch_ranges(self, start: int, end: int) -> list[tuple[int, int, int]]:
        runs: list[tuple[int, int, int]] = []
        for offset in range(start, end):
            epoch = self.epoch_of(offset)
            if runs and runs[-1][0] == epoch:
                runs[-1] = (epoch, runs[-1][1], offset + 1)
            else:
                runs.append((epoch, offset, offset + 1))
        return runs

    def truncate_to(self, offset: int) -> None:
        self.entries = [(o, d) for o, d in self.entries if o < offset]
        self._next_offset = min(self._next_offset, offset)

    def read_election_state(self) -> ElectionState | None:
        return self.election

    def write_election_state(self, state: ElectionState) -> None:
        self.election = state

    def write_snapshot(self, end_offset: int, encoded: list[bytes]) -> int:
        assert end_offset <= self._next_offset, (end_offset, self._next_offset)
        data = snapshot_bytes(encoded, 0)
        self.snapshots[SnapshotId(end_offset, self.epoch_of(end_offset - 1))] = data
        return len(data)

    def install_snapshot(self, snapshot: SnapshotId, data: bytes) -> list[bytes]:
        self.snapshots = {snapshot: data}
        self.entries = []
        self._next_offset = snapshot.end_offset
        return [v for _, v in batch_entries(data)]

    def read_snapshot(self, snapshot: SnapshotId, position: int, max_bytes: int) -> tuple[int, bytes] | None:
        data = self.snapshots.get(snapshot)
        return None if data is None else (len(data), data[position:position + max_bytes])

    def enforce_retention(self, max_bytes: int, max_ms: int) -> int:
        """Deletes all the log below the latest snapshot once over `max_bytes` (no segments here)."""
        latest = self.latest_snapshot
        total = sum(len(d) for _, d in self.entries) + sum(len(d) for d in self.snapshots.values())
        if latest is not None and 0 <= max_bytes < total:
            self.entries = [(o, d) for o, d in self.entries if o >= latest.end_offset]
            self.snapshots = {latest: self.snapshots[latest]}
        return self.log_start_offset

    def bind(self, cluster_id: str, node_id: int) -> None:
        self.bound = (cluster_id, node_id)


def seeded_rng(seed: int = 0) -> random.Random:
    return random.Random(seed)


def started_service(config: ServerConfig | None = None, seed: int = 0) -> Any:
    """A MetadataService on an in-memory store, already started (formatted, node registered)."""
    svc = MetadataService(config or server_config(), InMemoryMetadataLogStore(), ManualClock(), seeded_rng(seed))
    asyncio.run(svc.start())
    return svc


def metadata_services(config: ServerConfig | None = None, seed: int = 0) -> Any:
    """BrokerServices around a started MetadataService (no replica manager, no network)."""
    cfg = config or server_config()
    return BrokerServices(
        node_id=cfg.node_id,
        config=cfg,
        registry=build_registry([]),
        clock=ManualClock(),
        metadata=started_service(cfg, seed),
    )


def call(services: Any, api_key: int, version: int, request_fields: dict[str, Any],
         listener: str = "PLAINTEXT", principal: str = "ANONYMOUS", plane: str = "broker") -> Any:
    """Build the kio request of `version` from `request_fields` (nested values as dicts are not
    supported: pass kio entities), run the handler registered on `plane` the way the server
    does, and return the response after a kio encode/decode round trip."""
    handler = {d.api_key: d for d in load_handlers(plane)}[api_key].handler
    request = build(load_request_schema(api_key, version), **request_fields)
    response_type = load_response_schema(api_key, version)
    ctx = RequestContext(RequestHeaderView(api_key, version, 1, "test"), response_type, "127.0.0.1", 1, listener,
                         principal)
    result = handler(services, ctx, request)
    if inspect.isawaitable(result):
        awaitable = result

        async def wait() -> Any:
            return await awaitable

        result = asyncio.run(wait())
    buf = io.BytesIO()
    entity_writer(response_type)(buf, result)
    decoded, size = entity_reader(response_type)(buf.getvalue(), 0)
    assert size == len(buf.getvalue())
    return decoded


def request_entity(api_key: int, version: int, entity_name: str, /, **fields: Any) -> Any:
    """A nested request entity (e.g. "CreatableTopic") of that API version."""
    from kio.index import load_request_schema


    return build(nested(load_request_schema(api_key, version), entity_name), **fields)
