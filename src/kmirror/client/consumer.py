"""A minimal consumer on assigned partitions (no group): Fetch from an offset, earliest or
latest, decode batches into records.

Positions advance past every batch returned, control batches included, as Kafka's fetcher
does; a partial batch at the end of a response (cut at max_bytes) is fetched again. Under
read_committed, aborted transactions are dropped with the response's aborted-transaction
list (`read_committed.delivered_batches`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kmirror.client.admin import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, Admin
from kmirror.client.cluster import REFRESH_ERRORS, Cluster
from kmirror.client.errors import check
from kmirror.client.raw_fetch import AbortedTransaction, aborted_transactions_of, send_consumer_fetch
from kmirror.client.read_committed import delivered_batches, next_fetch_offset
from kmirror.records.record import Record, decode_records
from kmirror.types import TopicPartition

EARLIEST = "earliest"
LATEST = "latest"


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    topic_partition: TopicPartition
    record: Record
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime


class Consumer:
    def __init__(
        self,
        cluster: Cluster,
        *,
        max_wait_ms: int = 500,
        min_bytes: int = 1,
        max_bytes: int = 50 * 1024 * 1024,
        max_partition_bytes: int = 1024 * 1024,
        isolation_level: int = 0,
    ) -> None:
        self.cluster = cluster
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.max_partition_bytes = max_partition_bytes
        self.isolation_level = isolation_level
        self.positions: dict[TopicPartition, int] = {}
        self.high_watermarks: dict[TopicPartition, int] = {}

    async def assign(self, starts: Mapping[TopicPartition, int | str]) -> None:
        """Start each partition at an offset, EARLIEST or LATEST (resolved with ListOffsets)."""
        lookups = {
            tp: EARLIEST_TIMESTAMP if s == EARLIEST else LATEST_TIMESTAMP
            for tp, s in starts.items()
            if isinstance(s, str)
        }
        resolved = await Admin(self.cluster).list_offsets(lookups, isolation_level=self.isolation_level) if lookups else {}
        for tp, start in starts.items():
            self.positions[tp] = resolved[tp].offset if isinstance(start, str) else int(start)

    async def poll(self) -> list[ConsumerRecord]:
        """One Fetch round to every leader; records in offset order per partition."""
        out: list[ConsumerRecord] = []
        groups: dict[int, tuple[Any, list[TopicPartition]]] = {}
        for tp in sorted(self.positions):
            conn = await self.cluster.leader_connection(tp)
            groups.setdefault(id(conn), (conn, []))[1].append(tp)
        refresh = False
        for conn, tps in groups.values():
            refresh |= await self._fetch(conn, tps, out)
        if refresh:
            await self.cluster.refresh(sorted({tp.topic for tp in self.positions}))
        return out

    async def _fetch(self, conn: Any, tps: list[TopicPartition], out: list[ConsumerRecord]) -> bool:
        response = await send_consumer_fetch(
            conn, {tp: self.positions[tp] for tp in tps}, max_wait_ms=self.max_wait_ms, min_bytes=self.min_bytes,
            max_bytes=self.max_bytes, isolation_level=self.isolation_level,
            partition_max_bytes=self.max_partition_bytes, context="Fetch")
        refresh = False
        for t in response.responses:
            for p in t.partitions:
                tp = TopicPartition(t.topic, int(p.partition_index))
                if p.error_code in REFRESH_ERRORS:
                    refresh = True
                    continue
                check(p.error_code, context=f"{tp} at offset {self.positions.get(tp)}")
                self.high_watermarks[tp] = int(p.high_watermark)
                if p.records:
                    self._decode(tp, p.records, aborted_transactions_of(p), out)
        return refresh

    def _decode(self, tp: TopicPartition, records: bytes, aborted: tuple[AbortedTransaction, ...],
                out: list[ConsumerRecord]) -> None:
        position = self.positions[tp]
        for pos, header in delivered_batches(records, position, read_committed=self.isolation_level == 1,
                                             aborted_transactions=aborted):
            for record in decode_records(records, pos):
                if record.offset >= position:
                    out.append(ConsumerRecord(tp, record, header.timestamp_type))
        self.positions[tp] = next_fetch_offset(records, position)
