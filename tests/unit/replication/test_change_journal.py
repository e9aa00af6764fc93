"""The change journal fetch sessions read to check only the partitions that moved."""

from kmirror.replication.change_journal import ChangeJournal
from kmirror.types import TopicPartition

A, B, C = (TopicPartition("t", p) for p in range(3))


def test_a_reader_gets_what_was_recorded_after_its_position() -> None:
    journal = ChangeJournal()
    assert journal.since(-1) is None  # never checked: unknown
    start = journal.take_position()
    journal.record(A)
    journal.record(A)  # an append and its high watermark move, with no reader between: once
    journal.record(B)
    assert journal.since(start) == [A, B]
    middle = journal.take_position()
    journal.record(B)  # a reader took a position after the first B: this one is news to it
    journal.record(C)
    assert journal.since(middle) == [B, C]
    assert journal.since(start) == [A, B, B, C]
    assert journal.since(journal.take_position()) == []


def test_positions_older_than_what_is_kept_or_than_a_reset_are_unknown() -> None:
    journal = ChangeJournal(limit=4)
    start = journal.take_position()
    for tp in (A, B, C, A, B):  # past the limit: the older half is dropped
        journal.record(tp)
    assert journal.since(start) is None
    kept = journal.take_position()
    journal.record(C)
    assert journal.since(kept) == [C]
    journal.reset()
    assert journal.since(kept) is None
    after = journal.take_position()
    journal.record(A)
    assert journal.since(after) == [A]
