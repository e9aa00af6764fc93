"""Consumer groups with commits, and `kill -9` + restart keeping every acknowledged record
and committed offset at the same offsets."""

from __future__ import annotations

import pytest

from kmirror.testing.kafka_clients import (
    committed,
    consume_partition,
    create_topic,
    group_consume,
    produce_acked,
)
from kmirror.testing.processes import LocalCluster

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(module_node: LocalCluster) -> LocalCluster:
    """The module's tests share one node, each with its own topic and group; the one that
    restarts it comes last."""
    return module_node


def test_group_consumes_commits_and_resumes(cluster):
    create_topic(cluster.bootstrap, "gt", partitions=2)
    acked = produce_acked(cluster.bootstrap, "gt", 40, 2)
    first = group_consume(cluster.bootstrap, "g1", "gt", 25)
    assert len(first) == 25
    offsets = committed(cluster.bootstrap, "g1", "gt", 2)
    for p in range(2):
        seen = [o for (pp, o, _) in first if pp == p]
        assert offsets[p] == (max(seen) + 1 if seen else -1001)
    rest = group_consume(cluster.bootstrap, "g1", "gt", 40 - 25)
    everything = {(p, o): v for (p, o, v) in first + rest}
    assert everything == acked


def test_kill_9_and_restart_keeps_acknowledged_records_and_offsets(cluster):
    create_topic(cluster.bootstrap, "durable", partitions=3)
    acked = produce_acked(cluster.bootstrap, "durable", 600, 3)
    assert len(acked) == 600
    consumed = group_consume(cluster.bootstrap, "dg", "durable", 100)
    before = committed(cluster.bootstrap, "dg", "durable", 3)

    cluster.kill9()
    assert not cluster.serving()
    cluster.up()

    for p in range(3):
        expected = sorted((o, v) for (pp, o), v in acked.items() if pp == p)
        msgs = consume_partition(cluster.bootstrap, "durable", p, len(expected))
        assert [(m.offset(), m.value()) for m in msgs] == expected
    assert committed(cluster.bootstrap, "dg", "durable", 3) == before
    assert len(consumed) == 100
    # the log keeps accepting writes after recovery, at the next offsets
    more = produce_acked(cluster.bootstrap, "durable", 3, 3, prefix="after")
    assert sorted(more) == [(p, 200) for p in range(3)]
