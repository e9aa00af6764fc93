"""Admin methods for transactions (Kafka Admin `listTransactions`, `describeTransactions`,
KIP-664). `TransactionAdmin` is mixed into `kmirror.client.admin.Admin`. ListTransactions goes
to every broker (each lists the transactional ids it coordinates) and the answers are merged;
DescribeTransactions goes to the id's coordinator (FindCoordinator with key type 1)."""

from __future__ import annotations

from dataclasses import dataclass

from kmirror.client.errors import check
from kmirror.client.groups import GroupAdmin
from kmirror.types import TopicPartition

LIST_TRANSACTIONS, DESCRIBE_TRANSACTIONS = 66, 65
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


class TransactionAdmin(GroupAdmin):

    async def list_transactions(self, states: list[str] | None = None, producer_ids: list[int] | None = None,
                                duration_filter_ms: int = -1) -> list[TransactionListing]:
        """Every transactional id of every broker, sorted by id."""
        await self.cluster.refresh([])
        out: dict[str, TransactionListing] = {}
        for broker_id in sorted(self.cluster.metadata.brokers):
            conn = await self.cluster.connection(broker_id)
            response = await conn.send(conn.build_request(
                LIST_TRANSACTIONS, state_filters=tuple(states or ()), producer_id_filters=tuple(producer_ids or ()),
                duration_filter=duration_filter_ms))
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
