"""Throughput of `validate_for_append` on 1 MiB batches, next to a CRC32C baseline.

Run: .venv/bin/python bench/records_validation.py [--seconds 1.0]
Prints MB/s per case (median of several runs). The machine is shared and noisy: compare the
ratios within one run, not absolute numbers across runs.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from crc32c import crc32c

from kmirror.records import record_walk
from kmirror.records.builder import SimpleRecord, build_batch
from kmirror.records.validation import ValidatedRecords, validate_for_append

NOW_MS = 1_700_000_000_000
RECORD_VALUE_BYTES = 100


def one_mib_batch(compression: int) -> bytes:
    value = (b'{"user": 1234, "event": "click", "page": "/home"} ' * 4)[:RECORD_VALUE_BYTES]
    count = (1 << 20) // (RECORD_VALUE_BYTES + 20)
    records = [SimpleRecord(b"key-%d" % i, value, (), NOW_MS + i) for i in range(count)]
    return build_batch(records, compression=compression)


def measure(action: Callable[[], object], size: int, seconds: float) -> float:
    rates = []
    for _ in range(5):
        runs = 0
        start = time.perf_counter()
        while True:
            action()
            runs += 1
            elapsed = time.perf_counter() - start
            if elapsed >= seconds / 5:
                break
        rates.append(runs * size / elapsed / 1e6)
    return statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=1.0, help="time budget per case")
    seconds = parser.parse_args().seconds

    plain, zstd = one_mib_batch(0), one_mib_batch(4)
    count = (1 << 20) // (RECORD_VALUE_BYTES + 20)

    def check(buf: bytes, **kwargs: object) -> Callable[[], object]:
        def run() -> object:
            # max.message.bytes also bounds the decompressed size: room for the 1 MiB of records
            outcome = validate_for_append(buf, max_message_bytes=2 << 20, now_ms=NOW_MS, **kwargs)  # type: ignore[arg-type]
            assert isinstance(outcome, ValidatedRecords), outcome
            return outcome
        return run

    lz4 = one_mib_batch(3)
    walked = [("uncompressed, bounded timestamps (record walk)", check(plain, timestamp_before_max_ms=10**9)),
              ("zstd (decompress + record walk)", check(zstd)),
              ("lz4 (decompress + record walk)", check(lz4))]
    print(f"{count} records of {RECORD_VALUE_BYTES} B per batch; zstd batch is {len(zstd)} bytes, lz4 {len(lz4)}")
    print(f"{'case':50} {'MB/s (uncompressed bytes)':>26}")
    for name, action in [("crc32c baseline (1 MiB)", lambda: crc32c(plain)),
                         ("uncompressed, Kafka defaults", check(plain))]:
        print(f"{name:50} {measure(action, len(plain), seconds):>26.1f}")
    # The record walk in Python (a node until it has loaded the compiled walk), then compiled
    for name, action in walked:
        print(f"{name + ', Python':50} {measure(action, len(plain), seconds):>26.1f}")
    record_walk.load_compiled()
    for name, action in walked:
        print(f"{name + ', compiled':50} {measure(action, len(plain), seconds):>26.1f}")

if __name__ == "__main__":
    main()
