"""KIP-1279 pause/resume and failback with real processes. Cluster A is the original source,
cluster B mirrors it. Pausing stops the copy (B stays read-only), resuming catches up. After
failover (`--remove --topic '.*'` on B) B is written to, and A writes a divergent tail. Failback
is a mirror with the same name created on A pointing at B: A truncates by the last mirrored
epoch (LME), the fetch protocol resolves what diverges inside that epoch, and only the delta
is copied; afterwards both logs are byte-identical at every offset (KIP "Log Convergence")."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest

from kmirror.client.connection import BrokerConnection
from kmirror.kip1279.errors import MirrorError
from kmirror.metadata.controller.mirrors import EpochBump
from kmirror.mirror.wiring import bump_leader_epochs_request
from kmirror.records.control import ControlType, read_control_type
from kmirror.testing.kafka_clients import end_offsets, produce_delivered, produce_refused
from kmirror.testing.mirror_clusters import create_mirror, describe, wait_until
from kmirror.testing.processes import LocalCluster, kmirror
from kmirror.testing.segments import first_segment, headers, log_batches

pytestmark = pytest.mark.integration

TOPIC = "payments"
PARTITIONS = 2
MIRROR = "dr"
# A short refresh so that a paused partition that would wrongly fetch gets several chances to.
FAST_REFRESH = {"mirror.metadata.refresh.interval.ms": "300"}


@pytest.fixture
def cluster_overrides() -> dict[str, str]:
    return dict(FAST_REFRESH)


def produce(bootstrap: str, tag: str, count: int, codec: str = "lz4") -> list[tuple[int, int]]:
    """`count` records per partition from one idempotent producer; (partition, offset) of each."""
    return produce_delivered(
        {"bootstrap.servers": bootstrap, "compression.type": codec, "enable.idempotence": True, "linger.ms": 20},
        TOPIC, [(i % PARTITIONS, f"{tag}-{i % 5}".encode(), f"{tag} {i} ".encode() * 6)
                for i in range(count * PARTITIONS)], headers=[("tag", tag.encode())])


def states(bootstrap: str) -> set[str]:
    return {row[3] for row in describe(bootstrap).values()}


def caught_up(dest: LocalCluster, source: LocalCluster) -> bool:
    return all(log_batches(dest, TOPIC, p) == log_batches(source, TOPIC, p) for p in range(PARTITIONS)) and all(
        lag == 0 and state == "MIRRORING" for _, _, lag, state in describe(dest.bootstrap).values())


def leader_epoch(cluster: LocalCluster, partition: int) -> int:
    async def metadata() -> Any:
        conn = BrokerConnection("127.0.0.1", cluster.port, client_id="failback-test")
        await conn.connect()
        try:
            return await conn.send(conn.build_request(3, topics=None, allow_auto_topic_creation=False,
                                                      include_topic_authorized_operations=False))
        finally:
            await conn.close()

    response = asyncio.run(metadata())
    topic = next(t for t in response.topics if t.name == TOPIC)
    return int(next(p.leader_epoch for p in topic.partitions if p.partition_index == partition))


def bump_leader_epoch(cluster: LocalCluster, partition: int, min_leader_epoch: int) -> None:
    """BumpLeaderEpochs (key 105) to the cluster's controller, then wait for the new epoch."""
    async def bump() -> Any:
        conn = BrokerConnection("127.0.0.1", cluster.port, client_id="failback-test")
        await conn.connect()
        try:
            topic_id = next(t.topic_id for t in (await conn.send(conn.build_request(
                3, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False))).topics
                if t.name == TOPIC)
            return await conn.send(bump_leader_epochs_request([EpochBump(topic_id, partition, min_leader_epoch)]))
        finally:
            await conn.close()

    response = asyncio.run(bump())
    assert response.error_code == 0 and all(
        p.error_code == 0 for t in response.topics for p in t.partitions), response
    wait_until(lambda: leader_epoch(cluster, partition) >= min_leader_epoch, "the bumped leader epoch")


def test_pause_resume_then_failover_then_failback_converges_copying_only_the_delta(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    a, b = clusters
    kmirror("topics", "--bootstrap-server", a.bootstrap, "--create", "--topic", TOPIC,
            "--partitions", str(PARTITIONS), "--replication-factor", "1")
    produce(a.bootstrap, "first", 40, codec="zstd")
    produce(a.bootstrap, "second", 40, codec="gzip")

    # 1. A -> B, caught up.
    create_mirror(b, a, MIRROR, TOPIC, tmp_path / "b-mirror.properties")
    wait_until(lambda: caught_up(b, a), "B to mirror A byte for byte")

    # Pause: B keeps its log, stays read-only and copies nothing more.
    kmirror("mirrors", "--bootstrap-server", b.bootstrap, "--pause", "--topic", TOPIC)
    wait_until(lambda: states(b.bootstrap) == {"PAUSED"}, "partitions PAUSED")
    paused_batches = {p: log_batches(b, TOPIC, p) for p in range(PARTITIONS)}
    paused_ends = end_offsets(b.bootstrap, TOPIC, PARTITIONS)
    produce(a.bootstrap, "while-paused", 30, codec="snappy")
    a_ends = end_offsets(a.bootstrap, TOPIC, PARTITIONS)
    assert all(a_end > b_end for a_end, b_end in zip(a_ends, paused_ends, strict=True))
    assert produce_refused(b.bootstrap, TOPIC) == MirrorError.READ_ONLY_TOPIC
    # Absence of copying needs a wait: several manager runs (refresh 300 ms) and fetch rounds.
    time.sleep(3)
    assert end_offsets(b.bootstrap, TOPIC, PARTITIONS) == paused_ends
    assert {p: log_batches(b, TOPIC, p) for p in range(PARTITIONS)} == paused_batches
    assert states(b.bootstrap) == {"PAUSED"}

    # Resume: continues from B's log end and catches up.
    kmirror("mirrors", "--bootstrap-server", b.bootstrap, "--resume", "--topic", TOPIC)
    wait_until(lambda: caught_up(b, a), "B to catch up after resume")
    assert end_offsets(b.bootstrap, TOPIC, PARTITIONS) == a_ends
    mirrored = {p: log_batches(b, TOPIC, p) for p in range(PARTITIONS)}
    lme = {p: max(h.partition_leader_epoch for h in headers(mirrored[p])) for p in range(PARTITIONS)}

    # 2. Failover: B becomes writable and is written to.
    kmirror("mirrors", "--bootstrap-server", b.bootstrap, "--remove", "--topic", ".*")
    wait_until(lambda: states(b.bootstrap) == {"STOPPED"}, "partitions STOPPED on B")
    written_at_b = produce(b.bootstrap, "at-b", 25, codec="lz4")
    assert sorted({o for p, o in written_at_b if p == 0})[0] == a_ends[0] + 1  # after MIRROR_PID_RESET

    # A keeps taking writes after the failover: a tail B never saw (KIP Log Convergence B).
    # Partition 0: A's leader epoch moves on first (the KIP's "A also bumps to epoch 2"; on this
    # single-node cluster a leader change is simulated with BumpLeaderEpochs), so its tail is in
    # the epoch B's failover bumped to, with other records: LME truncation removes it.
    # Partition 1: A's tail stays in the LME epoch; LME truncation keeps it and the fetch
    # protocol's divergence check (end of that epoch at B) cuts it.
    kmirror("features", "--bootstrap-server", a.bootstrap, "upgrade", "--feature", "mirror.version=1")
    bump_leader_epoch(a, 0, lme[0] + 1)
    divergent = produce(a.bootstrap, "divergent-at-a", 10, codec="none")
    assert {o for _, o in divergent} and all(o >= a_ends[p] for p, o in divergent)
    for p in range(PARTITIONS):
        tail = [h for h in headers(log_batches(a, TOPIC, p)) if h.base_offset >= a_ends[p]]
        assert b"divergent-at-a" in first_segment(a, TOPIC, p).read_bytes()
        assert tail[0].base_offset == a_ends[p]
        assert {h.partition_leader_epoch for h in tail} == ({lme[0] + 1} if p == 0 else {lme[p]})
    # Same epoch number on both sides, different records: only the LME tells them apart.
    b_reset = headers(log_batches(b, TOPIC, 0))[len(mirrored[0])]
    assert b_reset.is_control and b_reset.partition_leader_epoch == lme[0] + 1

    # "Only the delta is copied" criterion: hold A's segment files open across the failback.
    # Copying from scratch (LME -1, KIP example A) drops every segment
    # (truncate_fully_and_start_at), which would leave these descriptors on unlinked files;
    # the common prefix (everything B mirrored, offsets < a_ends) must stay in the very same
    # file at the same positions with the same bytes, while A's divergent tail is cut and
    # replaced by B's records.
    held = {p: os.open(first_segment(a, TOPIC, p), os.O_RDONLY) for p in range(PARTITIONS)}
    prefix_size = {p: sum(len(raw) for _, raw in mirrored[p]) for p in range(PARTITIONS)}
    try:
        # 3. Failback: a mirror with the same name on A, pointing at B.
        create_mirror(a, b, MIRROR, TOPIC, tmp_path / "a-mirror.properties")
        wait_until(lambda: caught_up(a, b), "A to converge with B")
        for p in range(PARTITIONS):
            st_fd, st_path = os.fstat(held[p]), os.stat(first_segment(a, TOPIC, p))
            assert st_fd.st_nlink == 1 and (st_fd.st_dev, st_fd.st_ino) == (st_path.st_dev, st_path.st_ino)
            assert os.pread(held[p], prefix_size[p], 0) == b"".join(raw for _, raw in mirrored[p])
    finally:
        for fd in held.values():
            os.close(fd)

    b_ends = end_offsets(b.bootstrap, TOPIC, PARTITIONS)
    assert end_offsets(a.bootstrap, TOPIC, PARTITIONS) == b_ends
    for p in range(PARTITIONS):
        a_log, b_log = log_batches(a, TOPIC, p), log_batches(b, TOPIC, p)
        assert a_log == b_log  # same offsets, same bytes, at every offset
        assert a_log[:len(mirrored[p])] == mirrored[p]
        reset, *new = headers(a_log[len(mirrored[p]):])
        assert reset.is_control and reset.base_offset == a_ends[p] and reset.partition_leader_epoch > lme[p]
        assert read_control_type(a_log[len(mirrored[p])][1]) == ControlType.MIRROR_PID_RESET
        assert sum(h.records_count for h in new) == 25
        assert new[0].base_offset == a_ends[p] + 1
        # A's divergent tail (uncompressed, so its values are visible in the file) is gone.
        assert b"divergent-at-a" not in first_segment(a, TOPIC, p).read_bytes()
    at_b = {(p, o) for p, o in written_at_b}
    assert at_b <= {(p, o) for p in range(PARTITIONS) for h in headers(log_batches(a, TOPIC, p))
                    for o in range(h.base_offset, h.base_offset + h.records_count)}

    # A is now the mirror: read-only, MIRRORING.
    assert produce_refused(a.bootstrap, TOPIC) == MirrorError.READ_ONLY_TOPIC
    assert states(a.bootstrap) == {"MIRRORING"}
