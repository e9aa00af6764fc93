"""Mirror throttling on real processes, both ends:
- destination side: `mirror.replication.throttled.rate` with the mirror topic's
  `mirror.replication.throttled.replicas` holds the mirror's copy rate within 20% over 30 s;
- source side: a `consumer_byte_rate` client quota on the mirror fetcher's deterministic client
  id (`broker-<id>-fetcher-<n>-mirror-<name>`) holds it the same way.
Data is produced at the source after the throttle is in place, as fast as the source takes it,
so the mirror always has more to copy than the rate allows."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kmirror.mirror.fetcher.policy import mirror_fetcher_client_id
from kmirror.testing.kafka_clients import end_offsets
from kmirror.testing.mirror_clusters import create_mirror, wait_until
from kmirror.testing.processes import LocalCluster, kmirror

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RATE = 300_000  # bytes/s
VALUE = b"m" * 10_000
RECORDS = 2_500  # 25 MB: far more than 30 s at RATE
WINDOW_S = 30


@pytest.fixture
def dest_overrides() -> dict[str, str]:
    return {"mirror.replication.throttled.rate": str(RATE)}


def _produce(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 200_000})
    for _ in range(RECORDS):
        while True:
            try:
                producer.produce(topic, VALUE)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def _mirrored_rate(source: LocalCluster, dest: LocalCluster, topic: str) -> float:
    """Produce at the source; the bytes/s the destination copied over WINDOW_S from then."""
    started = time.monotonic()
    _produce(source.bootstrap, topic)
    assert time.monotonic() - started < WINDOW_S / 2, "the source took too long to fill"
    time.sleep(max(0.0, WINDOW_S - (time.monotonic() - started)))
    copied = end_offsets(dest.bootstrap, topic, 1)[0]
    elapsed = time.monotonic() - started
    assert copied < RECORDS, "the mirror copied everything: not throttled"
    return copied * len(VALUE) / elapsed


def _setup(source: LocalCluster, dest: LocalCluster, topic: str, tmp_path: Path) -> None:
    kmirror("topics", "--bootstrap-server", source.bootstrap, "--create", "--topic", topic, "--partitions", "1",
            "--replication-factor", "1")
    create_mirror(dest, source, "m", topic, tmp_path / "mirror.properties")
    wait_until(lambda: topic in kmirror("topics", "--bootstrap-server", dest.bootstrap, "--list").stdout.split(),
               "the mirror topic at the destination")


def test_destination_throttle_holds_the_mirror_rate(clusters: tuple[LocalCluster, LocalCluster],
                                                    tmp_path: Path) -> None:
    source, dest = clusters
    _setup(source, dest, "throttled", tmp_path)
    # the KIP's notation: partition 0 on destination broker 1
    kmirror("configs", "--bootstrap-server", dest.bootstrap, "--entity-type", "topics", "--entity-name",
            "throttled", "--alter", "--add-config", "mirror.replication.throttled.replicas=[0:1]")
    rate = _mirrored_rate(source, dest, "throttled")
    print(f"mirror.replication.throttled.rate={RATE}: mirrored {rate:.0f} B/s over {WINDOW_S} s")
    assert 0.8 * RATE <= rate <= 1.2 * RATE
    # the KIP: the rate is adjusted at runtime, as a dynamic broker config; raised, the mirror catches up
    kmirror("configs", "--bootstrap-server", dest.bootstrap, "--entity-type", "brokers", "--entity-name", "1",
            "--alter", "--add-config", "mirror.replication.throttled.rate=100000000")
    started = time.monotonic()
    wait_until(lambda: end_offsets(dest.bootstrap, "throttled", 1)[0] == RECORDS, "the mirror to catch up")
    print(f"raised to 100 MB/s: the remaining data copied in {time.monotonic() - started:.1f} s")


def test_source_consumer_quota_on_the_mirror_client_id_holds_the_mirror_rate(
        clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path) -> None:
    source, dest = clusters
    client_id = mirror_fetcher_client_id(1, 0, "m")
    kmirror("configs", "--bootstrap-server", source.bootstrap, "--entity-type", "clients", "--entity-name",
            client_id, "--alter", "--add-config", f"consumer_byte_rate={RATE}")
    _setup(source, dest, "quota-limited", tmp_path)  # no destination throttle on this topic
    rate = _mirrored_rate(source, dest, "quota-limited")
    print(f"source consumer_byte_rate={RATE} on {client_id}: mirrored {rate:.0f} B/s over {WINDOW_S} s")
    assert 0.8 * RATE <= rate <= 1.2 * RATE
    # the source stays writable and readable for everyone else
    wait_until(lambda: end_offsets(source.bootstrap, "quota-limited", 1)[0] == RECORDS, "the source log end")
