"""`__transaction_state` records in Kafka's own formats (`TransactionLogKey`,
`TransactionLogValue`), so Kafka tooling can read what we write and we read what Kafka wrote.

Key: int16 version (0) then `TransactionalId` as an int16-length string.
Value: int16 version then the fields. We write v0 (non-flexible, what Kafka writes for
transaction version 1 clients) and read v0 and v1 (flexible; `PreviousProducerId`,
`NextProducerId` and `ClientTransactionVersion` are tagged fields there). A null value is a
tombstone: the transactional id expired (`transactional.id.expiration.ms`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kmirror.coordinator.transaction.state import TransactionState

KEY_VERSION = 0
VALUE_VERSION = 0


class TransactionLogFormatError(Exception):
    """A `__transaction_state` record this node cannot parse (corrupt or unknown version)."""


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState
    # topic -> sorted partitions; empty for Empty / Complete* states
    partitions: tuple[tuple[str, tuple[int, ...]], ...]
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


def key_bytes(transactional_id: str) -> bytes:
    raw = transactional_id.encode()
    return struct.pack(">hh", KEY_VERSION, len(raw)) + raw


def value_bytes(value: TransactionLogValue) -> bytes:
    out = [struct.pack(">hqhib", VALUE_VERSION, value.producer_id, value.producer_epoch,
                       value.transaction_timeout_ms, int(value.state))]
    out.append(struct.pack(">i", len(value.partitions)))
    for topic, partitions in value.partitions:
        raw = topic.encode()
        out.append(struct.pack(">h", len(raw)) + raw + struct.pack(">i", len(partitions)))
        out.append(struct.pack(f">{len(partitions)}i", *partitions))
    out.append(struct.pack(">qq", value.last_update_timestamp_ms, value.start_timestamp_ms))
    return b"".join(out)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, fmt: str) -> int:
        st = struct.Struct(fmt)
        if self.pos + st.size > len(self.data):
            raise TransactionLogFormatError("record ends early")
        (v,) = st.unpack_from(self.data, self.pos)
        self.pos += st.size
        return int(v)

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise TransactionLogFormatError("record ends early")
        v = self.data[self.pos:self.pos + n]
        self.pos += n
        return v

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            b = self.take(">B")
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 35:
                raise TransactionLogFormatError("varint too long")

    def string(self, flexible: bool) -> str:
        n = self.uvarint() - 1 if flexible else self.take(">h")
        if n < 0:
            raise TransactionLogFormatError("null string where a topic name is required")
        return self.raw(n).decode()

    def count(self, flexible: bool) -> int:
        return self.uvarint() - 1 if flexible else self.take(">i")

    def skip_tags(self) -> dict[int, bytes]:
        tags = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            tags[tag] = self.raw(self.uvarint())
        return tags


def parse_key(key: bytes) -> str:
    r = _Reader(key)
    version = r.take(">h")
    if version != KEY_VERSION:
        raise TransactionLogFormatError(f"unknown transaction log key version {version}")
    return r.string(False)


def parse_value(value: bytes) -> TransactionLogValue:
    r = _Reader(value)
    version = r.take(">h")
    if version not in (0, 1):
        raise TransactionLogFormatError(f"unknown transaction log value version {version}")
    flexible = version >= 1
    producer_id = r.take(">q")
    producer_epoch = r.take(">h")
    timeout_ms = r.take(">i")
    status = r.take(">b")
    try:
        state = TransactionState(status)
    except ValueError as exc:
        raise TransactionLogFormatError(f"unknown transaction status {status}") from exc
    partitions: list[tuple[str, tuple[int, ...]]] = []
    n = r.count(flexible)
    for _ in range(max(n, 0)):
        topic = r.string(flexible)
        ids = tuple(r.take(">i") for _ in range(max(r.count(flexible), 0)))
        if flexible:
            r.skip_tags()
        partitions.append((topic, ids))
    last_update = r.take(">q")
    start = r.take(">q")
    tags = r.skip_tags() if flexible else {}

    def tagged(tag: int, fmt: str, default: int) -> int:
        raw = tags.get(tag)
        return default if raw is None or len(raw) != struct.calcsize(fmt) else int(struct.unpack(fmt, raw)[0])

    return TransactionLogValue(
        producer_id, producer_epoch, timeout_ms, state, tuple(partitions), last_update, start,
        previous_producer_id=tagged(0, ">q", -1), next_producer_id=tagged(1, ">q", -1),
        client_transaction_version=tagged(2, ">h", 0))
