"""CPU of the mirror coordinator validating a wide WriteMirrorStates while another is in flight.

A failover or pause of N partitions writes their states in batches; a batch validated while an
earlier one is still being appended to `__mirror_state` must check each partition against the
value in flight (`MirrorCoordinator._effective`). This times, on one coordinator holding N
MIRRORING states: (1) the baseline: a write of N/2 STOPPING states with nothing in flight;
(2) the other N/2 while the first half is in flight; (3) both appends' completions. CPU time
(`time.process_time`), garbage collection off, best of `--rounds`.

Run: .venv/bin/python bench/mirror_state_writes.py [--partitions 10000] [--rounds 5]
The machine is shared and noisy: compare the ratio within one run.
"""

from __future__ import annotations

import argparse
import gc
import time
import uuid

from kmirror.kip1279.state import MirrorPartitionState
from kmirror.mirror.coordinator.coordinator import MirrorCoordinator, StateWrite
from kmirror.mirror.coordinator.records import MirrorPartitionKey, MirrorPartitionStateValue


def one_round(partitions: int) -> tuple[float, float, float]:
    coordinator = MirrorCoordinator(50)
    topics = [uuid.uuid4() for _ in range(10)]
    keys = [MirrorPartitionKey("m", topics[i % 10], i // 10) for i in range(partitions)]
    for p in range(coordinator.num_partitions):
        coordinator.begin_load(p)
        coordinator.complete_load(p, [(k, MirrorPartitionStateValue("t", MirrorPartitionState.MIRRORING, 0))
                                      for k in keys if coordinator.partition_for(k) == p])
    half = partitions // 2

    def write(request_id: int, part: list[MirrorPartitionKey]) -> tuple[float, list[int]]:
        start = time.process_time()
        out = coordinator.write_states(request_id, [StateWrite(k, "t", MirrorPartitionState.STOPPING, 0)
                                                    for k in part])
        return time.process_time() - start, [a.ticket for a in out.appends]

    alone, first = write(1, keys[:half])
    overlapped, second = write(2, keys[half:])
    start = time.process_time()
    for ticket in first + second:
        coordinator.on_append_completed(ticket)
    return alone, overlapped, time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    gc.disable()
    rounds = [one_round(args.partitions) for _ in range(args.rounds)]
    alone, overlapped, completed = (min(r[i] for r in rounds) * 1000 for i in range(3))
    half = args.partitions // 2
    print(f"| write of {half} states, nothing in flight (baseline) | {alone:.1f} ms | 1.00x |")
    print(f"| write of {half} states, {half} in flight | {overlapped:.1f} ms | {overlapped / alone:.2f}x |")
    print(f"| completion of both appends | {completed:.1f} ms | {completed / alone:.2f}x |")


if __name__ == "__main__":
    main()
