"""Which batches a consumer delivers: control batches never, aborted transactions not under read_committed."""

from __future__ import annotations

from kmirror.client.raw_fetch import AbortedTransaction
from kmirror.client.read_committed import delivered_batches, next_fetch_offset
from kmirror.records.builder import build_batch
from kmirror.records.control import ControlType, build_control_batch


def log() -> tuple[bytes, dict[str, int]]:
    parts: list[bytes] = []
    offsets: dict[str, int] = {}
    offset = 0

    def add(name: str, batch: bytes, count: int = 1) -> None:
        nonlocal offset
        parts.append(build_batch([(b"k", name.encode(), (), 1)] * count, base_offset=offset) if not batch else batch)
        offsets[name] = offset
        offset += count

    def txn(name: str, pid: int) -> bytes:
        return build_batch([(b"k", name.encode(), (), 1)], base_offset=offset, producer_id=pid, producer_epoch=0,
                           base_sequence=0, is_transactional=True)

    def marker(kind: ControlType, pid: int) -> bytes:
        raw = bytearray(build_control_batch(kind, pid, 0, 1))
        raw[0:8] = offset.to_bytes(8, "big")
        return bytes(raw)

    add("plain1", b"")
    add("committed", txn("committed", 1))
    add("aborted", txn("aborted", 2))
    add("plain2", b"")
    add("commit-marker", marker(ControlType.COMMIT, 1))
    add("abort-marker", marker(ControlType.ABORT, 2))
    add("aborted-later", txn("aborted-later", 2))  # pid 2's next transaction, also aborted
    add("abort-marker-2", marker(ControlType.ABORT, 2))
    add("committed-later", txn("committed-later", 2))
    return b"".join(parts), offsets


def test_read_committed_drops_aborted_transactions_and_markers() -> None:
    buf, at = log()
    aborted = [AbortedTransaction(2, at["aborted"]), AbortedTransaction(2, at["aborted-later"])]
    committed = [h.base_offset for _, h in delivered_batches(buf, 0, read_committed=True, aborted_transactions=aborted)]
    assert committed == [at["plain1"], at["committed"], at["plain2"], at["committed-later"]]
    uncommitted = [h.base_offset for _, h in delivered_batches(buf, 0, aborted_transactions=aborted)]
    assert uncommitted == [at["plain1"], at["committed"], at["aborted"], at["plain2"], at["aborted-later"],
                           at["committed-later"]]


def test_batches_before_the_fetch_offset_and_a_partial_tail_are_skipped() -> None:
    buf, at = log()
    assert [h.base_offset for _, h in delivered_batches(buf, at["plain2"])][0] == at["plain2"]
    assert next_fetch_offset(buf, 0) == at["committed-later"] + 1
    assert next_fetch_offset(buf[:-5], 0) == at["committed-later"]  # the last batch was cut
    assert next_fetch_offset(b"", 42) == 42
