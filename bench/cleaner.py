"""Log cleaner throughput against reading the same segments, same data, same run.

A compacted partition log is written on the local disk through kmirror's own `Log` (batches of
50 keyed records built like a producer's, `--value-bytes` values, keys drawn from `--keys`
distinct keys so most records are overwrites, 5% tombstones), with every codec in `--codecs`.
Everything but a small active segment is dirty. Then, per codec, with the page cache warm:

1. read baseline: every dirty segment read in `log.cleaner.io.buffer.size` (512 KiB) chunks
   through the same FileSystem the cleaner uses, nothing parsed (best of 3);
2. decode baseline: the same reads plus decoding every record of every batch, as a consumer
   would (`kmirror.records.record.decode_records`; best of 3);
3. cleaner: one whole cleaning round (`LogCleaning.run`: key map, rewrite, swap, fsync), as a
   node runs it: the replaced segments are renamed `.deleted` and deleted afterwards (a node
   waits `file.delete.delay.ms`, as Kafka); that deletion's CPU (freeing the page cache of
   the replaced files) is shown apart, in "deletes CPU ms".

MB/s are dirty log bytes (as stored, compressed) per wall-clock second; the ratios divide the
cleaner's MB/s by each baseline's. On a shared machine wall time moves with the neighbours'
load, so the plain read and the cleaner are also measured in CPU seconds of this process
(`time.process_time`, best of 3 for the read); the "CPU" ratio compares those. Step times are the wall time of each step of the round's
generator (what a node's event loop is held for between two turns).

    .venv/bin/python bench/cleaner.py [--mb 64] [--value-bytes 512] [--keys 20000] [--codecs none,lz4,zstd]
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

from kmirror.log.cleaner.cleanable import log_to_clean
from kmirror.log.cleaner.cleaning import LogCleaning
from kmirror.log.cleaner.offset_map import OffsetMap
from kmirror.log.cleaner.segment_reader import iter_chunks
from kmirror.log.cleaner.warm_up import warm_up
from kmirror.log.config import LogConfig
from kmirror.log.log import Log
from kmirror.records.builder import build_batch
from kmirror.records.compression import CompressionType
from kmirror.records.record import decode_records
from kmirror.records.record_scan import B_POS
from kmirror.runtime.node import SystemClock
from kmirror.runtime.os_fs import OsFileSystem
from kmirror.types import TopicPartition

IO_BUFFER = 512 * 1024
BATCH_RECORDS = 50


@dataclass
class Result:
    codec: str
    dirty_mb: float
    records: int
    read_s: float
    decode_s: float
    clean_s: float
    read_cpu_s: float
    clean_cpu_s: float
    delete_cpu_s: float
    written_mb: float
    p99_step_ms: float
    max_step_ms: float


def build_log(directory: str, codec: int, mb: int, value_bytes: int, keys: int) -> tuple[Log, int]:
    clock = SystemClock()
    config = LogConfig(cleanup_policy=("compact",), segment_bytes=16 * 1024 * 1024, min_cleanable_dirty_ratio=0.0)
    log = Log.open(OsFileSystem(), directory, TopicPartition("bench", 0), config, clock)
    rng = random.Random(13)
    now = clock.now_ms()
    written = 0
    n = 0
    while written < mb * 1024 * 1024:
        batch = []
        for _ in range(BATCH_RECORDS):
            key = b"user-%08d" % rng.randrange(keys)
            value = None if rng.random() < 0.05 else b'{"n":%d,"v":"%s"}' % (n, rng.randbytes(value_bytes // 2).hex().encode())
            batch.append((key, value, (), now))
            n += 1
        raw = build_batch(batch, compression=codec)
        log.append_as_leader(raw, leader_epoch=0, now_ms=now)
        written += len(raw)
    log.roll()
    log.append_as_leader(build_batch([(b"tail", b"tail", (), now)]), leader_epoch=0, now_ms=now)
    log.update_high_watermark(log.log_end_offset)
    log.flush()
    return log, n


def read_segments(log: Log, decode: bool, clock: Callable[[], float] = time.perf_counter) -> float:
    """Plain: the segments' bytes read in I/O-buffer chunks, nothing parsed. Decode: every
    batch of every chunk located and its records decoded."""
    start = clock()
    for segment in log.segments[:-1]:
        if decode:
            for chunk in iter_chunks(segment, 0, IO_BUFFER, lambda: None):
                for pos in chunk.headers[B_POS, :chunk.n].tolist():
                    decode_records(chunk.data, pos)
        else:
            for position in range(0, segment.size, IO_BUFFER):
                segment.fs.read(segment.log_path, position, min(IO_BUFFER, segment.size - position))
    return clock() - start


def run(codec_name: str, mb: int, value_bytes: int, keys: int) -> Result:
    directory = tempfile.mkdtemp(prefix="kmirror-cleaner-bench-")
    try:
        codec = CompressionType.from_name(codec_name)
        log, records = build_log(directory + "/bench-0", codec, mb, value_bytes, keys)
        dirty = sum(s.size for s in log.segments[:-1])
        read_s = min(read_segments(log, decode=False) for _ in range(3))
        decode_s = min(read_segments(log, decode=True) for _ in range(3))
        read_cpu_s = min(read_segments(log, decode=False, clock=time.process_time) for _ in range(3))
        target = log_to_clean(log, None, log.clock.now_ms())
        cleaning = LogCleaning(log, target.first_dirty_offset, target.first_uncleanable_offset, log.clock.now_ms(),
                               OffsetMap(128 * 1024 * 1024), io_buffer_size=IO_BUFFER, defer_deletes=True)
        steps: list[float] = []
        cpu_start = time.process_time()
        start = time.perf_counter()
        previous = start
        for _ in cleaning.run():
            now = time.perf_counter()
            steps.append(now - previous)
            previous = now
        end = time.perf_counter()
        clean_cpu_s = time.process_time() - cpu_start
        steps.append(end - previous)
        delete_start = time.process_time()
        for segment in cleaning.replaced:
            segment.delete()
        delete_cpu_s = time.process_time() - delete_start
        clean_s = end - start
        assert cleaning.end_offset == log.segments[-1].base_offset, "the key map did not cover the dirty log"
        log.close()
        steps.sort()
        return Result(codec_name, dirty / 1e6, records, read_s, decode_s, clean_s, read_cpu_s, clean_cpu_s, delete_cpu_s,
                      cleaning.stats.bytes_written / 1e6,
                      steps[int(len(steps) * 0.99)] * 1000, steps[-1] * 1000)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=64)
    parser.add_argument("--value-bytes", type=int, default=512)
    parser.add_argument("--keys", type=int, default=20000)
    parser.add_argument("--codecs", default="none,lz4,zstd")
    args = parser.parse_args()
    warm_up()  # a node loads the compiled functions once, at start
    print("| codec | records | dirty MB | read MB/s | read+decode MB/s | cleaner MB/s | cleaned MB "
          "| cleaner ÷ read | cleaner ÷ read+decode | read CPU ms | cleaner CPU ms | cleaner ÷ read (CPU) "
          "| step p99 ms | step max ms | deletes CPU ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for codec in args.codecs.split(","):
        r = run(codec, args.mb, args.value_bytes, args.keys)
        read, decode, clean = r.dirty_mb / r.read_s, r.dirty_mb / r.decode_s, r.dirty_mb / r.clean_s
        print(f"| {r.codec} | {r.records} | {r.dirty_mb:.1f} | {read:.0f} | {decode:.0f} | {clean:.1f} "
              f"| {r.written_mb:.1f} | {clean / read:.1%} | {clean / decode:.0%} | {r.read_cpu_s * 1000:.1f} "
              f"| {r.clean_cpu_s * 1000:.0f} | {r.read_cpu_s / r.clean_cpu_s:.1%} "
              f"| {r.p99_step_ms:.1f} "
              f"| {r.max_step_ms:.1f} | {r.delete_cpu_s * 1000:.1f} |", flush=True)


if __name__ == "__main__":
    main()
