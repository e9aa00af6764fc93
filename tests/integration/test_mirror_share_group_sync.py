"""KIP-1279's share group offset sync on real processes: a share group's start offsets (SPSO)
at the source appear at the destination (DescribeShareGroupOffsets there, AlterShareGroupOffsets
here), and after a failover a share consumer of the same group at the destination is given
exactly the records the source's group had not acknowledged."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType

from kmirror.testing.kafka_clients import create_topic
from kmirror.testing.mirror_clusters import create_mirror, partition_states, wait_until
from kmirror.testing.processes import LocalCluster, kmirror
from kmirror.testing.share_consumers import earliest, produce, share_consumer

pytestmark = pytest.mark.integration

TOPIC, GROUP = "queue", "work-1"
ACCEPTED = {0: 12, 1: 7}  # the source's group accepts the records below these offsets


@pytest.fixture
def dest_overrides() -> dict[str, str]:
    return {"mirror.metadata.refresh.interval.ms": "500"}


def start_offsets(bootstrap: str, group: str) -> dict[int, int]:
    """partition of TOPIC -> the group's share-partition start offset (`kmirror share-groups`)."""
    proc = kmirror("share-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group, check=False)
    rows = [line.split() for line in proc.stdout.splitlines()[2:]]
    return {int(r[2]): int(r[3]) for r in rows if len(r) == 5 and r[1] == TOPIC and r[3] != "-"}


def test_share_group_offsets_follow_the_source_and_failover_delivers_the_rest(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    source, dest = clusters
    create_topic(source.bootstrap, TOPIC, partitions=2)
    produced = produce(source.bootstrap, TOPIC, 40, 2)  # 20 records in each partition
    earliest(source.bootstrap, GROUP)
    consumer = share_consumer(source.bootstrap, GROUP, TOPIC, **{"share.acknowledgement.mode": "explicit"})
    seen: set[tuple[int, int]] = set()
    deadline = time.monotonic() + 60
    while len(seen) < len(produced):
        assert time.monotonic() < deadline, f"{len(seen)} records at the source"
        for message in consumer.poll(0.5):
            key = (message.partition(), message.offset())
            seen.add(key)
            accept = message.offset() < ACCEPTED[message.partition()]
            consumer.acknowledge(message, AcknowledgeType.ACCEPT if accept else AcknowledgeType.RELEASE)
        consumer.commit_sync(30)
    consumer.close()
    wait_until(lambda: start_offsets(source.bootstrap, GROUP) == ACCEPTED, "the source group's start offsets")

    create_mirror(dest, source, "dr", TOPIC, tmp_path / "mirror.properties", {"mirror.groups.include": "work-.*"})
    wait_until(lambda: start_offsets(dest.bootstrap, GROUP) == ACCEPTED, "the start offsets at the destination")
    listed = kmirror("share-groups", "--bootstrap-server", dest.bootstrap, "--list").stdout.split()
    assert GROUP in listed

    wait_until(lambda: set(partition_states(dest.bootstrap, TOPIC).values()) == {"MIRRORING"}, "partitions MIRRORING")
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--remove", "--topic", ".*")
    wait_until(lambda: set(partition_states(dest.bootstrap, TOPIC).values()) == {"STOPPED"}, "partitions STOPPED")
    resumed = share_consumer(dest.bootstrap, GROUP, TOPIC)
    delivered: list[tuple[int, int]] = []
    expected = sorted((p, o) for p in (0, 1) for o in range(ACCEPTED[p], 20))
    try:
        deadline = time.monotonic() + 60
        while len(delivered) < len(expected):
            assert time.monotonic() < deadline, f"the destination delivered {sorted(delivered)}"
            delivered += [(m.partition(), m.offset()) for m in resumed.poll(0.5) if m.error() is None]
        assert not [m for m in resumed.poll(1.0) if m.error() is None]
    finally:
        resumed.close()
    assert sorted(delivered) == expected
