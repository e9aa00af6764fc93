"""A failed-over topic keeps taking writes across crashes of its cluster (3 brokers and a
controller at each end, RF 3, the chaos runs' settings).

After failover, every destination node is killed -9 at once and started again, three times,
while an idempotent producer writes to the failed-over topic. Until a restarted leader knows
its partition STOPPED again (the `__mirror_state` coordinator loading, or on a broker not
started yet), Produce answers a retriable error (NOT_LEADER_OR_FOLLOWER) and the producer
waits: no delivery fails, and every acknowledged record is there once. READ_ONLY_TOPIC there
failed hundreds of records, and the epoch bump librdkafka makes after a failed record can
write a record twice (found by `kmirror.testing.chaos`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kmirror.testing.acked_writer import AckedWriter, assert_acked_mirrored_once
from kmirror.testing.chaos import clusters_in
from kmirror.testing.chaos_checks import fail_over, mirror_states, set_up
from kmirror.testing.mirror_clusters import clusters_up, wait_until
from kmirror.testing.processes import LocalCluster

pytestmark = pytest.mark.integration

TOPIC = "orders"
PARTITIONS = 3


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[tuple[LocalCluster, LocalCluster]]:
    source, dest = clusters_in(tmp_path)
    with clusters_up(source, dest):
        yield source, dest


def test_failed_over_topic_takes_writes_across_crashes_of_its_cluster(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    source, dest = clusters
    set_up(source, dest, tmp_path)
    fail_over(dest)
    assert mirror_states(dest.bootstrap) == {"STOPPED"}
    writer = AckedWriter(dest.bootstrap, "across-crashes", TOPIC, PARTITIONS)
    writer.start()
    try:
        for _ in range(3):
            acked = len(writer.acked)
            wait_until(lambda a=acked: len(writer.acked) > a + 20, "writes to the failed-over topic")
            dest.crash()
            dest.start_all()
    finally:
        writer.finish()
    assert not writer.failed, sorted({str(e) for e in writer.failed})
    assert_acked_mirrored_once(dest.bootstrap, writer, every_value_acked=True)
