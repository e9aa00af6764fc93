"""`kmirror consumer-groups` (kafka-consumer-groups.sh) as a real process against a real node, with
confluent-kafka consumers in a classic group and in a KIP-848 (`group.protocol=consumer`) group:
offsets, lag and members; resets refused while the group is active, then to the earliest, by a
shift, to an offset and as a dry run; offsets deleted; the group deleted; `--list --state`."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from kmirror.testing.kafka_clients import create_topic, produce_acked
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror

pytestmark = pytest.mark.integration

RECORDS_PER_PARTITION = 10


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    # a 1 s heartbeat interval makes a KIP-848 member's assignment quick (Kafka's default is 5 s)
    with LocalCluster(dir=tmp_path_factory.mktemp("cgroups") / "cluster", port=free_port_block(),
                      overrides={"group.consumer.heartbeat.interval.ms": "1000"}) as c:
        yield c


def groups_cli(node: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    proc = kmirror("consumer-groups", "--bootstrap-server", node.bootstrap, *args, check=False)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def table(stdout: str) -> list[dict[str, str]]:
    """The rows of the table kafka-consumer-groups.sh prints, keyed by the header's columns
    (one-word cells, as the ones these tests read)."""
    lines = [line.split() for line in stdout.splitlines() if line.strip()]
    header, rows = lines[0], lines[1:]
    assert all(len(r) == len(header) for r in rows), stdout
    return [dict(zip(header, r, strict=True)) for r in rows]


def offsets(node: LocalCluster, group: str) -> dict[int, tuple[str, str, str, str]]:
    """partition -> (CURRENT-OFFSET, LOG-END-OFFSET, LAG, CONSUMER-ID) from `--describe`."""
    proc = groups_cli(node, "--describe", "--group", group)
    assert proc.returncode == 0, proc.stderr
    return {int(r["PARTITION"]): (r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"], r["CONSUMER-ID"])
            for r in table(proc.stdout)}


def wait_until(what: str, condition: Callable[[], bool], consumer: Consumer | None = None,
               timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        if consumer is not None:
            consumer.poll(0.2)
        else:
            time.sleep(0.2)


def consume_and_commit(node: LocalCluster, group: str, topic: str, upto: dict[int, int],
                       protocol: str = "classic") -> Consumer:
    """A consumer of `group` subscribed to `topic` reads each partition p up to offset
    `upto[p]` and commits those offsets; it stays in the group (the caller closes it)."""
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group, "group.protocol": protocol,
                         "client.id": f"{group}-client", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    read = dict.fromkeys(upto, 0)
    deadline = time.monotonic() + 60
    while any(read[p] < n for p, n in upto.items()):
        assert time.monotonic() < deadline, f"read only {read}"
        msg = consumer.poll(0.5)
        if msg is None or msg.error() is not None:
            continue
        p = msg.partition() or 0
        if p in upto:  # the group may be assigned partitions the caller does not read
            read[p] = max(read[p], min((msg.offset() or 0) + 1, upto[p]))
    consumer.commit(offsets=[TopicPartition(topic, p, n) for p, n in upto.items()], asynchronous=False)
    return consumer


def new_topic(node: LocalCluster, name: str) -> None:
    create_topic(node.bootstrap, name, partitions=2)
    produce_acked(node.bootstrap, name, 2 * RECORDS_PER_PARTITION, partitions=2)


def test_describe_shows_offsets_lag_and_members_and_an_active_group_is_not_reset_or_deleted(node: LocalCluster):
    new_topic(node, "cg-orders")
    consumer = consume_and_commit(node, "cg-app", "cg-orders", {0: 4, 1: 7})
    try:
        described = offsets(node, "cg-app")
        assert {p: v[:3] for p, v in described.items()} == {0: ("4", "10", "6"), 1: ("7", "10", "3")}
        member_id = described[0][3]
        assert member_id != "-" and described[1][3] == member_id

        members = groups_cli(node, "--describe", "--group", "cg-app", "--members")
        assert members.returncode == 0, members.stderr
        (row,) = table(members.stdout)
        assert (row["CONSUMER-ID"], row["CLIENT-ID"], row["#PARTITIONS"]) == (member_id, "cg-app-client", "2")
        state = groups_cli(node, "--describe", "--group", "cg-app", "--state")
        (row,) = table(state.stdout.replace("COORDINATOR (ID)", "COORDINATOR").replace("  (1)", ""))
        assert (row["STATE"], row["#MEMBERS"], row["ASSIGNMENT-STRATEGY"]) == ("Stable", "1", "range")

        refused = groups_cli(node, "--reset-offsets", "--group", "cg-app", "--all-topics", "--to-earliest",
                             "--execute")
        assert refused.returncode == 1
        assert refused.stderr.strip() == ("Error: Assignments can only be reset if the group 'cg-app' is inactive, "
                                          "but the current state is Stable.")
        not_deleted = groups_cli(node, "--delete", "--group", "cg-app")
        assert not_deleted.returncode == 1
        assert "* Group 'cg-app' could not be deleted due to: NON_EMPTY_GROUP: The group is not empty." \
            in not_deleted.stderr
        subscribed = groups_cli(node, "--delete-offsets", "--group", "cg-app", "--topic", "cg-orders")
        assert subscribed.returncode == 1
        assert "Error: Encountered some partition-level error, see the follow-up details." in subscribed.stderr
        assert subscribed.stdout.splitlines()[1:] == [
            "TOPIC           PARTITION  STATUS",
            *(f"cg-orders       {p}          Error: GROUP_SUBSCRIBED_TO_TOPIC: The consumer group is actively "
              "subscribed to the topic" for p in (0, 1)),
        ]
        assert {p: v[0] for p, v in offsets(node, "cg-app").items()} == {0: "4", 1: "7"}  # nothing changed
    finally:
        consumer.close()

    empty = groups_cli(node, "--describe", "--group", "cg-app")
    assert empty.returncode == 0
    assert "Consumer group 'cg-app' has no active members." in empty.stderr
    assert {p: v for p, v in offsets(node, "cg-app").items()} == {0: ("4", "10", "6", "-"), 1: ("7", "10", "3", "-")}


def test_an_inactive_groups_offsets_are_reset_and_deleted_and_then_the_group(node: LocalCluster):
    new_topic(node, "cg-ledger")
    consume_and_commit(node, "cg-dr", "cg-ledger", {0: 6, 1: 8}).close()

    earliest = groups_cli(node, "--reset-offsets", "--group", "cg-dr", "--all-topics", "--to-earliest", "--execute")
    assert earliest.returncode == 0, earliest.stderr
    assert earliest.stdout.splitlines()[1:] == [
        "GROUP           TOPIC           PARTITION  NEW-OFFSET",
        "cg-dr           cg-ledger       0          0",
        "cg-dr           cg-ledger       1          0",
    ]
    assert {p: v[:3] for p, v in offsets(node, "cg-dr").items()} == {0: ("0", "10", "10"), 1: ("0", "10", "10")}

    shifted = groups_cli(node, "--reset-offsets", "--group", "cg-dr", "--topic", "cg-ledger", "--shift-by", "3",
                         "--execute")
    assert shifted.returncode == 0, shifted.stderr
    assert {p: v[0] for p, v in offsets(node, "cg-dr").items()} == {0: "3", 1: "3"}
    to_offset = groups_cli(node, "--reset-offsets", "--group", "cg-dr", "--topic", "cg-ledger:1", "--to-offset", "5",
                           "--execute")
    assert to_offset.returncode == 0, to_offset.stderr
    assert [r["NEW-OFFSET"] for r in table(to_offset.stdout)] == ["5"]
    assert {p: v[:3] for p, v in offsets(node, "cg-dr").items()} == {0: ("3", "10", "7"), 1: ("5", "10", "5")}

    dry_run = groups_cli(node, "--reset-offsets", "--group", "cg-dr", "--all-topics", "--to-latest", "--dry-run")
    assert dry_run.returncode == 0, dry_run.stderr
    assert [(r["PARTITION"], r["NEW-OFFSET"]) for r in table(dry_run.stdout)] == [("0", "10"), ("1", "10")]
    no_mode = groups_cli(node, "--reset-offsets", "--group", "cg-dr", "--all-topics", "--to-offset", "99")
    assert no_mode.returncode == 0 and "WARN: No action will be performed" in no_mode.stderr
    assert "New offset (99) is higher than latest offset for topic partition cg-ledger-0" in no_mode.stderr
    assert {p: v[0] for p, v in offsets(node, "cg-dr").items()} == {0: "3", 1: "5"}  # neither changed anything

    deleted_offsets = groups_cli(node, "--delete-offsets", "--group", "cg-dr", "--topic", "cg-ledger:0")
    assert deleted_offsets.returncode == 0, deleted_offsets.stderr
    assert deleted_offsets.stdout.splitlines()[0] == "Request succeeded for deleting offsets from group cg-dr."
    assert table("\n".join(deleted_offsets.stdout.splitlines()[1:])) == [
        {"TOPIC": "cg-ledger", "PARTITION": "0", "STATUS": "Successful"}]
    assert list(offsets(node, "cg-dr")) == [1]

    deleted = groups_cli(node, "--delete", "--group", "cg-dr")
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.strip() == "Deletion of requested consumer groups ('cg-dr') was successful."
    missing = groups_cli(node, "--describe", "--group", "cg-dr")
    assert missing.returncode == 1
    assert missing.stderr.strip() == "Error: Consumer group 'cg-dr' does not exist."
    assert "cg-dr" not in groups_cli(node, "--list").stdout.split()


def test_a_kip848_group_is_described_with_its_members_and_listed_with_its_state(node: LocalCluster):
    new_topic(node, "cg-events")
    consumer = consume_and_commit(node, "cg-848", "cg-events", {0: 2, 1: 5}, protocol="consumer")
    try:
        def stable_with_both_partitions() -> bool:
            proc = groups_cli(node, "--describe", "--group", "cg-848", "--members", "--verbose")
            rows = table(proc.stdout) if proc.returncode == 0 and proc.stdout.strip() else []
            return len(rows) == 1 and rows[0]["CURRENT-ASSIGNMENT"] == "cg-events:0,1"

        wait_until("the member's assignment", stable_with_both_partitions, consumer)
        members = groups_cli(node, "--describe", "--group", "cg-848", "--members", "--verbose")
        (row,) = table(members.stdout)
        assert (row["CLIENT-ID"], row["#PARTITIONS"], row["TARGET-ASSIGNMENT"]) == ("cg-848-client", "2",
                                                                                    "cg-events:0,1")
        assert int(row["CURRENT-EPOCH"]) >= 1 and int(row["TARGET-EPOCH"]) >= 1
        described = offsets(node, "cg-848")
        assert {p: v[:3] for p, v in described.items()} == {0: ("2", "10", "8"), 1: ("5", "10", "5")}
        assert described[0][3] == row["CONSUMER-ID"]
        state = groups_cli(node, "--describe", "--group", "cg-848", "--state", "--verbose")
        (srow,) = table(state.stdout.replace("COORDINATOR (ID)", "COORDINATOR").replace("  (1)", ""))
        assert (srow["ASSIGNMENT-STRATEGY"], srow["STATE"], srow["#MEMBERS"]) == ("uniform", "Stable", "1")

        classic = consume_and_commit(node, "cg-classic-empty", "cg-events", {0: 1})
        classic.close()
        listed = groups_cli(node, "--list", "--state")
        assert listed.returncode == 0, listed.stderr
        states = {r["GROUP"]: r["STATE"] for r in table(listed.stdout)}
        assert states["cg-848"] == "Stable" and states["cg-classic-empty"] == "Empty"
        typed = groups_cli(node, "--list", "--type", "consumer")
        assert [r["GROUP"] for r in table(typed.stdout)] == ["cg-848"]
        only_empty = groups_cli(node, "--list", "--state", "empty")
        assert "cg-848" not in only_empty.stdout and "cg-classic-empty" in only_empty.stdout
        assert groups_cli(node, "--list").stdout.split().count("cg-848") == 1
    finally:
        consumer.close()
