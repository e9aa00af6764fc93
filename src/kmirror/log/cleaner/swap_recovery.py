"""Completing an interrupted segment swap at log load (Kafka `LogLoader`'s swap handling).

A `<base>.log.swap` is a complete cleaned segment (see `swap`). Every segment whose base
offset lies in [base, the swap's next offset) is one it replaces and is deleted, then the
swap file becomes `<base>.log`; its indexes are left missing so the loader rebuilds them
(and its transaction index) from the data. Everything else `.swap` or `.cleaned` is a
stray the loader removes.
"""

from __future__ import annotations

from kmirror.log.fs import FileSystem, join
from kmirror.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LogSegment

_SWAP_LOG_SUFFIX = LOG_SUFFIX + ".swap"
_SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


def complete_swaps(fs: FileSystem, directory: str) -> list[int]:
    """Finish every swap found in `directory`; returns the base offsets completed."""
    names = fs.listdir(directory)
    done = []
    for name in names:
        stem = name[:-len(_SWAP_LOG_SUFFIX)]
        if not name.endswith(_SWAP_LOG_SUFFIX) or not stem.isdigit():
            continue
        base = int(stem)
        swap = LogSegment(fs, directory, base, index_interval_bytes=4096, max_index_size=1 << 20, created_ms=0,
                          file_suffix=".swap")
        swap.size = fs.size(swap.log_path)
        next_offset = base
        for _, header in swap.batches(0):
            next_offset = header.next_offset
        for other in names:
            other_stem = other[:-len(LOG_SUFFIX)]
            if other.endswith(LOG_SUFFIX) and other_stem.isdigit() and base <= int(other_stem) < max(next_offset,
                                                                                                base + 1):
                for suffix in _SEGMENT_SUFFIXES:
                    fs.delete(join(directory, other_stem + suffix))
        fs.rename(swap.log_path, join(directory, stem + LOG_SUFFIX))
        done.append(base)
    return done
