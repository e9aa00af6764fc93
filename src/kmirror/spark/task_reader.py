"""One Spark task's read: the records of one offset range of one partition, as Arrow.

Runs in a Spark Python worker, far from the driver: the connection is opened here, inside
the task, and closed when the range is read. An event loop in a background thread keeps
the next Fetch in flight while this thread decodes the previous answer, so the broker's
send time and the decoding overlap.

Data loss is judged as Spark's `KafkaDataConsumer` judges it: a range whose first
offsets are below the log start offset (retention or DeleteRecords removed them), or a
log that ends below the range (a truncated or re-created partition). With
`failOnDataLoss` true the task fails with a message naming the topic, partition and
offsets; with false the lost offsets are skipped and a warning is logged. Gaps inside the
log (compaction, transaction markers, aborted data) are not loss.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa

from kmirror.client.admin import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, Admin
from kmirror.client.configs import cluster_from_configs
from kmirror.client.errors import KafkaError
from kmirror.client.raw_fetch import FetchedPartition, PartitionFetcher
from kmirror.client.read_committed import delivered_batches, next_fetch_offset
from kmirror.spark.arrow_records import record_batches
from kmirror.spark.planning import OffsetRange

log = logging.getLogger("kmirror.spark")
T = TypeVar("T")

DATA_LOSS_HINT = ("Some data may have been lost because they are not available in Kafka any more; either the data "
                  "was aged out by Kafka or the topic may have been deleted before all the data in the topic was "
                  "processed. If you don't want your streaming query to fail on such cases, set the source option "
                  "\"failOnDataLoss\" to \"false\".")


class DataLossError(RuntimeError):
    """Offsets a range needs are gone from the partition (failOnDataLoss=true)."""


@dataclass(frozen=True, slots=True)
class ReadSettings:
    """What a task needs of the source options (picklable)."""

    client_configs: Mapping[str, str]
    include_headers: bool
    read_committed: bool
    fail_on_data_loss: bool
    poll_timeout_ms: int


def report_data_loss(message: str, fail_on_data_loss: bool) -> None:
    if fail_on_data_loss:
        raise DataLossError(f"{message}. {DATA_LOSS_HINT}")
    log.warning("%s. Some data may have been lost; failOnDataLoss is false, so the query goes on.", message)


class _LoopThread:
    """An asyncio loop in a daemon thread: coroutines submitted from this thread run there."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="kmirror-fetch", daemon=True)
        self.thread.start()

    def submit(self, coro: Any) -> Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def close(self, cleanup: Any) -> None:
        try:
            self.submit(cleanup).result(timeout=10)
        except Exception:  # closing is best effort
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


def read_range(settings: ReadSettings, offset_range: OffsetRange) -> Iterator[pa.RecordBatch]:
    """The records of `offset_range` as RecordBatches in Spark's Kafka schema."""
    if offset_range.size == 0:
        return
    configs = dict(settings.client_configs)
    cluster = cluster_from_configs(configs, client_id="kmirror-spark-reader")
    tp = offset_range.topic_partition
    fetcher = PartitionFetcher(
        cluster, tp,
        isolation_level=1 if settings.read_committed else 0,
        max_wait_ms=int(configs.get("fetch.max.wait.ms", "500")),
        max_bytes=int(configs.get("fetch.max.bytes", str(64 * 1024 * 1024))),
        partition_max_bytes=int(configs.get("max.partition.fetch.bytes", str(8 * 1024 * 1024))),
        retry_timeout_ms=settings.poll_timeout_ms,
    )
    io = _LoopThread()
    try:
        yield from _read(io, fetcher, cluster, settings, offset_range)
    finally:
        io.close(cluster.close())


def _read(io: _LoopThread, fetcher: PartitionFetcher, cluster: Any, settings: ReadSettings,
          r: OffsetRange) -> Iterator[pa.RecordBatch]:
    tp = r.topic_partition
    offset = r.from_offset
    until = r.until_offset
    pending: Future[FetchedPartition] = io.submit(fetcher.fetch(offset))
    empty_since: float | None = None
    while offset < until:
        fetched = pending.result()
        if fetched.offset_out_of_range:
            offset, until = _out_of_range(io, cluster, settings, r, offset, until)
            if offset < until:
                pending = io.submit(fetcher.fetch(offset))
            continue
        if fetched.error_code:
            raise KafkaError(fetched.error_code, context=f"Fetch {tp} at offset {offset}")
        if fetched.log_start_offset > offset:
            report_data_loss(f"Cannot fetch offset {offset} of {tp}: the log starts at {fetched.log_start_offset}; "
                             f"offsets [{offset}, {min(fetched.log_start_offset, until)}) are lost",
                             settings.fail_on_data_loss)
        records = fetched.records
        next_offset = next_fetch_offset(records, offset)
        if next_offset > offset and next_offset < until:
            pending = io.submit(fetcher.fetch(next_offset))  # in flight while this answer is decoded
        if next_offset == offset:
            # Nothing at `offset` yet: the leader's end (HW, or LSO under read_committed) is
            # below it, e.g. a new leader whose high watermark has not caught up.
            end = fetched.last_stable_offset if settings.read_committed else fetched.high_watermark
            now = time.monotonic()
            empty_since = empty_since or now
            if now - empty_since > settings.poll_timeout_ms / 1000:
                report_data_loss(f"Cannot fetch offsets [{offset}, {until}) of {tp}: the log ends at {end} "
                                 f"after {settings.poll_timeout_ms} ms (kafkaConsumer.pollTimeoutMs)",
                                 settings.fail_on_data_loss)
                return
            time.sleep(0.05)
            pending = io.submit(fetcher.fetch(offset))
            continue
        empty_since = None
        batches = delivered_batches(records, offset, read_committed=settings.read_committed,
                                    aborted_transactions=fetched.aborted_transactions)
        yield from record_batches(tp.topic, tp.partition, records, list(batches), start_offset=offset,
                                  end_offset=until, include_headers=settings.include_headers)
        offset = next_offset


def _out_of_range(io: _LoopThread, cluster: Any, settings: ReadSettings, r: OffsetRange, offset: int,
                  until: int) -> tuple[int, int]:
    """OFFSET_OUT_OF_RANGE at `offset`: where reading goes on, as (offset, until)."""
    admin = Admin(cluster)
    tp = r.topic_partition
    listed = io.submit(admin.list_offsets({tp: EARLIEST_TIMESTAMP})).result()
    earliest = listed[tp].offset
    latest = io.submit(admin.list_offsets({tp: LATEST_TIMESTAMP})).result()[tp].offset
    if offset < earliest:
        report_data_loss(f"Cannot fetch offset {offset} of {tp}: the log starts at {earliest}; offsets "
                         f"[{offset}, {min(earliest, until)}) are lost", settings.fail_on_data_loss)
        return earliest, until
    report_data_loss(f"Cannot fetch offset {offset} of {tp}: the log ends at {latest}, below the offsets "
                     f"[{offset}, {until}) planned", settings.fail_on_data_loss)
    return until, until
