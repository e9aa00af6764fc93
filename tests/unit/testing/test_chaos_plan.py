"""The chaos run's fault plan: seeded, one fault at a time per cluster, every kind reached."""

from __future__ import annotations

from collections import Counter

from kmirror.runtime.local_cluster import CONTROLLER_NODE_ID
from kmirror.testing.chaos import LINK, plan_faults
from kmirror.testing.chaos_checks import BROKERS


def test_a_seed_replays_its_plan_and_another_seed_differs() -> None:
    assert plan_faults(7, 120) == plan_faults(7, 120)
    assert plan_faults(7, 120) != plan_faults(8, 120)


def test_faults_of_one_cluster_never_overlap_and_start_within_the_run() -> None:
    for seed in range(50):
        plan = plan_faults(seed, 90)
        assert plan == sorted(plan, key=lambda f: f.at_s)
        for cluster in ("source", "destination"):
            mine = [f for f in plan if f.cluster == cluster]
            assert mine, (seed, cluster)
            for before, after in zip(mine, mine[1:], strict=False):
                assert after.at_s >= before.at_s + before.hold_s + 0.9, (seed, before, after)
            assert all(0 < f.at_s <= 90 and 0.5 <= f.hold_s <= 8.0 for f in mine)


def test_targets_and_kinds() -> None:
    faults = [f for seed in range(50) for f in plan_faults(seed, 120)]
    kinds = Counter((f.cluster, f.kind, f.node == CONTROLLER_NODE_ID) for f in faults)
    for cluster in ("source", "destination"):
        for kind in ("kill9", "pause"):
            assert kinds[(cluster, kind, False)] and kinds[(cluster, kind, True)], (cluster, kind)
    assert kinds[("destination", "mirror-pause", False)] and not kinds[("source", "mirror-pause", False)]
    assert kinds[("source", "crash", False)] and kinds[("destination", "crash", False)]
    assert kinds[("source", "dir-fail", False)] and kinds[("destination", "dir-fail", False)]
    assert all(f.node in BROKERS for f in faults if f.kind in ("dir-fail", "disk-full"))
    assert all(f.node in (*BROKERS, CONTROLLER_NODE_ID) for f in faults if f.kind in ("kill9", "pause"))
    assert all(f.node == 0 for f in faults if f.kind in ("crash", "mirror-pause"))
    link = Counter(f.kind for f in faults if f.cluster == LINK)
    assert set(link) == {"link-cut", "link-blackhole", "link-slow"}
    assert all(f.hold_s <= 30.0 for f in faults if f.kind == "link-slow")
    assert all(f.hold_s <= 8.0 for f in faults if f.kind == "link-cut")
    assert any(f.hold_s > 30.0 for f in faults if f.kind == "link-blackhole")  # past the request timeout


def test_link_faults_never_overlap() -> None:
    for seed in range(50):
        mine = [f for f in plan_faults(seed, 90) if f.cluster == LINK]
        assert mine, seed
        for before, after in zip(mine, mine[1:], strict=False):
            assert after.at_s >= before.at_s + before.hold_s + 0.9, (seed, before, after)


def test_controller_faults_hit_the_voters() -> None:
    """Several dedicated controllers share the controller faults; combined voters take them
    as brokers (each is one)."""
    quorum = (CONTROLLER_NODE_ID, CONTROLLER_NODE_ID + 1, CONTROLLER_NODE_ID + 2)
    hit = Counter(f.node for seed in range(50) for f in plan_faults(seed, 120, quorum) if f.node >= CONTROLLER_NODE_ID)
    assert set(hit) == set(quorum)
    for seed in range(20):
        combined = plan_faults(seed, 120, BROKERS)
        assert all(f.node in (0, *BROKERS) for f in combined)
        assert [(f.at_s, f.kind) for f in combined] == [(f.at_s, f.kind) for f in plan_faults(seed, 120, quorum)]
