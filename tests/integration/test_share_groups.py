"""KIP-932 share groups on a real kmirror node, driven by confluent-kafka's ShareConsumer
(librdkafka's share consumer): two members share the partitions of one topic and every record
is delivered once; explicit RELEASE redelivers a record with its delivery count raised, REJECT
archives it, a record released `group.share.delivery.count.limit` times is archived; a
member's close releases what it held; a share group id cannot be used by a consumer group;
`kmirror share-groups` lists, describes, resets and deletes share groups."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from confluent_kafka import AcknowledgeType, Consumer, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from kmirror.testing.kafka_clients import create_topic
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror
from kmirror.testing.share_consumers import earliest, poll_until, produce, share_consumer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(dir=tmp_path_factory.mktemp("share") / "cluster", port=free_port_block(),
                      overrides={"group.share.heartbeat.interval.ms": "1000",
                                 "group.share.delivery.count.limit": "3",
                                 "group.share.record.lock.duration.ms": "2000"}) as c:
        yield c


def test_two_members_share_a_topic_and_every_record_is_delivered_once(cluster: LocalCluster) -> None:
    create_topic(cluster.bootstrap, "jobs", partitions=3)
    earliest(cluster.bootstrap, "workers")
    produced = produce(cluster.bootstrap, "jobs", 300, 3, "zstd")
    consumers = [share_consumer(cluster.bootstrap, "workers", "jobs") for _ in range(2)]
    seen: Counter[tuple[int, int]] = Counter()
    try:
        poll_until(consumers, seen, len(produced))
        more = produce(cluster.bootstrap, "jobs", 150, 3, "none")
        poll_until(consumers, seen, len(produced) + len(more))
        for consumer in consumers:  # nothing more comes: every record was accepted (implicit mode)
            assert not [m for m in consumer.poll(1.0) if m.error() is None]
    finally:
        for consumer in consumers:
            consumer.close()
    assert set(seen) == produced | more
    assert max(seen.values()) == 1, [k for k, v in seen.items() if v > 1]


def test_release_redelivers_reject_archives_and_the_delivery_limit_archives(cluster: LocalCluster) -> None:
    create_topic(cluster.bootstrap, "tasks", partitions=1)
    earliest(cluster.bootstrap, "acks")
    produce(cluster.bootstrap, "tasks", 3, 1)  # offsets 0, 1, 2
    consumer = share_consumer(cluster.bootstrap, "acks", "tasks", **{"share.acknowledgement.mode": "explicit"})
    deliveries: list[tuple[int, int]] = []  # (offset, delivery count)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(deliveries) < 5:
            for message in consumer.poll(0.5):
                assert message.error() is None, message.error()
                deliveries.append((message.offset(), message.delivery_count()))
                # 0: accepted; 1: rejected; 2: released at every delivery
                kind = {0: AcknowledgeType.ACCEPT, 1: AcknowledgeType.REJECT}.get(message.offset(),
                                                                                 AcknowledgeType.RELEASE)
                consumer.acknowledge(message, kind)
            consumer.commit_sync(30)
        # offset 2 is delivered 3 times (group.share.delivery.count.limit=3), then archived
        time.sleep(1.0)
        assert not [m for m in consumer.poll(1.0) if m.error() is None]
    finally:
        consumer.close()
    assert sorted(deliveries) == [(0, 1), (1, 1), (2, 1), (2, 2), (2, 3)]


def test_a_closed_member_releases_what_it_held(cluster: LocalCluster) -> None:
    create_topic(cluster.bootstrap, "held", partitions=1)
    earliest(cluster.bootstrap, "holders")
    produced = produce(cluster.bootstrap, "held", 20, 1)
    first = share_consumer(cluster.bootstrap, "holders", "held", **{"share.acknowledgement.mode": "explicit"})
    got: list[int] = []
    deadline = time.monotonic() + 60
    while not got and time.monotonic() < deadline:
        got = [m.offset() for m in first.poll(0.5) if m.error() is None]
    assert got
    first.close()  # acquired, never acknowledged: the close releases them
    second = share_consumer(cluster.bootstrap, "holders", "held")
    seen: Counter[tuple[int, int]] = Counter()
    try:
        poll_until([second], seen, len(produced), timeout_s=20)  # well within the 30 s lock
    finally:
        second.close()
    assert set(seen) == produced


def test_a_share_group_id_is_not_a_consumer_group(cluster: LocalCluster) -> None:
    create_topic(cluster.bootstrap, "shared-id", partitions=1)
    produce(cluster.bootstrap, "shared-id", 5, 1)
    earliest(cluster.bootstrap, "taken")
    consumer = share_consumer(cluster.bootstrap, "taken", "shared-id")
    seen: Counter[tuple[int, int]] = Counter()
    try:
        poll_until([consumer], seen, 5)  # the group exists, as a share group
        other = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "taken", "group.protocol": "consumer",
                          "auto.offset.reset": "earliest"})
        other.subscribe(["shared-id"])
        errors = []
        deadline = time.monotonic() + 20
        while not errors and time.monotonic() < deadline:
            message = other.poll(0.5)
            if message is not None and message.error() is not None:
                errors.append(message.error())
            assert message is None or message.error() is not None, "a consumer group read the share group's topic"
        other.close()
        assert errors and "group id does not exist" in errors[0].str(), errors  # fatal: GROUP_ID_NOT_FOUND
    finally:
        consumer.close()


def test_share_groups_command_lists_describes_resets_and_deletes(cluster: LocalCluster) -> None:
    create_topic(cluster.bootstrap, "cli-share", partitions=2)
    earliest(cluster.bootstrap, "cli-sg")
    consumer = share_consumer(cluster.bootstrap, "cli-sg", "cli-share")

    def command(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return kmirror("share-groups", "--bootstrap-server", cluster.bootstrap, *args, check=check)

    try:
        deadline = time.monotonic() + 30
        while "cli-sg" not in command("--list").stdout.split():
            assert time.monotonic() < deadline, "the share group is not listed"
            consumer.poll(0.2)
        states = command("--list", "--state").stdout.splitlines()
        assert states[0].split() == ["GROUP", "STATE"] and ["cli-sg", "Stable"] in [s.split() for s in states]
        members = command("--describe", "--group", "cli-sg", "--members").stdout.splitlines()
        assert members[1].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        assert members[2].split()[0] == "cli-sg" and members[2].split()[-1] == "2"
        state = command("--describe", "--group", "cli-sg", "--state", "--verbose").stdout.splitlines()
        assert state[1].split() == ["GROUP", "COORDINATOR", "(ID)", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH",
                                    "#MEMBERS"]
        assert state[2].split()[-4:] == ["Stable", "1", "1", "1"]
        refused = command("--delete", "--group", "cli-sg", check=False)
        assert refused.returncode == 1 and "NON_EMPTY_GROUP" in refused.stderr
        missing = command("--describe", "--group", "nobody", "--state", check=False)
        assert missing.returncode == 1 and missing.stderr.strip() == "Error: Share group 'nobody' does not exist."
        produce(cluster.bootstrap, "cli-share", 10, 2)  # 5 records in each partition
        poll_until([consumer], Counter(), 10)
        consumer.commit_sync(30)
        offsets = [line.split() for line in command("--describe", "--group", "cli-sg").stdout.splitlines()[1:]]
        assert offsets[0] == ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"]
        assert sorted(offsets[1:]) == [["cli-sg", "cli-share", "0", "5", "0"], ["cli-sg", "cli-share", "1", "5", "0"]]
    finally:
        consumer.close()
    deadline = time.monotonic() + 30
    while ["cli-sg", "Empty"] not in [line.split() for line in command("--list", "--state").stdout.splitlines()]:
        assert time.monotonic() < deadline, "the group did not become Empty"
        time.sleep(0.3)  # the close's leave heartbeat reaches the coordinator
    # no member now: the start offsets can be reset, and a new member gets every record again
    dry = command("--reset-offsets", "--group", "cli-sg", "--topic", "cli-share", "--to-earliest", "--dry-run")
    assert sorted(line.split() for line in dry.stdout.splitlines()[2:]) == [
        ["cli-sg", "cli-share", "0", "0"], ["cli-sg", "cli-share", "1", "0"]]
    assert sorted(offsets[1:]) == sorted(
        line.split() for line in command("--describe", "--group", "cli-sg").stdout.splitlines()[2:])
    command("--reset-offsets", "--group", "cli-sg", "--topic", "cli-share:1", "--to-offset", "2", "--execute")
    again = share_consumer(cluster.bootstrap, "cli-sg", "cli-share")
    replayed: Counter[tuple[int, int]] = Counter()
    try:
        poll_until([again], replayed, 3)
        assert set(replayed) == {(1, 2), (1, 3), (1, 4)}
        busy = command("--reset-offsets", "--group", "cli-sg", "--all-topics", "--to-latest", "--execute",
                       check=False)
        assert busy.returncode == 1 and "Share group 'cli-sg' is not empty." in busy.stderr
    finally:
        again.close()
    deadline = time.monotonic() + 30
    while (deleted := command("--delete", "--group", "cli-sg", check=False)).returncode != 0:
        assert time.monotonic() < deadline, deleted.stderr
        time.sleep(0.3)
    assert deleted.stdout.strip() == "Deletion of requested share groups ('cli-sg') was successful."
    assert "cli-sg" not in command("--list").stdout.split()


def test_read_committed_share_groups_never_get_aborted_records(cluster: LocalCluster) -> None:
    create_topic(cluster.bootstrap, "txns", partitions=1)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "share-txn"})
    producer.init_transactions(30)
    for commit in (False, True, False, True):
        producer.begin_transaction()
        for i in range(5):
            producer.produce("txns", value=b"%s-%d" % (b"commit" if commit else b"abort", i))
        assert producer.flush(30) == 0  # written before the abort (an abort drops what is unsent)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for group, level in (("committed-only", "read_committed"), ("everything", "read_uncommitted")):
        resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("share.isolation.level", level, incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource])[resource].result(30)
    values: dict[str, list[bytes]] = {}
    for group, want in (("committed-only", 10), ("everything", 20)):
        consumer = share_consumer(cluster.bootstrap, group, "txns")
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + 30
            while len(got) < want:
                assert time.monotonic() < deadline, f"{group}: {got}"
                got += [m.value() for m in consumer.poll(0.5) if m.error() is None]
            assert not [m for m in consumer.poll(1.0) if m.error() is None]  # markers are never delivered
        finally:
            consumer.close()
        values[group] = got
    assert sorted(values["committed-only"]) == sorted([b"commit-%d" % i for i in range(5)] * 2)
    assert sorted(values["everything"]) == sorted([b"%s-%d" % (kind, i) for kind in (b"abort", b"commit")
                                                   for i in range(5)] * 2)


CRASHING_MEMBER = """
import sys, time
from confluent_kafka import ShareConsumer
consumer = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": "crashers",
                          "share.acknowledgement.mode": "explicit"})
consumer.subscribe(["crash"])
while not [m for m in consumer.poll(0.5) if m.error() is None]:
    pass
print("acquired", flush=True)
time.sleep(600)  # holds its records until killed
"""


def test_a_crashed_members_records_go_to_another_after_the_lock_duration(cluster: LocalCluster) -> None:
    """The member is kill -9'd holding records (no close, no release): they are delivered
    again once `share.record.lock.duration.ms` (the broker's 2000 here) has passed."""
    create_topic(cluster.bootstrap, "crash", partitions=1)
    earliest(cluster.bootstrap, "crashers")
    produced = produce(cluster.bootstrap, "crash", 10, 1)
    member = subprocess.Popen([sys.executable, "-c", CRASHING_MEMBER, cluster.bootstrap], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        assert member.stdout is not None and member.stdout.readline().strip() == "acquired"
    finally:
        member.kill()
        member.wait()
    survivor = share_consumer(cluster.bootstrap, "crashers", "crash")
    counts: list[int] = []
    seen: Counter[tuple[int, int]] = Counter()
    started = time.monotonic()
    try:
        deadline = started + 30
        while len(seen) < len(produced):
            assert time.monotonic() < deadline, f"{len(seen)} records redelivered"
            for message in survivor.poll(0.5):
                if message.error() is None:
                    seen[(message.partition(), message.offset())] += 1
                    counts.append(message.delivery_count())
    finally:
        survivor.close()
    assert set(seen) == produced
    assert 2 in counts  # what the crashed member held comes back on its second delivery


def test_acknowledged_records_stay_acknowledged_after_kill_9_and_restart(cluster: LocalCluster) -> None:
    """Last in the module: it restarts the node. The group's membership and the share
    partition's state are stored at the group's coordinator (the state after each
    acknowledgement): after the restart only the records that
    were released are delivered again, not the accepted ones (with the state lost they all
    would be, the group being at `earliest`)."""
    create_topic(cluster.bootstrap, "durable", partitions=1)
    earliest(cluster.bootstrap, "keepers")
    produce(cluster.bootstrap, "durable", 20, 1)  # offsets 0-19
    consumer = share_consumer(cluster.bootstrap, "keepers", "durable", **{"share.acknowledgement.mode": "explicit"})
    delivered: list[int] = []
    deadline = time.monotonic() + 60
    while len(delivered) < 20 and time.monotonic() < deadline:
        for message in consumer.poll(0.5):
            assert message.error() is None, message.error()
            delivered.append(message.offset())
            consumer.acknowledge(message, AcknowledgeType.ACCEPT if message.offset() < 12 else AcknowledgeType.RELEASE)
        consumer.commit_sync(30)
    assert sorted(delivered[:20]) == list(range(20))
    cluster.kill9()
    consumer.close()
    cluster.start_node(1)
    # the group's membership was stored too: listed again before any member comes back
    listed = kmirror("share-groups", "--bootstrap-server", cluster.bootstrap, "--list").stdout.split()
    assert "keepers" in listed
    again = share_consumer(cluster.bootstrap, "keepers", "durable", **{"share.acknowledgement.mode": "explicit"})
    redelivered: list[tuple[int, int]] = []
    try:
        deadline = time.monotonic() + 60
        while len(redelivered) < 8 and time.monotonic() < deadline:
            for message in again.poll(0.5):
                if message.error() is None:
                    redelivered.append((message.offset(), message.delivery_count()))
                    again.acknowledge(message)
        again.commit_sync(30)
        assert not [m for m in again.poll(1.0) if m.error() is None]
    finally:
        again.close()
    assert sorted(redelivered) == [(offset, 2) for offset in range(12, 20)]
