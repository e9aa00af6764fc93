"""Seeded random faults on two real 3-broker clusters while the source is written to and
mirrored, then the checks a DR copy must pass (a nemesis and a checker, as Jepsen runs them).

The faults, per cluster and one at a time there (with replication factor 3 and
`min.insync.replicas=2` a single fault must not lose an acknowledged record):
- `kill9` of a broker, started again after the hold;
- `pause` of a broker (SIGSTOP, then SIGCONT): it misses heartbeats and fetches, and comes
  back believing what it believed before;
- the same two on the dedicated controller;
- `crash`: kill -9 of every node of the cluster at once, started again after the hold
  (controller first); what the processes wrote stays in the page cache;
- `disk-full` on a broker: its writes fail past 1 KiB more than its largest file (EFBIG,
  `LocalCluster.fill_disk`), so the first file that grows that far makes it halt as a
  broker whose disk filled; at the end of the hold it starts again (killed -9 first if it
  did not write that far);
- `dir-fail` on a broker: its second log dir (every broker has two, JBOD) is replaced by a
  file, so the next file the broker creates there fails and the dir goes offline (KIP-858)
  while the broker serves its first; at the end of the hold the disk is replaced: the broker
  is killed -9 and started again with an empty dir there, and copies those replicas again;
- at the destination, `mirror-pause`: `kmirror mirrors --pause`, then `--resume`.
Every node snapshots its metadata every 16 KB of records and deletes the log below, so a
broker down for a few seconds often comes back below its controller's log start and loads
the controller's snapshot (FetchSnapshot).
On a third track, faults of the network link between the two sites (`kmirror.testing.link`:
the mirror reaches the other cluster only through it), both ways at once:
- `link-cut`: every connection across it closed, new ones reset;
- `link-blackhole`: nothing crosses it, connections hang; held for up to 40 s, longer than
  the mirror's 30 s request timeout;
- `link-slow`: everything crosses it 200 ms late each way (a 400 ms round trip, as between
  continents on a congested day), for up to 30 s.

The source is written to by an idempotent acks=all producer (`orders`) and by a
transactional producer committing and aborting at random (`payments`); both topics are
mirrored. Consumer groups commit `orders` offsets at the source (`group_committer`). The checks, after every fault has ended: both writers get writes through again within
3 minutes (liveness); then, with the writers finished:
1. every partition fully in sync at both ends, and the mirror MIRRORING with lag 0; every
   broker at its controller's metadata log end (`metadata-quorum describe --replication`: lag
   0) and answering Metadata as the other brokers of its cluster do;
2. every replica of both clusters holds the source leader's batches, byte for byte, at the
   same offsets;
3. every record the source acknowledged is at its offset at the source and at the
   destination, once; a read_committed consumer at either end sees every committed
   transaction whole and once, and no aborted one; every group's offsets at the destination
   are the source's;
4. failover (`--remove`): every partition STOPPED and writable, offsets continuing after the
   mirrored ones.

With `disaster="crash"`, the whole source cluster is killed (-9) at the end of the faults
while both writers are still writing, and the destination fails over with its source gone, as
in a real disaster. The source is started again for the checks. With `disaster="partition"`,
the link becomes a black hole instead: the source stays up and its writers keep writing while
the destination fails over without reaching it (split brain, as an operator meets it when the
other site is unreachable, not down), and the link is healed after the checks. Either way the
mirror's lag makes the destination's copy a prefix of the source instead of all of it:
- the source alone passes checks 1-3 (nothing it acknowledged lost);
- every destination replica holds the same log: a byte-identical prefix of the source
  leader's batches, then one MIRROR_PID_RESET marker, and no open transaction (LSO == HW);
- a read_committed consumer at the destination sees, in each partition, each transaction's
  records whole or not at all, and no aborted one (each partition is cut at its own LSO: a
  transaction across partitions may survive in some and not in others, as KIP-1279 says:
  no exactly-once across clusters);
- each group offset the destination holds is one its consumer committed at the source;
- the destination takes writes right after the marker.
Then failback, under a second plan of faults with the roles swapped: the old source mirrors
the destination back (same mirror name) while the destination is written to, and must end
byte-identical to it, with every record the destination acknowledged (checks 1-3 the other
way round).

`python -m kmirror.testing.chaos --seconds 600 --seed 7 --dir /tmp/chaos` runs it for longer
than the test suite does; a failing seed replays its plan."""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kmirror.runtime.local_cluster import CONTROLLER_NODE_ID
from kmirror.testing.acked_writer import AckedWriter
from kmirror.testing.chaos_checks import (
    BROKERS,
    CONVERGE_TIMEOUT_S,
    MIRROR,
    PARTITIONS,
    TOPIC,
    TOPICS,
    TXN_TOPIC,
    check_converged,
    check_disaster_copy,
    check_source,
    fail_over,
    set_up,
    write_after_failover,
    writers_make_progress,
)
from kmirror.testing.group_committer import GroupCommitter, assert_only_committed_offsets, assert_synced
from kmirror.testing.link import Link
from kmirror.testing.mirror_clusters import clusters_up, create_mirror, wait_until
from kmirror.testing.processes import FAST_FAILURE_DETECTION, LocalCluster, free_port_block, kmirror, pid_path
from kmirror.testing.transactional_writer import (
    TransactionalWriter,
)

CLUSTERS = ("source", "destination")
# 3-broker settings: failures detected in about 3 s, replication factor 3 for every topic.
REPLICATED_CLUSTER = {
    **FAST_FAILURE_DETECTION,
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "5",
    # metadata snapshots every 16 KB of records, the log below each deleted: a broker down for
    # a few seconds comes back below the controller's log start and loads its snapshot
    "metadata.log.max.record.bytes.between.snapshots": "16384",
    "metadata.max.retention.bytes": "0",
    # segments roll every few seconds of writes: a failed log dir is found at the next roll
    "log.segment.bytes": "1048576",
}
# (kind, on the controller, weight); mirror-pause only at the destination.
FAULT_KINDS = (("kill9", False, 4), ("pause", False, 3), ("kill9", True, 1), ("pause", True, 1), ("crash", False, 1),
               ("mirror-pause", False, 1), ("disk-full", False, 2), ("dir-fail", False, 2))
DISK_HEADROOM = 1024  # disk-full: a few seconds of the writers' records
WHOLE_CLUSTER = ("crash", "mirror-pause")  # the faults that name no node
LINK = "link"  # the track of the link's faults: (kind, weight, longest hold)
LINK_FAULTS = (("link-cut", 1, 8.0), ("link-blackhole", 1, 40.0), ("link-slow", 1, 30.0))
SLOW_LINK_MS = 200  # each way
DISASTERS = ("crash", "partition")


@dataclass(frozen=True)
class Fault:
    at_s: float
    cluster: str
    kind: str
    node: int  # a broker id, CONTROLLER_NODE_ID, or 0 for a fault of a whole cluster or of the link
    hold_s: float

    def __str__(self) -> str:
        target = "" if self.kind in WHOLE_CLUSTER or self.cluster == LINK else f" node {self.node}"
        return f"{self.at_s:6.1f}s {self.cluster} {self.kind}{target} for {self.hold_s:.1f}s"


def plan_faults(seed: int, seconds: float, voters: Sequence[int] = (CONTROLLER_NODE_ID,)) -> list[Fault]:
    """The faults of a run of `seconds`, in start order. Each cluster's faults never overlap,
    and each starts 1-5 s after the previous one there ended; holds of 0.5-8 s, so some outlast
    the 3 s session and replica lag timeouts (fencing, ISR shrink, elections) and some do not.
    The link's faults are a third such track (a black hole held up to 40 s). A controller
    fault hits one of the cluster's `voters` (with combined voters, a broker)."""
    rng = random.Random(seed)
    faults: list[Fault] = []
    for cluster in CLUSTERS:
        kinds = [k for k in FAULT_KINDS if cluster == "destination" or k[0] != "mirror-pause"]
        at = rng.uniform(1.0, 5.0)
        while at < seconds:
            kind, on_controller, _ = rng.choices(kinds, weights=[k[2] for k in kinds])[0]
            node = 0 if kind in WHOLE_CLUSTER else rng.choice(BROKERS) if not on_controller else (
                rng.choice(voters) if len(voters) > 1 else voters[0])
            hold = round(rng.uniform(0.5, 8.0), 1)
            faults.append(Fault(round(at, 1), cluster, kind, node, hold))
            at += hold + rng.uniform(1.0, 5.0)
    at = rng.uniform(1.0, 5.0)
    while at < seconds:
        kind, _, longest = rng.choices(LINK_FAULTS, weights=[k[1] for k in LINK_FAULTS])[0]
        hold = round(rng.uniform(0.5, longest), 1)
        faults.append(Fault(round(at, 1), LINK, kind, 0, hold))
        at += hold + rng.uniform(1.0, 5.0)
    return sorted(faults, key=lambda f: (f.at_s, f.cluster))


class Nemesis:
    """Carries out a plan on the two clusters and their link, and ends every fault it began.
    Each track's faults run in a thread of their own, keeping their holds and the gaps between
    them: a restart that takes long delays the rest of that cluster's plan, not the others'."""

    def __init__(self, clusters: dict[str, LocalCluster], links: list[Link], log: Callable[[str], None]) -> None:
        self.clusters = clusters
        self.links = links
        self.log = log
        self.active: list[Fault] = []
        self.errors: list[BaseException] = []
        self.lock = threading.Lock()

    def run(self, plan: list[Fault]) -> None:
        start = time.monotonic()
        tracks = [threading.Thread(target=self.track, args=([f for f in plan if f.cluster == c], start), daemon=True)
                  for c in (*CLUSTERS, LINK)]
        try:
            for thread in tracks:
                thread.start()
            for thread in tracks:
                thread.join()
        finally:
            for fault in list(self.active):
                self.log(f"end {fault} (healing)")
                self.end(fault)
        if self.errors:
            raise self.errors[0]

    def track(self, faults: list[Fault], start: float) -> None:
        due = start
        previous_end = 0.0
        try:
            for fault in faults:
                due += fault.at_s - previous_end
                time.sleep(max(0.0, due - time.monotonic()))
                self.log(f"begin {fault} (at {time.monotonic() - start:.1f}s)")
                self.begin(fault)
                time.sleep(fault.hold_s)
                self.log(f"end {fault} (at {time.monotonic() - start:.1f}s)")
                self.end(fault)
                due, previous_end = time.monotonic(), fault.at_s + fault.hold_s
        except BaseException as exc:  # the other track goes on; run() heals and raises it
            self.errors.append(exc)

    def begin(self, fault: Fault) -> None:
        with self.lock:
            self.active.append(fault)
        self.actions(fault)[0]()

    def end(self, fault: Fault) -> None:
        self.actions(fault)[1]()
        with self.lock:
            self.active.remove(fault)

    def actions(self, fault: Fault) -> tuple[Callable[[], object], Callable[[], object]]:
        if fault.cluster == LINK:
            return link_actions(self.links, fault.kind)
        return fault_actions(self.clusters[fault.cluster], fault)


def link_actions(links: list[Link], kind: str) -> tuple[Callable[[], object], Callable[[], object]]:
    """What begins and what ends a fault of the link between the sites: both ways at once."""
    def begin() -> None:
        for link in links:
            if kind == "link-cut":
                link.cut()
            elif kind == "link-slow":
                link.delay(SLOW_LINK_MS)
            else:
                link.blackhole()

    def end() -> None:
        for link in links:
            link.delay(0)
            link.heal()
    return begin, end


def fault_actions(cluster: LocalCluster, fault: Fault) -> tuple[Callable[[], object], Callable[[], object]]:
    """What begins and what ends each kind of fault on `cluster`."""
    return {
        "kill9": (lambda: cluster.kill9(fault.node), lambda: cluster.start_node(fault.node, timeout_s=120)),
        "pause": (lambda: cluster.pause(fault.node), lambda: cluster.resume(fault.node)),
        "crash": (cluster.crash, cluster.start_all),
        "mirror-pause": (lambda: mirror_command(cluster, "--pause"), lambda: mirror_command(cluster, "--resume")),
        "disk-full": (lambda: cluster.fill_disk(fault.node, DISK_HEADROOM), lambda: free_disk(cluster, fault.node)),
        "dir-fail": (lambda: fail_log_dir(cluster, fault.node), lambda: replace_disk(cluster, fault.node)),
    }[fault.kind]


FAILED_DISK = "failed-disk"  # where a failed second log dir's files go (not a `data*` dir)


def second_log_dir(cluster: LocalCluster, node: int) -> Path:
    return cluster.dir / f"node-{node}" / "data2"


def fail_log_dir(cluster: LocalCluster, node: int) -> None:
    """The broker's second log dir becomes a file: its next file there fails (ENOTDIR). The dir
    is renamed away in one step (the broker writes there meanwhile: a removal would race it)."""
    second = second_log_dir(cluster, node)
    second.rename(second.with_name(FAILED_DISK))
    second.write_text("")


def replace_disk(cluster: LocalCluster, node: int) -> None:
    """A new, empty disk in its place: the broker killed -9 (or halted), the dir made anew, the
    broker started again."""
    stop(cluster, node)
    second = second_log_dir(cluster, node)
    if second.is_dir():  # never failed (the fault's start did not get that far)
        shutil.rmtree(second)
    else:
        second.unlink(missing_ok=True)
    shutil.rmtree(second.with_name(FAILED_DISK), ignore_errors=True)
    second.mkdir(exist_ok=True)
    cluster.start_node(node, timeout_s=120)


def free_disk(cluster: LocalCluster, node: int) -> None:
    """Space again: the broker starts anew, after its halt (it cuts its torn tail) or, if it
    did not write that far, after a kill -9 (lifting the limit instead would race with a
    halt begun an instant before: that broker would stay down)."""
    stop(cluster, node)
    cluster.start_node(node, timeout_s=120)


def stop(cluster: LocalCluster, node: int) -> None:
    """The broker stopped: killed -9 unless it has halted."""
    if not cluster.exited(node):
        with contextlib.suppress(ProcessLookupError):  # it halted since
            cluster.kill9(node)
        pid_path(cluster.dir, node).unlink(missing_ok=True)


def mirror_command(dest: LocalCluster, action: str) -> None:
    """`kmirror mirrors <action>` of every mirrored topic, retried while the destination's controller or
    a coordinator is moving (the command then fails with a retriable error)."""
    wait_until(lambda: kmirror("mirrors", "--bootstrap-server", dest.bootstrap, action, "--topic", "|".join(TOPICS),
                               check=False, timeout=60).returncode == 0,
               f"kmirror mirrors {action}", timeout_s=CONVERGE_TIMEOUT_S)


def disaster_fail_over(source: LocalCluster, dest: LocalCluster, links: list[Link], disaster: str,
                       log: Callable[[str], None]) -> None:
    """The disaster, then the destination failed over without the source: with "crash" every
    source node is killed at once and started again after the failover; with "partition"
    the link becomes a black hole while the source stays up (its writers carry on either way)."""
    if disaster == "crash":
        source.crash()
        log("disaster: every source node killed; failing over")
    else:
        for link in links:
            link.blackhole()
        log("disaster: the link is a black hole, the source is up and written to; failing over")
    started = time.monotonic()
    fail_over(dest)
    log(f"disaster: every partition STOPPED {time.monotonic() - started:.1f} s after --remove")
    if disaster == "crash":
        source.start_all()
        log("disaster: the source started again")


def run(source: LocalCluster, dest: LocalCluster, seed: int, seconds: float, work: Path,
        log: Callable[[str], None] = print, disaster: str | None = None) -> tuple[AckedWriter, TransactionalWriter]:
    """One whole run on two started clusters (`clusters_in`): set up, write under the planned
    faults, check; `disaster` is None, "crash" or "partition"."""
    assert disaster in (None, *DISASTERS), disaster
    links = [Link(source.link_routes()).start(), Link(dest.link_routes()).start()]
    try:
        return run_linked(source, dest, links, seed, seconds, work, log, disaster)
    finally:
        for link in links:
            link.close()


def run_linked(source: LocalCluster, dest: LocalCluster, links: list[Link], seed: int, seconds: float, work: Path,
               log: Callable[[str], None], disaster: str | None) -> tuple[AckedWriter, TransactionalWriter]:
    plan = plan_faults(seed, seconds, source.voter_ids())
    log(f"chaos seed {seed}, {seconds:.0f} s, {len(plan)} faults{f', then a {disaster}' if disaster else ''}:")
    for fault in plan:
        log(f"  {fault}")
    set_up(source, dest, work, through=source.link_bootstrap)
    writer = AckedWriter(source.bootstrap, f"chaos-{seed}", TOPIC, PARTITIONS, work / "writer.log")
    txn_writer = TransactionalWriter(source.bootstrap, f"chaos-txn-{seed}", TXN_TOPIC, PARTITIONS, seed)
    groups = GroupCommitter(source.bootstrap, f"chaos-{seed}", TOPIC, PARTITIONS)
    for thread in (writer, txn_writer, groups):
        thread.start()
    try:
        Nemesis({"source": source, "destination": dest}, links, log).run(plan)
        writers_make_progress(writer, txn_writer)
        if disaster:
            disaster_fail_over(source, dest, links, disaster, log)
    finally:
        for thread in (writer, txn_writer, groups):
            thread.finish()
    log(f"{TOPIC}: acknowledged {len(writer.acked)} records, {len(writer.failed)} deliveries failed "
        f"{sorted({str(e) for e in writer.failed})[:3]}")
    log(f"{TXN_TOPIC}: {len(txn_writer.committed)} transactions committed, {len(txn_writer.aborted)} aborted, "
        f"{len(txn_writer.uncertain)} of unknown outcome; {len(txn_writer.errors)} errors met")
    if disaster:
        source_ends = check_source(source, writer, txn_writer)
        ends = check_disaster_copy(source, dest, txn_writer)
        log(f"disaster copy: MIRROR_PID_RESET at {ends} (source log ends {source_ends}), a byte-identical prefix "
            "of the source on every replica, every transaction whole or absent in each partition; "
            f"{assert_only_committed_offsets(groups, dest.bootstrap)} group offsets, each one its consumer committed")
    else:
        ends = check_converged(source, dest, writer, txn_writer)
        synced = assert_synced(groups, source.bootstrap, dest.bootstrap, CONVERGE_TIMEOUT_S)
        log(f"converged: source log end offsets {ends}, every replica byte-identical, every acknowledged record "
            f"once, every committed transaction whole, {len(synced)} group offsets synced "
            f"({groups.committed} commits, {len(groups.errors)} failed)")
        fail_over(dest)
    write_after_failover(dest, ends)
    log("failover: every partition STOPPED and writable after its MIRROR_PID_RESET")
    if disaster:
        for link in links:
            link.heal()
        fail_back(source, dest, links, seed, seconds / 2, work, log)
    return writer, txn_writer


def fail_back(source: LocalCluster, dest: LocalCluster, links: list[Link], seed: int, seconds: float, work: Path,
              log: Callable[[str], None]) -> None:
    """After a disaster failover: the old source mirrors the destination back (a mirror of the
    same name, towards the destination) while new writers write at the destination and a
    second plan injects faults with the roles swapped; then the old source must converge with
    the destination (checks 1-3 the other way round: its own unmirrored tail is truncated)."""
    plan = plan_faults(seed + 1, seconds, source.voter_ids())
    log(f"failback with roles swapped (source = the destination), {len(plan)} faults:")
    for fault in plan:
        log(f"  {fault}")
    writer = AckedWriter(dest.bootstrap, f"failback-{seed}", TOPIC, PARTITIONS, work / "failback-writer.log")
    txn_writer = TransactionalWriter(dest.bootstrap, f"failback-txn-{seed}", TXN_TOPIC, PARTITIONS, seed + 1)
    writer.start()
    txn_writer.start()
    try:
        create_mirror(source, dest.link_bootstrap, MIRROR, "|".join(TOPICS), work / "failback.properties")
        Nemesis({"source": dest, "destination": source}, links, log).run(plan)
        writers_make_progress(writer, txn_writer)
    finally:
        writer.finish()
        txn_writer.finish()
    log(f"failback writers: {len(writer.acked)} records acknowledged, {len(txn_writer.committed)} transactions "
        f"committed, {len(txn_writer.aborted)} aborted")
    ends = check_converged(dest, source, writer, txn_writer)
    log(f"failback converged: log end offsets {ends} at both ends, every replica byte-identical, every record "
        "acknowledged by the destination once at the old source, every committed transaction whole")


def clusters_in(work: Path, controllers: int = 1, combined: bool = False) -> tuple[LocalCluster, LocalCluster]:
    """The two clusters, each reachable from the other only through its link proxies, each with
    `controllers` controllers (the voters of its metadata quorum), or with its three brokers
    the voters (`combined`)."""
    source = LocalCluster(dir=work / "source", port=free_port_block(3), nodes=3, overrides=dict(REPLICATED_CLUSTER),
                          link_port=free_port_block(6), controllers=controllers, combined=combined,
                          per_broker=two_log_dirs(work / "source"))
    dest = LocalCluster(dir=work / "dest", port=free_port_block(3), nodes=3, link_port=free_port_block(6),
                        overrides={**REPLICATED_CLUSTER, "mirror.metadata.refresh.interval.ms": "1000"},
                        controllers=controllers, combined=combined, per_broker=two_log_dirs(work / "dest"))
    return source, dest


def two_log_dirs(base: Path) -> Callable[[int], dict[str, str]]:
    """Every broker's `log.dirs`: two (JBOD), the metadata log in the first."""
    return lambda node: {"log.dirs": f"{base / f'node-{node}' / 'data'},{base / f'node-{node}' / 'data2'}"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kmirror.testing.chaos", description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120, help="how long faults are injected (default 120)")
    parser.add_argument("--seed", type=int, default=None, help="the plan's seed (default: random, printed)")
    parser.add_argument("--disaster", choices=DISASTERS, default=None,
                        help="at the end, kill the whole source (crash) or make the link a black hole "
                             "(partition), and fail over without the source")
    parser.add_argument("--dir", type=Path, default=None, help="where the clusters live (default: a new temp dir)")
    parser.add_argument("--controllers", type=int, default=1,
                        help="controllers per cluster, the voters of its metadata quorum (default 1)")
    parser.add_argument("--combined", action="store_true",
                        help="no dedicated controllers: each cluster's three brokers are its voters")
    args = parser.parse_args(argv)
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)  # progress shows as it happens, also in a file
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    work = args.dir or Path(tempfile.mkdtemp(prefix="kmirror-chaos-"))
    source, dest = clusters_in(work, args.controllers, args.combined)
    started = time.monotonic()
    try:
        with clusters_up(source, dest):
            run(source, dest, seed, args.seconds, work, disaster=args.disaster)
    except AssertionError as exc:
        print(f"FAILED with seed {seed} after {time.monotonic() - started:.0f} s (clusters in {work}): {exc}",
              file=sys.stderr)
        return 1
    print(f"passed: seed {seed}, {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
