"""`transactional.id.expiration.ms` on a real node with confluent-kafka's transactional producer.

An id idle (its last transaction complete) longer than the expiration gets a tombstone in
`__transaction_state` and is forgotten: DescribeTransactions answers TRANSACTIONAL_ID_NOT_FOUND,
ListTransactions no longer lists it, a restarted node (which replays the log) does not bring it
back, and the id starts again with a new producer id. An id with a transaction open is never
expired, however long it has been open.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kmirror.testing.kafka_clients import consume_to_end
from kmirror.testing.mirror_clusters import wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror

pytestmark = pytest.mark.integration

# long enough for the CLI describing the committed id (a process start, seconds on a loaded
# machine) to see it before it expires
EXPIRATION_MS = 8000
OVERRIDES = {
    "transactional.id.expiration.ms": str(EXPIRATION_MS),
    "transaction.remove.expired.transaction.cleanup.interval.ms": "500",
    "transaction.state.log.num.partitions": "3",
}


@pytest.fixture
def node(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(dir=tmp_path / "node", port=free_port_block(), overrides=dict(OVERRIDES)) as c:
        yield c


def described(cluster: LocalCluster, txn_id: str) -> dict[str, str] | str:
    """The describe row as a dict, or the CLI's error line when the id is not found."""
    result = kmirror("transactions", "--bootstrap-server", cluster.bootstrap, "--describe",
                     "--transactional-id", txn_id, check=False)
    if result.returncode != 0:
        return result.stderr.strip()
    header, values = (line.split() for line in result.stdout.splitlines())
    return dict(zip(header, values, strict=False))  # TopicPartitions, the last column, may be empty


def listed(cluster: LocalCluster) -> set[str]:
    out = kmirror("transactions", "--bootstrap-server", cluster.bootstrap, "--list").stdout
    return {line.split()[0] for line in out.splitlines()[1:]}


def transactional(cluster: LocalCluster, txn_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id, "linger.ms": 5})
    producer.init_transactions(60)
    return producer


def test_an_idle_transactional_id_expires_and_an_open_one_does_not(node: LocalCluster) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    kmirror("topics", "--bootstrap-server", node.bootstrap, "--create", "--topic", topic,
            "--partitions", "1", "--replication-factor", "1")
    idle_id, open_id = f"idle-{uuid.uuid4().hex[:6]}", f"open-{uuid.uuid4().hex[:6]}"

    kept_open = transactional(node, open_id)
    kept_open.begin_transaction()
    kept_open.produce(topic, value=b"open", partition=0)
    kept_open.flush(30)

    idle = transactional(node, idle_id)
    idle.begin_transaction()
    idle.produce(topic, value=b"committed", partition=0)
    idle.commit_transaction(60)
    committed_at = time.monotonic()
    first = described(node, idle_id)
    assert isinstance(first, dict) and first["TransactionState"] in ("PrepareCommit", "CompleteCommit"), first
    old_producer_id = int(first["ProducerId"])
    del idle

    wait_until(lambda: "TRANSACTIONAL_ID_NOT_FOUND" in str(described(node, idle_id)), "the idle id to expire",
               seen=lambda: described(node, idle_id))
    assert time.monotonic() - committed_at >= EXPIRATION_MS / 1000 - 0.5  # not before its time
    assert idle_id not in listed(node)
    # open for longer than the expiration, and still there
    still_open = described(node, open_id)
    assert isinstance(still_open, dict) and still_open["TransactionState"] == "Ongoing", still_open

    # the tombstone is in __transaction_state: a restart replays it and the id stays gone
    node.kill9(1)
    node.start_node(1)
    assert "TRANSACTIONAL_ID_NOT_FOUND" in str(described(node, idle_id))

    # the expired id starts again from a new producer id; the open transaction survived the
    # restart and its producer still ends it
    again = transactional(node, idle_id)
    again.begin_transaction()
    again.produce(topic, value=b"again", partition=0)
    again.commit_transaction(60)
    renewed = described(node, idle_id)
    assert isinstance(renewed, dict) and int(renewed["ProducerId"]) != old_producer_id, renewed
    wait_until(lambda: isinstance(described(node, open_id), dict), "the open id, reloaded")
    kept_open.abort_transaction(60)
    assert [v for _, v in consume_to_end(node.bootstrap, topic, "read_committed")] == [b"committed", b"again"]
