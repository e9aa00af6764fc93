"""The `kmirror` data source: Spark's Kafka source and sink on the Python Data Source API.

`KmirrorDataSource` is what `spark.dataSource.register` takes. Spark runs its methods in
several processes: `schema`/`reader`/`streamReader`/`writer` and the readers' planning
methods in the driver's Python planner, `read`/`write` in executor Python workers. So
readers and writers hold only picklable option values; every connection is opened and
closed inside the method that uses it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    Filter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kmirror.spark.delegation_token import CREDENTIAL_KEYS, DriverToken, driver_token, without_credentials
from kmirror.spark.options import KafkaOptionError, SourceOptions, parse_source_options
from kmirror.spark.planning import OffsetRange, Planner, split_ranges
from kmirror.spark.pushdown import RangeFilter, apply_filter, push_filters
from kmirror.spark.sink import KafkaStreamWriter, KafkaWriter
from kmirror.spark.stream_offsets import (
    TriggerDelay,
    decode_offsets,
    encode_offsets,
    lost_partitions,
    rate_limit,
    rewound_partitions,
)
from kmirror.spark.task_reader import ReadSettings, read_range, report_data_loss
from kmirror.types import TopicPartition

HEADERS_FIELD = StructField("headers", ArrayType(StructType([
    StructField("key", StringType()), StructField("value", BinaryType())])))
KAFKA_SCHEMA = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
])
KAFKA_SCHEMA_WITH_HEADERS = StructType([*KAFKA_SCHEMA.fields, HEADERS_FIELD])


def kafka_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema (`KafkaRecordToRowConverter.kafkaSchema`)."""
    return KAFKA_SCHEMA_WITH_HEADERS if include_headers else KAFKA_SCHEMA


class RangePartition(InputPartition):
    """One task: an offset range of one partition (None: nothing to read), and the client
    configs its task logs in with when they are not the reader's (a delegation token)."""

    def __init__(self, offset_range: OffsetRange | None, client_configs: dict[str, str] | None = None) -> None:
        super().__init__(offset_range)
        self.offset_range = offset_range
        self.client_configs = client_configs


def _settings(options: SourceOptions) -> ReadSettings:
    return ReadSettings(dict(options.client_configs), options.include_headers, options.read_committed,
                        options.fail_on_data_loss, options.poll_timeout_ms)


class _TokenLogins:
    """A reader whose tasks log in with the driver's delegation token (option
    `kmirror.delegationToken`): the token goes in each partition planned on the driver, and
    the reader pickled for the executors keeps no driver credential."""

    options: SourceOptions
    settings: ReadSettings
    token: DriverToken | None

    def _init_token(self) -> None:
        mechanism = self.options.delegation_token_mechanism
        self.token = None if mechanism is None else driver_token(self.options.client_configs, mechanism)

    def _task_configs(self) -> dict[str, str] | None:
        return None if self.token is None else self.token.task_configs()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if self.token is not None:
            configs = without_credentials(self.options.client_configs)
            state.update(token=None, options=dataclasses.replace(self.options, client_configs=configs),
                         settings=dataclasses.replace(self.settings, client_configs=configs))
        return state


def _check_schema(schema: StructType, options: SourceOptions) -> None:
    expected = kafka_schema(options.include_headers)
    if schema != expected:
        raise KafkaOptionError(f"the kmirror source has a fixed schema ({expected.simpleString()}) "
                               f"and cannot be read with another ({schema.simpleString()})")


def _read(settings: ReadSettings, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    offset_range = getattr(partition, "offset_range", None)
    configs = getattr(partition, "client_configs", None)
    if offset_range is not None:
        yield from read_range(settings if configs is None else dataclasses.replace(settings, client_configs=configs),
                              offset_range)


class BatchReader(_TokenLogins, DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.settings = _settings(options)
        self.range_filter = RangeFilter()
        self._init_token()

    def partitions(self) -> list[InputPartition]:
        if self.range_filter.allows_nothing():
            return [RangePartition(None)]
        ranges = apply_filter(asyncio.run(self._plan()), self.range_filter)
        tasks = split_ranges(ranges, self.options.min_partitions, self.options.max_records_per_partition)
        configs = self._task_configs() if tasks else None
        return [RangePartition(r, configs) for r in tasks] or [RangePartition(None)]

    async def _plan(self) -> list[OffsetRange]:
        async with Planner(self.options) as planner:
            tps = await planner.partitions()
            start = await planner.resolve(self.options.starting, tps, starting=True)
            end = await planner.resolve(self.options.ending, tps, starting=False)
        ranges = []
        for tp in tps:
            if start[tp] > end[tp]:
                raise KafkaOptionError(f"the starting offset {start[tp]} of {tp} is after its ending offset "
                                       f"{end[tp]}: check startingOffsets and endingOffsets")
            ranges.append(OffsetRange(tp.topic, tp.partition, start[tp], end[tp]))
        return ranges

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.settings, partition)


class FilteringBatchReader(BatchReader):
    """A batch read that takes Spark's pushed filters (option `kmirror.source.pushFilters`):
    those on topic, partition and offset cut the planned ranges (`pushdown`), the others are
    left to Spark. A separate class because PySpark fails any read whose reader overrides
    `pushFilters` while `spark.sql.python.filterPushdown.enabled` is false."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        self.range_filter, rest = push_filters(filters)
        return rest


class StreamReader(_TokenLogins, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reads; offsets are Spark's Kafka source offsets, {"topic": {"0": 500}}.
    Trigger.AvailableNow reads up to the offsets that were latest when the query started, in
    micro-batches of `maxOffsetsPerTrigger`, as Spark's Kafka source. `minOffsetsPerTrigger`
    holds a trigger back while fewer records are new, for at most `maxTriggerDelay` since the
    last batch (Spark's `delayBatch`); under Trigger.AvailableNow it does not apply, since a
    trigger held back would end the query with records unread. `clock` (seconds) is the
    port the delay is measured with."""

    def __init__(self, options: SourceOptions, clock: Callable[[], float] = time.monotonic) -> None:
        self.options = options
        self.settings = _settings(options)
        self.available_now_end: dict[TopicPartition, int] | None = None
        self.clock = clock
        self.trigger_delay = None if options.min_offsets_per_trigger is None else \
            TriggerDelay(options.min_offsets_per_trigger, options.max_trigger_delay_ms)
        self._init_token()

    def prepareForTriggerAvailableNow(self) -> None:
        async def latest() -> dict[TopicPartition, int]:
            async with Planner(self.options) as planner:
                return await planner.latest(await planner.partitions(require_topics=False))

        self.available_now_end = asyncio.run(latest())

    def initialOffset(self) -> dict[str, Any]:
        async def initial() -> dict[TopicPartition, int]:
            async with Planner(self.options) as planner:
                tps = await planner.partitions()
                return await planner.resolve(self.options.starting, tps, starting=True)

        return encode_offsets(asyncio.run(initial()))

    def getDefaultReadLimit(self) -> ReadLimit:
        """Spark's Kafka source gives a composite of both limits; Python sources give one, so
        with both options set the maximum is the limit and the minimum comes from the options."""
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = decode_offsets(start)

        async def latest() -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
            async with Planner(self.options) as planner:
                tps = await planner.partitions(require_topics=False)
                end = await planner.latest(tps)
                new = await planner.earliest([tp for tp in tps if tp not in begin])
                return end, new

        end, new = asyncio.run(latest())
        if self.available_now_end is not None:
            target = self.available_now_end
            end = {tp: min(o, target.get(tp, begin.get(tp, new.get(tp, o)))) for tp, o in end.items()}
        if isinstance(limit, ReadAllAvailable):  # the highest priority, as in Spark
            return encode_offsets(end)
        if (self.trigger_delay is not None and self.available_now_end is None
                and self.trigger_delay.delay(begin, end, self.clock() * 1000)):
            return start
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else self.options.max_offsets_per_trigger
        if max_rows:
            end = rate_limit(begin, new, end, max_rows)
        return encode_offsets(end)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        begin, until = decode_offsets(start), decode_offsets(end)
        for tp in lost_partitions(begin, until):
            report_data_loss(f"{tp} is gone", self.options.fail_on_data_loss)
        for tp, (was, now) in rewound_partitions(begin, until).items():
            report_data_loss(f"Partition {tp}'s offset was changed from {was} to {now}", self.options.fail_on_data_loss)

        async def earliest(tps: list[TopicPartition]) -> dict[TopicPartition, int]:
            async with Planner(self.options) as planner:
                return await planner.earliest(tps)

        new = [tp for tp in until if tp not in begin]
        first = asyncio.run(earliest(new)) if new else {}
        ranges = [OffsetRange(tp.topic, tp.partition, begin.get(tp, first.get(tp, 0)), offset)
                  for tp, offset in sorted(until.items()) if begin.get(tp, first.get(tp, 0)) < offset]
        tasks = split_ranges(ranges, self.options.min_partitions, self.options.max_records_per_partition)
        configs = self._task_configs() if tasks else None
        return [RangePartition(r, configs) for r in tasks]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.settings, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: offsets live in the query's checkpoint, as with Spark's Kafka source."""


class KmirrorDataSource(DataSource):
    """`spark.read.format("kmirror")`: Spark's Kafka source and sink, with kmirror's client."""

    @classmethod
    def name(cls) -> str:
        return "kmirror"

    def schema(self) -> StructType:
        value = str(self.options.get("includeHeaders", "false")).strip().lower()
        return kafka_schema(value == "true")

    def reader(self, schema: StructType) -> DataSourceReader:
        options = parse_source_options(self.options, streaming=False)
        _check_schema(schema, options)
        self._forget_credentials(options)
        return FilteringBatchReader(options) if options.push_filters else BatchReader(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = parse_source_options(self.options, streaming=True)
        _check_schema(schema, options)
        self._forget_credentials(options)
        return StreamReader(options)

    def _forget_credentials(self, options: SourceOptions) -> None:
        """With `kmirror.delegationToken`, this data source is pickled for the executors along
        with the reader's read function (PySpark's plan): the driver's login leaves its options
        once the reader has it."""
        if options.delegation_token_mechanism is not None:
            for key in [k for k in self.options if str(k).lower().removeprefix("kafka.") in CREDENTIAL_KEYS]:
                del self.options[key]

    def writer(self, schema: StructType, overwrite: bool) -> KafkaWriter:
        return KafkaWriter(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> KafkaStreamWriter:
        return KafkaStreamWriter(self.options, schema)
