"""`__transaction_state` record codecs (Kafka's formats) and the transition table."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kmirror.coordinator.transaction import records
from kmirror.coordinator.transaction.state import (
    VALID_FROM,
    IllegalTransactionStateTransition,
    TransactionState,
    generated_doc_block,
    transition,
)

S = TransactionState

values = st.builds(
    records.TransactionLogValue,
    producer_id=st.integers(0, 2**63 - 1),
    producer_epoch=st.integers(-1, 32767),
    transaction_timeout_ms=st.integers(1, 2**31 - 1),
    state=st.sampled_from([s for s in S if s is not S.PREPARE_EPOCH_FENCE]),
    partitions=st.lists(st.tuples(st.text(min_size=1, max_size=20),
                                  st.lists(st.integers(0, 1000), max_size=5).map(tuple)), max_size=4).map(tuple),
    last_update_timestamp_ms=st.integers(-1, 2**62),
    start_timestamp_ms=st.integers(-1, 2**62),
)


@given(values)
def test_value_round_trip(value: records.TransactionLogValue) -> None:
    assert records.parse_value(records.value_bytes(value)) == value


@given(st.text(min_size=1, max_size=100))
def test_key_round_trip(txn_id: str) -> None:
    assert records.parse_key(records.key_bytes(txn_id)) == txn_id


def test_value_v0_layout_is_kafkas() -> None:
    value = records.TransactionLogValue(5, 2, 60000, S.ONGOING, (("t", (0, 3)),), 111, 100)
    expected = (struct.pack(">hqhib", 0, 5, 2, 60000, 1) + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t"
                + struct.pack(">iii", 2, 0, 3) + struct.pack(">qq", 111, 100))
    assert records.value_bytes(value) == expected


def test_reads_flexible_v1_with_tagged_fields() -> None:
    def uv(n: int) -> bytes:
        return bytes([n])

    body = (struct.pack(">hqhib", 1, 9, 0, 1000, 4) + uv(2) + uv(2) + b"t" + uv(2) + struct.pack(">i", 7)
            + uv(0) + struct.pack(">qq", 5, 4) + uv(2) + uv(0) + uv(8) + struct.pack(">q", 3)
            + uv(2) + uv(2) + struct.pack(">h", 2))
    value = records.parse_value(body)
    assert (value.state, value.partitions, value.previous_producer_id, value.client_transaction_version) == (
        S.COMPLETE_COMMIT, (("t", (7,)),), 3, 2)


def test_unknown_versions_are_refused() -> None:
    with pytest.raises(records.TransactionLogFormatError):
        records.parse_value(struct.pack(">h", 9))
    with pytest.raises(records.TransactionLogFormatError):
        records.parse_value(struct.pack(">hq", 0, 1))  # cut short


def test_table_is_kafkas_valid_previous_states() -> None:
    assert VALID_FROM[S.PREPARE_COMMIT] == {S.ONGOING}
    assert VALID_FROM[S.COMPLETE_ABORT] == {S.PREPARE_ABORT}
    assert transition(S.ONGOING, S.PREPARE_ABORT) is S.PREPARE_ABORT
    with pytest.raises(IllegalTransactionStateTransition):
        transition(S.EMPTY, S.PREPARE_COMMIT)
    assert S.PREPARE_COMMIT.state_name == "PrepareCommit"
    assert S.from_name("CompleteAbort") is S.COMPLETE_ABORT


def test_design_doc_carries_the_generated_state_table() -> None:
    doc = (Path(__file__).parents[4] / "docs" / "design" / "transactions.md").read_text()
    assert generated_doc_block() in doc, "regenerate docs/design/transactions.md from VALID_FROM"
