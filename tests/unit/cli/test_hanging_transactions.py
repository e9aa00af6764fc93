"""Which open transactions `kmirror transactions --find-hanging` reports (Kafka's
FindHangingTransactionsCommand): idle past the largest timeout, and unknown to the coordinator."""

from kmirror.cli.transactions import OpenTransaction, hanging, open_transactions
from kmirror.client.transactions import ProducerStateDescription, TransactionDescription
from kmirror.types import TopicPartition

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
NOW = 1_700_000_000_000


def producer(pid: int, start: int, last_timestamp: int = NOW - 60_000) -> ProducerStateDescription:
    return ProducerStateDescription(pid, 0, 3, last_timestamp, -1, start)


def description(*partitions: TopicPartition) -> TransactionDescription:
    return TransactionDescription("id", "Ongoing", 7, 0, 60_000, NOW - 60_000, partitions)


def test_only_open_transactions_idle_past_the_timeout_are_candidates() -> None:
    producers = {T0: [producer(1, 10), producer(2, -1), producer(3, 12, last_timestamp=NOW - 1000)]}
    assert [c.producer.producer_id for c in open_transactions(producers, NOW, 30_000)] == [1]
    assert [c.producer.producer_id for c in open_transactions(producers, NOW, 0)] == [1, 3]


def test_a_transaction_the_coordinator_does_not_know_on_that_partition_is_hanging() -> None:
    unknown_pid = OpenTransaction(T0, producer(5, 10))
    id_not_found = OpenTransaction(T0, producer(6, 11))
    other_partition = OpenTransaction(T1, producer(7, 12))
    live = OpenTransaction(T0, producer(7, 13))
    found = hanging([unknown_pid, id_not_found, other_partition, live], {6: "gone", 7: "id"},
                    {"gone": None, "id": description(T0)})
    assert found == [unknown_pid, id_not_found, other_partition]
