"""`kmirror verify` as a Spark job: one task per partition compares a mirror's two logs.

The driver plans (`plan_verification`): the topics (a regex or a mirror's topics), their
topic ids on both clusters, and each partition's log start and high watermark, the
destination's listed before the source's. Each Spark task (`verify_partition`) fetches
both logs' raw record batches with the connector's partition fetcher, a Fetch kept in
flight on each side while the previous answers are compared, and never decodes a record:
headers, CRCs and bytes are compared up to the destination's high watermark, then the
source's batches above it are read for the bytes and time behind.
"""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import AsyncGenerator, Mapping
from typing import Any

from kmirror.client.admin import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, Admin, ConfigResourceType
from kmirror.client.cluster import Cluster
from kmirror.client.configs import cluster_from_configs
from kmirror.client.errors import KafkaClientError, KafkaError, KafkaProtocolError
from kmirror.client.metadata import TopicMetadata
from kmirror.client.raw_fetch import PartitionFetcher
from kmirror.records.batch import BatchHeader, iter_batches
from kmirror.spark.verify_compare import PartitionComparison, PartitionPlan, PartitionVerification
from kmirror.types import TopicPartition

FETCH_MAX_BYTES = 16 * 1024 * 1024
PARTITION_MAX_BYTES = 8 * 1024 * 1024


class VerifyError(Exception):
    """A usage or connection problem: nothing was verified (exit code 2)."""


def topic_id_text(topic_id: Any) -> str | None:
    """Kafka's `Uuid.toString()`; None for a cluster without topic ids."""
    if topic_id is None or int(topic_id) == 0:
        return None
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


# -- planning (driver) -----------------------------------------------------------------------


async def plan_verification(source_configs: Mapping[str, str], destination_configs: Mapping[str, str], *,
                            topic_pattern: str | None = None, mirror: str | None = None) -> list[PartitionPlan]:
    """The partitions to verify, with both logs' bounds now. Raises VerifyError when a
    cluster cannot be reached or nothing matches."""
    destination = cluster_from_configs(destination_configs, client_id="kmirror-verify")
    source = cluster_from_configs(source_configs, client_id="kmirror-verify")
    try:
        try:
            dest_meta = await destination.refresh()
        except KafkaClientError as exc:
            raise VerifyError(f"cannot reach the destination cluster: {exc}") from None
        topics = await _topics(Admin(destination), dest_meta.topics, topic_pattern, mirror)
        compacted = await _compacted(Admin(destination), topics)
        try:
            source_meta = await source.refresh(topics)
        except KafkaClientError as exc:
            raise VerifyError(f"cannot reach the source cluster: {exc}") from None
        dest_tps = [TopicPartition(t, p) for t in topics for p in sorted(dest_meta.topics[t].partitions)]
        source_tps = [TopicPartition(t, p) for t in topics if _exists(source_meta.topics.get(t))
                      for p in sorted(source_meta.topics[t].partitions)]
        dest_bounds = await _bounds(destination, dest_tps)
        source_bounds = await _bounds(source, source_tps)
    finally:
        await asyncio.gather(destination.close(), source.close(), return_exceptions=True)
    plans = []
    for tp in sorted(set(dest_tps) | set(source_tps)):
        s_start, s_end = source_bounds.get(tp, (0, 0))
        d_start, d_end = dest_bounds.get(tp, (0, 0))
        source_topic = source_meta.topics.get(tp.topic)
        plans.append(PartitionPlan(
            tp.topic, tp.partition,
            topic_id_text(source_topic.topic_id) if source_topic is not None and _exists(source_topic) else None,
            topic_id_text(dest_meta.topics[tp.topic].topic_id),
            s_start, s_end, d_start, d_end, tp.topic in compacted))
    return plans


async def _compacted(admin: Admin, topics: list[str]) -> set[str]:
    """The topics whose `cleanup.policy` has `compact`, from the destination, which a mirror
    keeps in step with its source (a topic whose configs cannot be read counts as not
    compacted: its batches must then be the source's, byte for byte)."""
    if not topics:
        return set()
    try:
        described = await admin.describe_configs_results(ConfigResourceType.TOPIC, topics, ["cleanup.policy"])
    except KafkaClientError:
        return set()
    return {topic for topic, entries in described.items() if not isinstance(entries, KafkaError)
            and any(e.name == "cleanup.policy" and _compacts(e.value) for e in entries)}


def _compacts(cleanup_policy: str | None) -> bool:
    """Kafka's list value, as the broker's `LogConfig.compact_enabled` reads it (the connector
    may not import the broker's log layer)."""
    return "compact" in {policy.strip() for policy in (cleanup_policy or "").split(",")}


def _exists(topic: TopicMetadata | None) -> bool:
    return topic is not None and not topic.error_code


async def _topics(admin: Admin, topics: Mapping[str, TopicMetadata], pattern: str | None,
                  mirror: str | None) -> list[str]:
    if mirror is not None:
        try:
            described = await admin.describe_mirrors([mirror])
        except KafkaError as exc:
            raise VerifyError(f"mirror '{mirror}': {exc}") from None
        names = sorted({d.topic for d in described})
        if not names:
            raise VerifyError(f"mirror '{mirror}' has no topics")
    else:
        try:
            regex = re.compile(pattern or ".*")
        except re.error as exc:
            raise VerifyError(f"--topic is not a valid regular expression: {exc}") from None
        names = sorted(n for n, t in topics.items() if regex.fullmatch(n) and not t.is_internal
                       and not t.error_code and not n.startswith("__"))
        if not names:
            raise VerifyError(f"no topic of the destination cluster matches '{pattern or '.*'}'")
    missing = [n for n in names if not _exists(topics.get(n))]
    if missing:
        raise VerifyError(f"topic(s) {', '.join(missing)} do not exist on the destination cluster")
    return names


async def _bounds(cluster: Cluster, tps: list[TopicPartition]) -> dict[TopicPartition, tuple[int, int]]:
    if not tps:
        return {}
    admin = Admin(cluster)
    try:
        start = await admin.list_offsets({tp: EARLIEST_TIMESTAMP for tp in tps})
        end = await admin.list_offsets({tp: LATEST_TIMESTAMP for tp in tps})
    except KafkaClientError as exc:
        raise VerifyError(f"ListOffsets: {exc}") from None
    return {tp: (start[tp].offset, end[tp].offset) for tp in tps}


# -- one partition (a Spark task) ------------------------------------------------------------


class BatchStream:
    """The raw batches of one partition from `start` to `end`, one Fetch kept in flight."""

    def __init__(self, cluster: Cluster, tp: TopicPartition, start: int, end: int, retry_timeout_ms: int) -> None:
        self.fetcher = PartitionFetcher(cluster, tp, max_wait_ms=100, max_bytes=FETCH_MAX_BYTES,
                                        partition_max_bytes=PARTITION_MAX_BYTES, retry_timeout_ms=retry_timeout_ms)
        self.tp = tp
        self.start = start
        self.end = end

    async def batches(self) -> AsyncGenerator[tuple[BatchHeader, memoryview], None]:
        offset = self.start
        pending = asyncio.ensure_future(self.fetcher.fetch(offset)) if offset < self.end else None
        try:
            while pending is not None:
                fetched = await pending
                pending = None
                if fetched.error_code:
                    raise KafkaError(fetched.error_code, context=f"Fetch {self.tp} at offset {offset}")
                records = memoryview(fetched.records)
                found = [(pos, h) for pos, h in iter_batches(records, allow_truncated_tail=True)
                         if h.next_offset > offset and h.base_offset < self.end]
                if not found:
                    raise KafkaProtocolError(f"Fetch {self.tp}: no record batch at offset {offset} "
                                             f"(high watermark {fetched.high_watermark})")
                offset = found[-1][1].next_offset
                if offset < self.end:  # in flight while these batches are compared
                    pending = asyncio.ensure_future(self.fetcher.fetch(offset))
                for pos, header in found:
                    yield header, records[pos:pos + header.size]
        finally:
            if pending is not None:
                pending.cancel()


async def _verify(plan: PartitionPlan, source_configs: Mapping[str, str], destination_configs: Mapping[str, str],
                  retry_timeout_ms: int) -> PartitionVerification:
    tp = TopicPartition(plan.topic, plan.partition)
    comparison = PartitionComparison(plan)
    source = cluster_from_configs(source_configs, client_id="kmirror-verify")
    destination = cluster_from_configs(destination_configs, client_id="kmirror-verify")
    try:
        start = plan.compare_from
        src = BatchStream(source, tp, start, plan.source_high_watermark, retry_timeout_ms).batches()
        dst = BatchStream(destination, tp, start, plan.destination_high_watermark, retry_timeout_ms).batches()
        src_next = await anext(src, None)
        async for d_header, d_bytes in dst:
            if (src_next is None or src_next[0].base_offset > d_header.base_offset) \
                    and comparison.cleaned_away(d_header):
                continue
            if src_next is None:
                comparison.destination_only(d_header)
                break
            s_header, s_bytes = src_next
            if not comparison.pair(s_header, s_bytes, d_header, d_bytes):
                break
            src_next = await anext(src, None)
        else:
            while src_next is not None:
                s_header = src_next[0]
                if s_header.base_offset < plan.destination_high_watermark:
                    comparison.source_only(s_header)
                    break
                comparison.behind(s_header)
                src_next = await anext(src, None)
        await asyncio.gather(src.aclose(), dst.aclose(), return_exceptions=True)
        return comparison.result()
    finally:
        await asyncio.gather(source.close(), destination.close(), return_exceptions=True)


def verify_partition(plan: PartitionPlan, source_configs: Mapping[str, str], destination_configs: Mapping[str, str],
                     retry_timeout_ms: int = 30_000) -> PartitionVerification:
    """One Spark task: the verdict on one partition. A cluster that cannot be read is the
    partition's error, not the job's failure."""
    try:
        return asyncio.run(_verify(plan, source_configs, destination_configs, retry_timeout_ms))
    except (KafkaClientError, OSError) as exc:
        return PartitionVerification(plan=plan, error=f"cannot read the partition: {exc}")


def run_verification(spark: Any, plans: list[PartitionPlan], source_configs: Mapping[str, str],
                     destination_configs: Mapping[str, str]) -> list[PartitionVerification]:
    """Run one Spark task per partition and collect the verdicts, in plan order."""
    if not plans:
        return []
    src, dst = dict(source_configs), dict(destination_configs)
    rdd = spark.sparkContext.parallelize(plans, len(plans))
    results: list[PartitionVerification] = rdd.map(lambda plan: verify_partition(plan, src, dst)).collect()
    return results
