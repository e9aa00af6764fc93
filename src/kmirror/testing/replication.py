"""Small fakes for data-plane tests: a partition log that stores opaque batches, a log
manager over it, and metadata images shaped like `kmirror.metadata`'s."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader

from kmirror.broker.api import RequestContext, build_registry
from kmirror.broker.services import BrokerServices
from kmirror.config.server import ServerConfig
from kmirror.log.config import LogConfig
from kmirror.log.log_manager import LogManager
from kmirror.log.outcomes import (
    OK,
    AppendError,
    FetchDataInfo,
    LogAppendInfo,
    OffsetOutOfRange,
    Ok,
    TimestampAndOffset,
)
from kmirror.log.producer_state import ProducerStateEntry, VerificationGuard
from kmirror.metadata.image import (
    BrokerRegistration,
    ConfigResource,
    ConfigResourceType,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from kmirror.ports import ManualClock
from kmirror.protocol.codec import RequestHeaderView
from kmirror.protocol.fast_writer import encode
from kmirror.records.batch import read_header
from kmirror.replication.replica_manager import ReplicaManager
from kmirror.testing.memory_fs import MemoryFileSystem
from kmirror.types import TopicPartition


@dataclass
class FakeBatch:
    base_offset: int
    count: int
    data: bytes
    leader_epoch: int
    max_timestamp: int


class FakeLog:
    """Stores each appended buffer as one batch of `count` records (1 unless told)."""

    def __init__(self, topic_partition: TopicPartition, config: Any = None, topic_id: UUID | None = None) -> None:
        self.topic_partition = topic_partition
        self.topic_id = topic_id
        self.config = config
        self.batches: list[FakeBatch] = []
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.high_watermark = 0
        self.last_stable_offset = 0
        self.next_count = 1
        self.next_timestamp = 0
        self.fail_with: AppendError | None = None

    @property
    def size_in_bytes(self) -> int:
        return sum(len(b.data) for b in self.batches)

    def update_high_watermark(self, offset: int) -> int:
        self.high_watermark = offset
        self.last_stable_offset = offset
        return offset

    def maybe_start_transaction_verification(self, producer_id: int, sequence: int, epoch: int,
                                             now_ms: int | None = None) -> VerificationGuard | AppendError:
        return VerificationGuard.SENTINEL  # keeps no producer state: nothing to verify

    def append_as_leader(self, records: bytes | memoryview, leader_epoch: int, now_ms: int | None = None, *,
                         verification_guard: VerificationGuard | None = None) -> LogAppendInfo | AppendError:
        if self.fail_with is not None:
            return self.fail_with
        base = self.log_end_offset
        count, max_timestamp = self.next_count, self.next_timestamp
        try:  # a real v2 batch tells its own record count and max timestamp
            header = read_header(records, 0)
            count, max_timestamp = header.records_count, header.max_timestamp
        except Exception:
            pass
        self.batches.append(FakeBatch(base, count, bytes(records), leader_epoch, max_timestamp))
        self.log_end_offset += count
        return LogAppendInfo(first_offset=base, last_offset=self.log_end_offset - 1, max_timestamp=max_timestamp,
                             offset_of_max_timestamp=base, log_append_time_ms=-1,
                             log_start_offset=self.log_start_offset, records_count=count, valid_bytes=len(records))

    def append_as_follower(self, records: bytes | memoryview) -> LogAppendInfo | AppendError:
        raise NotImplementedError

    def read(self, fetch_offset: int, max_bytes: int, max_offset: int, min_one_message: bool) -> FetchDataInfo:
        out = b""
        for batch in self.batches:
            if batch.base_offset + batch.count <= fetch_offset or batch.base_offset >= max_offset:
                continue
            if len(out) + len(batch.data) > max_bytes and not (min_one_message and not out):
                break
            out += batch.data
        return FetchDataInfo(out, fetch_offset)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[Any]:
        return []  # holds no transactional data

    def active_producers(self) -> list[ProducerStateEntry]:
        return []

    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        if timestamp == -3:
            if not self.batches:
                return None
            best = max(self.batches, key=lambda b: b.max_timestamp)
            return TimestampAndOffset(best.max_timestamp, best.base_offset, best.leader_epoch)
        for batch in self.batches:
            if batch.max_timestamp >= timestamp and batch.base_offset >= self.log_start_offset:
                return TimestampAndOffset(batch.max_timestamp, batch.base_offset, batch.leader_epoch)
        return None

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int] | None:
        epochs = sorted({b.leader_epoch for b in self.batches})
        lower = [e for e in epochs if e <= leader_epoch]
        if not lower:
            return None
        epoch = lower[-1]
        later = [b.base_offset for b in self.batches if b.leader_epoch > epoch]
        return epoch, (min(later) if later else self.log_end_offset)

    def epoch_for_offset(self, offset: int) -> int | None:
        for batch in self.batches:
            if batch.base_offset <= offset < batch.base_offset + batch.count:
                return batch.leader_epoch
        return None

    def maybe_increment_log_start_offset(self, offset: int) -> Ok | OffsetOutOfRange:
        if offset > self.log_start_offset:
            self.log_start_offset = offset
        return OK

    def truncate_to(self, offset: int) -> bool:
        if offset >= self.log_end_offset:
            return False
        self.log_end_offset = offset
        self.high_watermark = min(self.high_watermark, offset)
        return True

    # Leader epochs are not tracked: no epoch cache to start a new leader's epoch in.
    latest_epoch: int | None = None

    def assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None:
        pass


class FakeLogManager:
    def __init__(self, log_dirs: tuple[str, ...] = ("/data/kafka-logs",)) -> None:
        self.log_dirs = list(log_dirs)
        self.offline_dirs: set[str] = set()
        self.logs: dict[TopicPartition, FakeLog] = {}
        self.deleted: list[TopicPartition] = []

    def get_or_create_log(self, tp: TopicPartition, topic_id: UUID, config: Any, *, is_new: bool = True) -> FakeLog:
        log = self.logs.get(tp)
        if log is None:
            log = self.logs[tp] = FakeLog(tp, config, topic_id)
        return log

    def get_log(self, tp: TopicPartition) -> FakeLog | None:
        return self.logs.get(tp)

    def log_dir_of(self, tp: TopicPartition) -> str | None:
        return self.log_dirs[0] if tp in self.logs and self.log_dirs else None

    def all_logs(self) -> list[FakeLog]:
        return list(self.logs.values())

    def delete_log(self, tp: TopicPartition) -> None:
        self.logs.pop(tp, None)
        self.deleted.append(tp)

    def delete_logs(self, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
        deleted = list(tps)
        for tp in deleted:
            self.delete_log(tp)
        return deleted


def image_with(
    topics: dict[str, tuple[UUID, dict[int, PartitionRegistration]]],
    configs: dict[str, dict[str, str]] | None = None,
    offset: int = 1,
) -> MetadataImage:
    """A metadata image holding exactly `topics` (name -> (id, partitions)) and topic configs,
    with every replica registered as a live broker (broker epoch 0)."""
    images = {name: TopicImage(name, topic_id, dict(parts)) for name, (topic_id, parts) in topics.items()}
    replicas = {b for t in images.values() for reg in t.partitions.values() for b in reg.replicas}
    return MetadataImage(
        offset=offset,
        brokers={b: BrokerRegistration(b, UUID(int=b + 1), 0, (), None, False) for b in sorted(replicas)},
        topics=images,
        topics_by_id={t.topic_id: t for t in images.values()},
        configs={ConfigResource(ConfigResourceType.TOPIC, t): dict(c) for t, c in (configs or {}).items()},
    )


def single_node_image(
    node_id: int,
    topics: dict[str, tuple[UUID, int]],
    leader_epoch: int = 0,
    configs: dict[str, dict[str, str]] | None = None,
) -> MetadataImage:
    """Every partition of every topic hosted and led by `node_id`."""
    return image_with(
        {
            name: (topic_id, {p: PartitionRegistration((node_id,), (node_id,), node_id, leader_epoch, 0) for p in range(count)})
            for name, (topic_id, count) in topics.items()
        },
        configs,
    )


def server_config(node_id: int = 1, **overrides: str) -> ServerConfig:
    props = {
        "node.id": str(node_id),
        "process.roles": "broker,controller",
        "log.dirs": "/data/kafka-logs",
    }
    props.update({k.replace("_", "."): v for k, v in overrides.items()})
    return ServerConfig.from_properties(props)


# -- calling handlers the way the server does -------------------------------------------------


def request_type(api_key: int, version: int) -> type[Any]:
    cls: type[Any] = load_request_schema(api_key, version)
    return cls


def call_handler(handler: Any, services: Any, api_key: int, version: int, request: Any,
                 principal: str = "ANONYMOUS", listener: str = "PLAINTEXT") -> Any:
    """Run `handler` for `request` and return the response after an encode/decode round
    trip, the node's encoder and kio's decoder (so a response the wire cannot carry fails
    the test). None stays None (acks=0)."""

    response_type = load_response_schema(api_key, version)
    ctx = RequestContext(RequestHeaderView(api_key, version, 1, "test"), response_type, "127.0.0.1", 1, listener,
                         principal)
    result = handler(services, ctx, request)
    if inspect.isawaitable(result):

        async def wait() -> Any:
            return await result

        result = asyncio.run(wait())
    if result is None:
        return None
    encoded = bytes(encode(result))
    decoded, size = entity_reader(response_type)(encoded, 0)
    assert size == len(encoded)
    return decoded


def data_services(image: MetadataImage, node_id: int = 1, log_manager: Any = None, metadata: Any = None) -> Any:
    """BrokerServices with a real ReplicaManager following `image`, over the real LogManager
    on the in-memory file system unless another log manager is given."""
    clock = ManualClock()
    config = server_config(node_id)
    if log_manager is None:
        log_manager = memory_log_manager(clock)
    rm = ReplicaManager(node_id, log_manager, clock, config)
    rm.apply_image(None, image)
    return BrokerServices(
        node_id=node_id,
        config=config,
        registry=build_registry([]),
        clock=clock,
        metadata=metadata,
        replica_manager=rm,
    )


def memory_log_manager(clock: Any, log_dirs: tuple[str, ...] = ("/data/kafka-logs",)) -> Any:
    """The real LogManager over the in-memory file system (loaded, empty)."""
    manager = LogManager(MemoryFileSystem(), list(log_dirs), clock, LogConfig())
    manager.load_logs()
    return manager
