"""The cleaner's key -> latest offset map (Kafka `SkimpyOffsetMap`), compiled (numba).

Kafka stores a 16-byte MD5 of each key in a fixed `log.cleaner.dedupe.buffer.size` array
(24 bytes a slot, filled to `log.cleaner.io.buffer.load.factor`); a hash collision could
make it drop a live record. This map keys on the exact key bytes (no collision can lose a
record): an open-addressing table (linear probing, at most half full) of (64-bit hash, key
position, key length, entry) slots, the keys' bytes copied back to back into an arena, and
each key's latest offset in `offsets[entry]`. Entries are numbered in insertion order and
never move (a rehash moves slots, not entries), so the key-map pass can note each record's
entry for the filter pass (`record_memo`), which then neither hashes nor probes again.
Each entry is charged its key length plus a fixed per-entry overhead against the budget,
so the buffer size still bounds the memory one cleaning round may use. When the budget is
spent the round stops before that batch, as Kafka's does.

A batch is put whole or not at all: its insertions are logged and undone in reverse order
when its new keys overrun the budget (undoing linear-probing insertions last-first restores
the table exactly). Records are given as located by `kmirror.records.record_scan`.
"""

from __future__ import annotations

import numpy as np
from numba import njit  # type: ignore[import-untyped]

from kmirror.log.cleaner.record_memo import (
    BATCHES_USED,
    M_BASE_OFFSET,
    M_CODE,
    M_CRC,
    M_DELTA,
    M_END,
    M_FIRST,
    M_SIZE,
    NO_KEY,
    NOT_MAPPED,
    RECORDS_USED,
)
from kmirror.records.record_scan import (
    B_BASE_OFFSET,
    B_COUNT,
    B_LAST_OFFSET_DELTA,
    B_POS,
    B_SIZE,
    BATCH_OVERHEAD,
    KEY_LEN,
    KEY_START,
    OFFSET_DELTA,
    RECORD_END,
    VALUE_LEN,
    copy_bytes,
    read_be,
    scan_section,
)

# One slot is four int64 (32 bytes) and the table stays at most half full.
ENTRY_OVERHEAD_BYTES = 64
HASH, KPOS, KLEN, ENTRY = range(4)
N, ARENA_USED, USED_BYTES, CAPACITY_BYTES = range(4)
_EMPTY = -1
_MIN_SLOTS = 1024


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def key_hash(buf: np.ndarray, pos: int, length: int) -> np.uint64:
    """FNV-1a over the key's bytes, finished with MurmurHash3's fmix64 (the table uses the
    low bits)."""
    h = np.uint64(0xCBF29CE484222325)
    for i in range(pos, pos + length):
        h = (h ^ np.uint64(buf[i])) * np.uint64(0x100000001B3)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xC4CEB9FE1A85EC53)
    h ^= h >> np.uint64(33)
    return h


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def find_slot(slots: np.ndarray, arena: np.ndarray, buf: np.ndarray, pos: int, length: int,
              h: np.uint64) -> int:
    """The slot holding the key buf[pos:pos+length], or the empty slot where it would go."""
    mask = slots.shape[0] - 1
    i = np.int64(h & np.uint64(mask))
    hv = np.int64(h)
    while True:
        kpos = slots[i, KPOS]
        if kpos == _EMPTY:
            return i  # type: ignore[return-value]
        if slots[i, HASH] == hv and slots[i, KLEN] == length:
            diff = 0  # every byte compared: an exit at the first difference made the map pass ~1.3x slower
            for j in range(length):
                diff |= arena[kpos + j] ^ buf[pos + j]
            if diff == 0:
                return i  # type: ignore[return-value]
        i = (i + 1) & mask


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def lookup(slots: np.ndarray, arena: np.ndarray, offsets: np.ndarray, buf: np.ndarray, pos: int,
           length: int) -> int:
    """The latest offset of the key buf[pos:pos+length], -1 when absent."""
    i = find_slot(slots, arena, buf, pos, length, key_hash(buf, pos, length))
    return -1 if slots[i, KPOS] == _EMPTY else offsets[slots[i, ENTRY]]


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def put_records(slots: np.ndarray, arena: np.ndarray, offsets: np.ndarray, meta: np.ndarray, undo: np.ndarray,
                buf: np.ndarray, fields: np.ndarray, first: int, count: int, base_offset: int, start_offset: int,
                codes: np.ndarray, code_at: int, hashes: np.ndarray, hashed: bool) -> bool:
    """Put the keys of records fields[:, first:first+count] of one batch (those at
    `start_offset` or above; a later record of a key wins). False, and the table as before,
    when the batch's new keys overrun the budget. The table has room for `count` more keys.
    codes[code_at + i] takes record first+i's `record_memo` code (its entry, or NO_KEY /
    NOT_MAPPED). With `hashed`, hashes[r] holds each key's `key_hash` already."""
    logged = 0
    arena_before = meta[ARENA_USED]
    used_before = meta[USED_BYTES]
    n_before = meta[N]
    for r in range(first, first + count):
        length = fields[KEY_LEN, r]
        offset = base_offset + fields[OFFSET_DELTA, r]
        if length < 0 or offset < start_offset:
            codes[code_at + r - first] = NO_KEY if length < 0 else NOT_MAPPED
            continue
        pos = fields[KEY_START, r]
        h = np.uint64(hashes[r]) if hashed else key_hash(buf, pos, length)
        i = find_slot(slots, arena, buf, pos, length, h)
        undo[0, logged] = i
        if slots[i, KPOS] == _EMPTY:
            a = meta[ARENA_USED]
            if a + length > arena.shape[0] or meta[USED_BYTES] + length + ENTRY_OVERHEAD_BYTES > meta[CAPACITY_BYTES]:
                for k in range(logged - 1, -1, -1):  # undo, last first
                    s = undo[0, k]
                    if undo[1, k] == _EMPTY:
                        slots[s, KPOS] = _EMPTY
                    else:
                        offsets[slots[s, ENTRY]] = undo[1, k]
                meta[ARENA_USED] = arena_before
                meta[USED_BYTES] = used_before
                meta[N] = n_before
                return False
            if length > 0:
                copy_bytes(arena, a, buf, pos, length)  # type: ignore[call-arg]
            slots[i, HASH] = np.int64(h)
            slots[i, KPOS] = a
            slots[i, KLEN] = length
            slots[i, ENTRY] = meta[N]
            meta[ARENA_USED] = a + length
            meta[USED_BYTES] += length + ENTRY_OVERHEAD_BYTES
            meta[N] += 1
            undo[1, logged] = _EMPTY
        else:
            undo[1, logged] = offsets[slots[i, ENTRY]]
        entry = slots[i, ENTRY]
        offsets[entry] = offset
        codes[code_at + r - first] = entry * 2 + (1 if fields[VALUE_LEN, r] < 0 else 0)
        logged += 1
    return True


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def rehash(old: np.ndarray, new: np.ndarray) -> None:
    mask = new.shape[0] - 1
    for i in range(old.shape[0]):
        if old[i, KPOS] != _EMPTY:
            j = np.int64(np.uint64(old[i, HASH]) & np.uint64(mask))
            while new[j, KPOS] != _EMPTY:
                j = (j + 1) & mask
            for f in range(4):
                new[j, f] = old[i, f]


class OffsetMap:
    """`memory_bytes` (`log.cleaner.dedupe.buffer.size` per thread) times `load_factor`
    is the budget. The arrays are the compiled functions' state; `latest_offset` is Kafka's
    `latestOffset` (the last offset the map covers)."""

    def __init__(self, memory_bytes: int, load_factor: float = 0.9) -> None:
        self.capacity_bytes = int(memory_bytes * load_factor)
        # Virtual until touched: the keys' bytes are written only as keys arrive.
        self.arena = np.empty(max(self.capacity_bytes, 1), dtype=np.uint8)
        self.meta = np.zeros(4, dtype=np.int64)
        self.meta[CAPACITY_BYTES] = self.capacity_bytes
        self.slots = _empty_slots(_MIN_SLOTS)
        self.offsets = np.empty(_MIN_SLOTS, dtype=np.int64)
        self.codes = np.empty(256, dtype=np.int32)
        self.hashes = np.empty(256, dtype=np.int64)
        self.undo = np.empty((2, 256), dtype=np.int64)
        self.latest_offset = -1

    def __len__(self) -> int:
        return int(self.meta[N])

    @property
    def used_bytes(self) -> int:
        return int(self.meta[USED_BYTES])

    def reserve(self, more_keys: int) -> None:
        """Room for `more_keys` new keys while the table stays at most half full."""
        need = 2 * (int(self.meta[N]) + more_keys)
        if need > self.slots.shape[0]:
            size = self.slots.shape[0]
            while size < need:
                size *= 2
            new = _empty_slots(size)
            rehash(self.slots, new)
            self.slots = new
        if int(self.meta[N]) + more_keys > len(self.offsets):
            offsets = np.empty(max(2 * len(self.offsets), int(self.meta[N]) + more_keys), dtype=np.int64)
            offsets[:len(self.offsets)] = self.offsets
            self.offsets = offsets
        if more_keys > self.undo.shape[1]:
            self.undo = np.empty((2, more_keys), dtype=np.int64)
            self.codes = np.empty(more_keys, dtype=np.int32)
            self.hashes = np.empty(more_keys, dtype=np.int64)

    def put_records(self, buf: np.ndarray, fields: np.ndarray, first: int, count: int, base_offset: int,
                    start_offset: int) -> bool:
        """One batch's records as located by `record_scan.scan_section` (see `put_records`)."""
        self.reserve(count)
        return bool(put_records(self.slots, self.arena, self.offsets, self.meta, self.undo, buf, fields, first,
                                count, base_offset, start_offset, self.codes, 0, self.hashes, False))

    def get(self, key: bytes) -> int:
        """The latest offset of `key`, -1 when absent (Kafka's contract)."""
        return int(lookup(self.slots, self.arena, self.offsets, np.frombuffer(key, dtype=np.uint8), 0, len(key)))

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = offset

    @property
    def utilization(self) -> float:
        return self.used_bytes / self.capacity_bytes if self.capacity_bytes else 1.0

    def clear(self) -> None:
        self.slots[:, KPOS] = _EMPTY
        self.meta[N] = self.meta[ARENA_USED] = self.meta[USED_BYTES] = 0
        self.latest_offset = -1


def _empty_slots(size: int) -> np.ndarray:
    slots = np.zeros((size, 4), dtype=np.int64)  # a slot's four fields in one cache line
    slots[:, KPOS] = _EMPTY
    return slots


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def _touch_slots(slots: np.ndarray, buf: np.ndarray, fields: np.ndarray, count: int, hashes: np.ndarray) -> int:
    """Load the first slot each key of the batch hashes to, before `put_records` probes
    them one after another: the loads are independent here, so their cache misses overlap
    (a 20,000-key table is larger than a core's L2; probing record after record waits for
    each miss in turn). Each key's hash is kept in `hashes` for `put_records`."""
    mask = np.uint64(slots.shape[0] - 1)
    total = 0
    for r in range(count):
        length = fields[KEY_LEN, r]
        if length >= 0:
            h = key_hash(buf, fields[KEY_START, r], length)
            hashes[r] = np.int64(h)
            total += slots[np.int64(h & mask), KPOS]
    return total


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def put_batch(slots: np.ndarray, arena: np.ndarray, offsets: np.ndarray, meta: np.ndarray, undo: np.ndarray,
              codes: np.ndarray, hashes: np.ndarray, buf: np.ndarray, fields: np.ndarray, count: int, base_offset: int,
              start_offset: int, section_start: int, size: int, crc: int, memo_batches: np.ndarray,
              memo_records: np.ndarray, memo_used: np.ndarray) -> bool:
    """`put_records` of one batch's records (fields[:, :count], scanned from the records
    section at buf[section_start:]), noting the batch (base offset, size, CRC) in the memo
    when it fits and lies wholly at or above `start_offset`; False when the map is full.
    The table has room for `count` more keys; `codes` and `hashes` hold `count` values."""
    undo[1, undo.shape[1] - 1] = _touch_slots(slots, buf, fields, count, hashes)
    nb = memo_used[BATCHES_USED]
    nr = memo_used[RECORDS_USED]
    noted = base_offset >= start_offset and nb < memo_batches.shape[1] and nr + count <= memo_records.shape[1]
    if noted:
        ok = put_records(slots, arena, offsets, meta, undo, buf, fields, 0, count, base_offset, start_offset,
                         memo_records[M_CODE], nr, hashes, True)
    else:
        ok = put_records(slots, arena, offsets, meta, undo, buf, fields, 0, count, base_offset, start_offset,
                         codes, 0, hashes, True)
    if ok and noted:
        memo_batches[M_BASE_OFFSET, nb] = base_offset
        memo_batches[M_FIRST, nb] = nr
        memo_batches[M_SIZE, nb] = size
        memo_batches[M_CRC, nb] = crc
        for r in range(count):
            memo_records[M_END, nr + r] = fields[RECORD_END, r] - section_start
            memo_records[M_DELTA, nr + r] = fields[OFFSET_DELTA, r]
        memo_used[BATCHES_USED] = nb + 1
        memo_used[RECORDS_USED] = nr + count
    return ok  # type: ignore[no-any-return]


# map_chunk's outcomes
MAPPED, MAP_FULL, REACHED_END = range(3)


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def map_chunk(buf: np.ndarray, headers: np.ndarray, n_batches: int, start_offset: int, end_offset: int,
              fields: np.ndarray, slots: np.ndarray, arena: np.ndarray, offsets: np.ndarray, meta: np.ndarray,
              undo: np.ndarray, codes: np.ndarray, hashes: np.ndarray, latest: np.ndarray, memo_batches: np.ndarray,
              memo_records: np.ndarray, memo_used: np.ndarray) -> tuple[int, int, int]:
    """Put the keys of `n_batches` plain data batches (no control or transactional flag,
    uncompressed) of one chunk, batch after batch, `latest[0]` following each mapped batch's
    last offset (from `start_offset` on), and note each batch that fits in the memo
    (`record_memo`; `codes` is scratch for those that do not). Returns (MAPPED, MAP_FULL
    when a batch did not fit, or REACHED_END at a batch from `end_offset`; records mapped; a
    `scan_section` error code)."""
    records = 0
    for b in range(n_batches):
        base = headers[B_BASE_OFFSET, b]
        if base >= end_offset:
            return REACHED_END, records, 0
        pos = headers[B_POS, b]
        count = headers[B_COUNT, b]
        size = headers[B_SIZE, b]
        error, _ = scan_section(buf, pos + BATCH_OVERHEAD, pos + size, count, fields, 0)
        if error != 0:
            return MAPPED, records, error
        if not put_batch(slots, arena, offsets, meta, undo, codes, hashes, buf, fields, count, base, start_offset,
                         pos + BATCH_OVERHEAD, size, read_be(buf, pos + 17, 4), memo_batches, memo_records,
                         memo_used):
            return MAP_FULL, records, 0
        records += count
        last_offset = base + headers[B_LAST_OFFSET_DELTA, b]
        if last_offset >= start_offset:
            latest[0] = last_offset
    return MAPPED, records, 0
