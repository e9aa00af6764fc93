"""How long a cluster of three controllers (a KIP-595 quorum) cannot make a metadata change
when its active controller goes away, against the same change with nothing lost.

One cluster: 3 dedicated controllers, 3 brokers. Each round times a CreateTopics (replication
factor 3) sent to the brokers by confluent-kafka's AdminClient, in three ways:
- nothing happens (the baseline: a controller write's own latency);
- the active controller was just sent SIGTERM: it resigns (EndQuorumEpoch), a follower stands
  at once;
- the active controller was just killed -9: the followers notice when
  `controller.quorum.fetch.timeout.ms` (2 s) passes without an answer from it, then elect
  (`controller.quorum.election.timeout.ms`, 1 s, randomised up to twice).
A broker's forwarded CreateTopics goes on from voter to voter until one is active, so its time
is the cluster's time without a controller, plus the write. The stopped controller is started
again and caught up before the next round. With `--combined`, the three brokers are the voters
(combined mode): the node lost is also a broker, so the topics get replication factor 2.

    .venv/bin/python bench/controller_failover.py [--rounds 5] [--combined] [--plot docs/controller_failover.png]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic
from line_plot import save_line_plot

from kmirror.runtime.local_cluster import process_alive
from kmirror.testing.mirror_clusters import quorum_replication, wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, pid_path

MODES = ("nothing lost", "SIGTERM (resigns)", "kill -9")


def active_controller(cluster: LocalCluster) -> int:
    rows = wait_until(lambda: quorum_replication(cluster.bootstrap), "the metadata quorum", retry_on=(AssertionError,))
    return next(node for node, row in rows.items() if row["Status"] == "Leader")


def caught_up(cluster: LocalCluster) -> bool:
    """Every voter, and every broker that is not one (an observer), at lag 0."""
    rows = quorum_replication(cluster.bootstrap)
    return len(rows) == (3 if cluster.combined else 6) and all(row["Lag"] == "0" for row in rows.values())


def lose(cluster: LocalCluster, mode: str) -> int:
    """Stop the active controller as `mode` says; its id (-1 when nothing is lost)."""
    if mode == MODES[0]:
        return -1
    node = active_controller(cluster)
    if mode == MODES[1]:
        os.kill(cluster.pid(node), signal.SIGTERM)
    else:
        cluster.kill9(node)
    return node


def restore(cluster: LocalCluster, node: int) -> None:
    if node < 0:
        return
    if pid_path(cluster.dir, node).exists():  # SIGTERM: wait for it to stop
        pid = cluster.pid(node)
        wait_until(lambda: not process_alive(pid), f"controller {node} stopped")
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        pid_path(cluster.dir, node).unlink()
    cluster.start_node(node)
    wait_until(lambda: caught_up(cluster), "every voter and broker caught up", retry_on=(AssertionError,))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--combined", action="store_true", help="the three brokers are the voters")
    parser.add_argument("--plot", type=Path, default=None)
    args = parser.parse_args()
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    replication_factor = 2 if args.combined else 3
    with tempfile.TemporaryDirectory(prefix="kmirror-failover-") as work, \
            LocalCluster(dir=Path(work) / "c", port=free_port_block(3), nodes=3, controllers=1 if args.combined else 3,
                         combined=args.combined) as cluster:
        wait_until(lambda: caught_up(cluster), "the cluster up", retry_on=(AssertionError,))
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})  # one client: its start is not timed
        admin.list_topics(timeout=10)
        for i in range(args.rounds):
            for mode in MODES:
                node = lose(cluster, mode)
                started = time.monotonic()
                name = f"probe-{i}-{MODES.index(mode)}"
                admin.create_topics([NewTopic(name, 1, replication_factor)], request_timeout=60)[name].result(timeout=60)
                times[mode].append(time.monotonic() - started)
                print(f"round {i + 1}: {mode}: {times[mode][-1]:.2f} s", flush=True)
                restore(cluster, node)
    base = statistics.median(times[MODES[0]])
    print("\n| active controller | CreateTopics s, median | min | max | ÷ nothing lost (medians) |")
    print("|---|---|---|---|---|")
    for mode in MODES:
        median = statistics.median(times[mode])
        print(f"| {mode} | {median:.2f} | {min(times[mode]):.2f} | {max(times[mode]):.2f} | {median / base:.1f} |")
    if args.plot is not None:
        save_line_plot(args.plot, {mode: [(i + 1, t) for i, t in enumerate(ts)] for mode, ts in times.items()},
                       "round", "CreateTopics time (s)",
                       "A metadata change while the active controller is lost "
                       f"(3 {'combined ' if args.combined else ''}voters)")
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
