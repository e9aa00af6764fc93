"""What the key-map pass learnt of each record, kept for the filter pass.

Kafka's cleaner reads the dirty section twice: once to build the key map, once to filter;
the second read walks every record and hashes every key again. The key-map pass here notes,
for each data batch it maps (every record at or above the first dirty offset), the batch's
base offset, size and CRC and, per record, where it ends (from the start of its records
section, decompressed when the batch is compressed), its offset delta and a code: its key
map entry times two plus one for a tombstone, or NO_KEY. The filter pass then takes such a
batch's records from the memo instead of walking them, and decides each with one read of
`OffsetMap.offsets` (`record_filter.filter_chunk` for chunks of plain batches,
`record_filter.decide_noted` for the others, before decompressing: a compressed batch that
keeps all or none of its records is copied or dropped without being decompressed again).
A batch whose base offset, size, CRC or record count differ from the noted ones (the log
changed between the passes) is walked as before.

The memo is bounded: `limit_bytes` (a quarter of the key map's budget, i.e. of
`log.cleaner.dedupe.buffer.size` times the load factor) at 12 bytes a record and 32 a
batch; past it the remaining batches are simply not noted. Arrays grow as batches arrive,
so a small dirty section costs little.
"""

from __future__ import annotations

import numpy as np

# A record's code when it is not an entry's
NO_KEY = -1  # a keyless record (invalid in a compacted log)
NOT_MAPPED = -2  # below the first dirty offset (never in a noted batch)
# Rows of `batches` (int64) and `records` (int32)
M_BASE_OFFSET, M_FIRST, M_SIZE, M_CRC = range(4)
M_END, M_DELTA, M_CODE = range(3)
# `used`: batches and records noted; `cursor`: the filter's next batch
BATCHES_USED, RECORDS_USED = range(2)
BYTES_PER_RECORD = 12
BYTES_PER_BATCH = 32


class RecordMemo:
    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self.batches = np.empty((4, 0), dtype=np.int64)
        self.records = np.empty((3, 0), dtype=np.int32)
        self.used = np.zeros(2, dtype=np.int64)
        self.cursor = np.zeros(1, dtype=np.int64)

    def clear(self) -> None:
        self.used[:] = 0
        self.cursor[0] = 0

    def reserve(self, batches: int, records: int) -> None:
        """Room for `batches` more batches of `records` records in all, as far as the limit
        allows (the compiled side notes a batch only when it fits)."""
        want_b = int(self.used[BATCHES_USED]) + batches
        want_r = int(self.used[RECORDS_USED]) + records
        if want_b > self.batches.shape[1] or want_r > self.records.shape[1]:
            new_b = max(want_b, 2 * self.batches.shape[1])
            new_r = max(want_r, 2 * self.records.shape[1])
            if new_b * BYTES_PER_BATCH + new_r * BYTES_PER_RECORD > self.limit_bytes:
                new_b, new_r = want_b, want_r
                if new_b * BYTES_PER_BATCH + new_r * BYTES_PER_RECORD > self.limit_bytes:
                    return
            grown_b = np.empty((4, new_b), dtype=np.int64)
            grown_r = np.empty((3, new_r), dtype=np.int32)
            used_b, used_r = int(self.used[BATCHES_USED]), int(self.used[RECORDS_USED])
            grown_b[:, :used_b] = self.batches[:, :used_b]
            grown_r[:, :used_r] = self.records[:, :used_r]
            self.batches, self.records = grown_b, grown_r

    @property
    def size_bytes(self) -> int:
        return self.batches.shape[1] * BYTES_PER_BATCH + self.records.shape[1] * BYTES_PER_RECORD

