"""Seeded simulation of one partition on 3 brokers (virtual clock, crashes that lose unflushed
bytes, clean elections, ISR changes through a controller model). After every event:
one leader per epoch, the leader's HW never moves back within its epoch, the ISR contains
the leader, and no acks=all-acknowledged record is lost or changed on a live ISR member."""

import os
import random

import pytest

from kmirror.testing.replication_harness import ReplicationHarness

EVENTS = 250


def step(h: ReplicationHarness, rng: random.Random) -> str:
    alive = [b for b, broker in h.brokers.items() if broker.alive]
    roll = rng.random()
    if roll < 0.25:
        return h.produce(rng.randint(1, 3), rng.choice([-1, -1, 1]))
    if roll < 0.60 and alive:
        return h.fetch(rng.choice(alive))
    if roll < 0.68:
        h.tick(rng.choice([100, 1000, 6000]))
        return "tick"
    if roll < 0.74:
        return h.shrink()
    if roll < 0.84:
        return "; ".join(h.controller())
    if roll < 0.88 and alive:
        b = rng.choice(alive)
        h.brokers[b].flush()
        return f"flush {b}"
    # One failure at a time, and only while another live ISR member holds the committed
    # records (acks=all with min.insync.replicas=2 tolerates one lost unflushed replica).
    isr_alive = [b for b in h.registration.isr if h.brokers[b].alive]
    if roll < 0.93 and len(alive) == len(h.brokers) and len(isr_alive) >= 2:
        b = rng.choice(alive)
        if rng.random() < 0.5:
            h.brokers[b].flush()
        h.brokers[b].crash()
        return f"crash {b}; " + h.fence(b)
    dead = [b for b, broker in h.brokers.items() if not broker.alive]
    if dead:
        b = dead[0]
        return f"restart {b}: " + h.restart(b)
    return "noop"


def check(h: ReplicationHarness, leaders: dict[int, int], hw_by_epoch: dict[int, int]) -> None:
    reg = h.registration
    assert reg.leader == -1 or reg.leader in reg.isr, f"ISR {reg.isr} lacks leader {reg.leader}"
    assert leaders.setdefault(reg.leader_epoch, reg.leader) == reg.leader, "two leaders in one epoch"
    for b, broker in h.brokers.items():
        if broker.alive and broker.partition is not None and broker.partition.is_leader:
            assert broker.partition.leader_epoch == reg.leader_epoch or reg.leader != b
            hw = broker.partition.high_watermark
            key = broker.partition.leader_epoch
            assert hw >= hw_by_epoch.get(key, 0), f"HW moved back {hw_by_epoch.get(key)} -> {hw}"
            hw_by_epoch[key] = hw
    for b in reg.isr:
        broker = h.brokers[b]
        if not broker.alive:
            continue
        records = h.records(b)
        for offset, value in h.acked.items():
            assert records.get(offset) == value, f"broker {b} offset {offset}: {records.get(offset)!r} != {value!r}"


@pytest.mark.parametrize("seed", range(int(os.environ.get("KMIRROR_SIM_SEEDS", "12"))))
def test_simulated_cluster_keeps_acknowledged_records(seed: int) -> None:
    rng = random.Random(seed)
    h = ReplicationHarness((1, 2, 3), min_isr=2, lag_ms=5000)
    leaders: dict[int, int] = {}
    hw_by_epoch: dict[int, int] = {}
    trace: list[str] = []
    for i in range(EVENTS):
        trace.append(f"{i}: {step(h, rng)}")
        try:
            check(h, leaders, hw_by_epoch)
        except AssertionError as exc:
            raise AssertionError(f"seed {seed} failed after event {i}: {exc}\n" + "\n".join(trace[-15:])) from exc
