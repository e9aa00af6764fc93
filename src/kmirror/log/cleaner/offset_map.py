"""The cleaner's key -> latest offset map (Kafka `SkimpyOffsetMap`).

Kafka stores a 16-byte MD5 of each key in a fixed `log.cleaner.dedupe.buffer.size` array
(24 bytes a slot, filled to `log.cleaner.io.buffer.load.factor`); a hash collision could
make it drop a live record. This map keys on the exact key bytes (no collision can lose a
record) and charges each entry its key length plus a fixed per-entry overhead against the
same budget, so the buffer size still bounds the memory one cleaning round may use. When
the budget is spent the round stops at that batch, as Kafka's does.
"""

from __future__ import annotations

# A dict slot, the key's bytes object header and the offset int, measured on CPython 3.11.
ENTRY_OVERHEAD_BYTES = 120


class OffsetMap:
    def __init__(self, memory_bytes: int, load_factor: float = 0.9) -> None:
        self.capacity_bytes = int(memory_bytes * load_factor)
        self.offsets: dict[bytes, int] = {}
        self.used_bytes = 0
        self.latest_offset = -1

    def __len__(self) -> int:
        return len(self.offsets)

    def put_all(self, base_offset: int, records: list[tuple[int, bytes | None]], start_offset: int) -> bool:
        """Put one batch's keys, given as (offset delta, key), those at `start_offset` or
        above; a later record of a key wins. All or nothing: False, and nothing put, when the
        batch's new keys do not fit the budget."""
        offsets = self.offsets
        fresh = {key for delta, key in records
                 if key is not None and key not in offsets and base_offset + delta >= start_offset}
        if fresh:
            need = sum(map(len, fresh)) + len(fresh) * ENTRY_OVERHEAD_BYTES
            if self.used_bytes + need > self.capacity_bytes:
                return False
            self.used_bytes += need
        offsets.update((key, base_offset + delta) for delta, key in records
                       if key is not None and base_offset + delta >= start_offset)
        return True

    def get(self, key: bytes) -> int:
        """The latest offset of `key`, -1 when absent (Kafka's contract)."""
        return self.offsets.get(key, -1)

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = offset

    @property
    def utilization(self) -> float:
        return self.used_bytes / self.capacity_bytes if self.capacity_bytes else 1.0

    def clear(self) -> None:
        self.offsets.clear()
        self.used_bytes = 0
        self.latest_offset = -1
