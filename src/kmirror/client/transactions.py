"""Admin methods for transactions (Kafka Admin `listTransactions`, `describeTransactions`,
`describeProducers`, KIP-664). `TransactionAdmin` is mixed into `kmirror.client.admin.Admin`.
ListTransactions goes to every broker (each lists the transactional ids it coordinates) and the
answers are merged; DescribeTransactions goes to the id's coordinator (FindCoordinator with key
type 1); DescribeProducers to the partition's leader (or a given replica); abortTransaction's
WriteTxnMarkers to the partition's leader."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kmirror.client.errors import KafkaProtocolError, check
from kmirror.client.groups import GroupAdmin
from kmirror.protocol.entities import build, nested
from kmirror.types import TopicPartition

LIST_TRANSACTIONS, DESCRIBE_TRANSACTIONS, DESCRIBE_PRODUCERS, WRITE_TXN_MARKERS = 66, 65, 61, 27
PATTERN_VERSION = 2  # ListTransactions' TransactionalIdPattern (KIP-1152)
TRANSACTION_KEY_TYPE = 1


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    coordinator_id: int
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int  # -1 when no transaction is open
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class ProducerStateDescription:
    """One producer a partition keeps state for (Kafka Admin `ProducerState`)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int  # of its last transaction marker, -1: none
    current_transaction_start_offset: int  # -1: no open transaction


class TransactionAdmin(GroupAdmin):

    async def list_transactions(self, states: list[str] | None = None, producer_ids: list[int] | None = None,
                                duration_filter_ms: int = -1, transactional_id_pattern: str | None = None,
                                ) -> list[TransactionListing]:
        """Every transactional id of every broker, sorted by id. A pattern needs
        ListTransactions v2 (Kafka 4.1) of every broker; an older one is refused, not asked
        without it."""
        await self.cluster.refresh([])
        out: dict[str, TransactionListing] = {}
        for broker_id in sorted(self.cluster.metadata.brokers):
            conn = await self.cluster.connection(broker_id)
            if transactional_id_pattern and conn.version(LIST_TRANSACTIONS) < PATTERN_VERSION:
                raise KafkaProtocolError(f"broker {broker_id} does not support filtering transactions by "
                                         f"transactional id pattern (ListTransactions v{PATTERN_VERSION})")
            response = await conn.send(conn.build_request(
                LIST_TRANSACTIONS, state_filters=tuple(states or ()), producer_id_filters=tuple(producer_ids or ()),
                duration_filter=duration_filter_ms, transactional_id_pattern=transactional_id_pattern or None))
            check(response.error_code, None, f"ListTransactions on broker {broker_id}")
            for t in response.transaction_states:
                out[t.transactional_id] = TransactionListing(t.transactional_id, broker_id, int(t.producer_id),
                                                             t.transaction_state)
        return [out[k] for k in sorted(out)]

    async def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        conn = await self.find_coordinator(transactional_id, TRANSACTION_KEY_TYPE)
        response = await conn.send(conn.build_request(DESCRIBE_TRANSACTIONS, transactional_ids=(transactional_id,)))
        (state,) = response.transaction_states
        check(state.error_code, None, f"DescribeTransactions {transactional_id}")
        start_ms = int(state.transaction_start_time_ms)  # kmirror.protocol.describe_transactions
        return TransactionDescription(
            transactional_id, state.transaction_state, int(state.producer_id),
            int(state.producer_epoch), int(state.transaction_timeout.total_seconds() * 1000), start_ms,
            tuple(TopicPartition(t.topic, int(p)) for t in state.topics for p in t.partitions))

    async def describe_producers(self, tp: TopicPartition, broker_id: int | None = None
                                 ) -> list[ProducerStateDescription]:
        """The producers `tp`'s leader (or replica `broker_id`) keeps state for, by producer id."""
        return (await self.describe_producers_of([tp], broker_id))[tp]

    async def describe_producers_of(self, tps: Iterable[TopicPartition], broker_id: int | None = None
                                    ) -> dict[TopicPartition, list[ProducerStateDescription]]:
        """`describe_producers` of many partitions: one request per leader (or to `broker_id`)."""
        by_node = (await self.cluster.by_leader(tps) if broker_id is None
                   else [(await self.cluster.connection(broker_id), list(tps))])
        out: dict[TopicPartition, list[ProducerStateDescription]] = {}
        for conn, group in by_node:
            rt = conn.request_type(DESCRIBE_PRODUCERS)
            by_topic: dict[str, list[int]] = {}
            for tp in group:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            response = await conn.send(build(rt, topics=tuple(
                build(nested(rt, "TopicRequest"), name=topic, partition_indexes=tuple(parts))
                for topic, parts in by_topic.items())))
            for topic in response.topics:
                for partition in topic.partitions:
                    tp = TopicPartition(topic.name, int(partition.partition_index))
                    check(partition.error_code, partition.error_message, f"DescribeProducers {tp}")
                    out[tp] = sorted((ProducerStateDescription(
                        int(p.producer_id), int(p.producer_epoch), int(p.last_sequence), int(p.last_timestamp),
                        int(p.coordinator_epoch), int(p.current_txn_start_offset)) for p in partition.active_producers),
                        key=lambda p: p.producer_id)
        return out

    async def abort_transaction(self, tp: TopicPartition, producer_id: int, producer_epoch: int,
                                coordinator_epoch: int) -> None:
        """Kafka Admin `abortTransaction`: an ABORT marker for the producer's open transaction
        on `tp`, written by its leader (WriteTxnMarkers, as a transaction coordinator would)."""
        conn = await self.cluster.leader_connection(tp)
        rt = conn.request_type(WRITE_TXN_MARKERS)
        marker = build(nested(rt, "WritableTxnMarker"), producer_id=producer_id, producer_epoch=producer_epoch,
                       transaction_result=False, coordinator_epoch=coordinator_epoch, topics=(
                           build(nested(rt, "WritableTxnMarkerTopic"), name=tp.topic,
                                 partition_indexes=(tp.partition,)),))
        response = await conn.send(build(rt, markers=(marker,)))
        for result in response.markers:
            for topic in result.topics:
                for partition in topic.partitions:
                    check(partition.error_code, None, f"WriteTxnMarkers {tp}")
