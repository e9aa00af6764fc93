"""Failover when the source cannot be reached and does not say so: the network between the
sites drops every packet (`kmirror.testing.link` black hole) while the source stays up and
keeps taking writes. The mirror's questions to the source then take its whole request timeout
(30 s) each; the failover must not wait behind them (KIP-1279's disaster case).

The destination reaches the source only through the link. Once the link is a black hole and
the destination's requests are stuck in it, `kmirror mirrors --remove`: every partition is
STOPPED well within one request timeout, the log ends with MIRROR_PID_RESET right after the
mirrored records, and the topic takes writes. Healed, the link carries nothing more of the
source's (now divergent) writes into the failed-over topic."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kmirror.records.control import ControlType, read_control_type
from kmirror.testing.kafka_clients import end_offsets, produce_delivered
from kmirror.testing.link import Link
from kmirror.testing.mirror_clusters import clusters_up, create_mirror, partition_states, wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror
from kmirror.testing.segments import log_batches

pytestmark = pytest.mark.integration

TOPIC = "orders"
PARTITIONS = 2
STOPPED_WITHIN_S = 15  # half the mirror's 30 s request timeout


@pytest.fixture
def linked(tmp_path: Path) -> Iterator[tuple[LocalCluster, LocalCluster, Link]]:
    source = LocalCluster(dir=tmp_path / "source", port=free_port_block(1), link_port=free_port_block(2))
    dest = LocalCluster(dir=tmp_path / "dest", port=free_port_block(1),
                        overrides={"mirror.metadata.refresh.interval.ms": "1000"})
    with clusters_up(source, dest), Link(source.link_routes()) as link:
        yield source, dest, link


def produce(bootstrap: str, count: int, tag: str) -> None:
    delivered = produce_delivered({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"}, TOPIC,
                                  [(i % PARTITIONS, f"{tag}-{i}".encode(), b"v" * 100) for i in range(count)])
    assert len(delivered) == count


def test_failover_with_the_source_black_holed_does_not_wait_for_it(
    linked: tuple[LocalCluster, LocalCluster, Link], tmp_path: Path
) -> None:
    source, dest, link = linked
    kmirror("topics", "--bootstrap-server", source.bootstrap, "--create", "--topic", TOPIC,
            "--partitions", str(PARTITIONS), "--replication-factor", "1")
    produce(source.bootstrap, 200, "before")
    create_mirror(dest, source.link_bootstrap, "m", TOPIC, tmp_path / "mirror.properties")
    mirrored = end_offsets(source.bootstrap, TOPIC, PARTITIONS)
    wait_until(lambda: end_offsets(dest.bootstrap, TOPIC, PARTITIONS) == mirrored and
               set(partition_states(dest.bootstrap, TOPIC).values()) == {"MIRRORING"}, "the mirror caught up")

    link.blackhole()
    produce(source.bootstrap, 100, "partitioned")  # the source is up and written to
    wait_until(lambda: link.held() > 0, "the destination's requests stuck in the black hole")

    started = time.monotonic()
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--remove", "--topic", TOPIC)
    wait_until(lambda: set(partition_states(dest.bootstrap, TOPIC).values()) == {"STOPPED"}, "every partition STOPPED",
               timeout_s=STOPPED_WITHIN_S, seen=lambda: partition_states(dest.bootstrap, TOPIC))
    took = time.monotonic() - started
    print(f"STOPPED {took:.1f} s after --remove, the source black-holed")

    for p in range(PARTITIONS):
        *copied, (marker_offset, marker) = log_batches(dest, TOPIC, p, 1)
        assert read_control_type(marker) == ControlType.MIRROR_PID_RESET, p
        assert marker_offset == mirrored[p], (p, marker_offset, mirrored)
        assert copied == log_batches(source, TOPIC, p, 1)[:len(copied)], f"partition {p}: not the source's prefix"
    after = produce_delivered({"bootstrap.servers": dest.bootstrap, "enable.idempotence": True, "acks": "all"},
                              TOPIC, [(p, b"after", b"written at the destination") for p in range(PARTITIONS)])
    assert sorted(after) == [(p, mirrored[p] + 1) for p in range(PARTITIONS)]

    link.heal()  # the held requests cross now; none may bring the source's new records in
    wait_until(lambda: link.held() == 0, "the held requests delivered")
    ends = end_offsets(dest.bootstrap, TOPIC, PARTITIONS)
    assert ends == [mirrored[p] + 2 for p in range(PARTITIONS)], (ends, mirrored)
    assert set(partition_states(dest.bootstrap, TOPIC).values()) == {"STOPPED"}
