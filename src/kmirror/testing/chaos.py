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
- at the destination, `mirror-pause`: `kmirror mirrors --pause`, then `--resume`.

The source is written to by an idempotent acks=all producer (`orders`) and by a
transactional producer committing and aborting at random (`payments`); both topics are
mirrored. The checks, after every fault has ended: both writers get writes through again within
3 minutes (liveness); then, with the writers finished:
1. every partition fully in sync at both ends, and the mirror MIRRORING with lag 0;
2. every replica of both clusters holds the source leader's batches, byte for byte, at the
   same offsets;
3. every record the source acknowledged is at its offset at the source and at the
   destination, once; a read_committed consumer at either end sees every committed
   transaction whole and once, and no aborted one;
4. failover (`--remove`): every partition STOPPED and writable, offsets continuing after the
   mirrored ones.

With `disaster`, the whole source cluster is killed (-9) at the end of the faults while both
writers are still writing, and the destination fails over with its source gone, as in a real
disaster. The source is started again for the checks, and the mirror's lag makes the
destination's copy a prefix of the source instead of all of it:
- the source alone passes checks 1-3 (nothing it acknowledged lost);
- every destination replica holds the same log: a byte-identical prefix of the source
  leader's batches, then one MIRROR_PID_RESET marker, and no open transaction (LSO == HW);
- a read_committed consumer at the destination sees each transaction whole or not at all,
  and no aborted one;
- the destination takes writes right after the marker.
Then failback, under a second plan of faults with the roles swapped: the old source mirrors
the destination back (same mirror name) while the destination is written to, and must end
byte-identical to it, with every record the destination acknowledged (checks 1-3 the other
way round).

`python -m kmirror.testing.chaos --seconds 600 --seed 7 --dir /tmp/chaos` runs it for longer
than the test suite does; a failing seed replays its plan."""

from __future__ import annotations

import argparse
import io
import random
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

from kmirror.records.control import ControlType, read_control_type
from kmirror.runtime.local_cluster import CONTROLLER_NODE_ID
from kmirror.testing.acked_writer import AckedWriter, assert_acked_mirrored_once, partition_layout
from kmirror.testing.kafka_clients import end_offsets, produce_delivered, watermarks
from kmirror.testing.mirror_clusters import clusters_up, create_mirror, describe, wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror
from kmirror.testing.segments import log_batches
from kmirror.testing.transactional_writer import (
    TransactionalWriter,
    assert_committed_exactly,
    assert_whole_or_absent,
)

T = TypeVar("T")

TOPIC = "orders"
TXN_TOPIC = "payments"
TOPICS = (TOPIC, TXN_TOPIC)
PARTITIONS = 3
BROKERS = (1, 2, 3)
MIRROR = "m"
CLUSTERS = ("source", "destination")
# 3-broker settings: failures detected in about 3 s, replication factor 3 for every topic.
REPLICATED_CLUSTER = {
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "3000",
    "replica.lag.time.max.ms": "3000",
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "5",
}
# (kind, on the controller, weight); mirror-pause only at the destination.
FAULT_KINDS = (("kill9", False, 4), ("pause", False, 3), ("kill9", True, 1), ("pause", True, 1), ("crash", False, 1),
               ("mirror-pause", False, 1))
WHOLE_CLUSTER = ("crash", "mirror-pause")  # the faults that name no node
CONVERGE_TIMEOUT_S = 180


@dataclass(frozen=True)
class Fault:
    at_s: float
    cluster: str
    kind: str
    node: int  # a broker id, CONTROLLER_NODE_ID, or 0 for a fault of the whole cluster
    hold_s: float

    def __str__(self) -> str:
        target = "" if self.kind in WHOLE_CLUSTER else f" node {self.node}"
        return f"{self.at_s:6.1f}s {self.cluster} {self.kind}{target} for {self.hold_s:.1f}s"


def plan_faults(seed: int, seconds: float) -> list[Fault]:
    """The faults of a run of `seconds`, in start order. Each cluster's faults never overlap,
    and each starts 1-5 s after the previous one there ended; holds of 0.5-8 s, so some outlast
    the 3 s session and replica lag timeouts (fencing, ISR shrink, elections) and some do not."""
    rng = random.Random(seed)
    faults: list[Fault] = []
    for cluster in CLUSTERS:
        kinds = [k for k in FAULT_KINDS if cluster == "destination" or k[0] != "mirror-pause"]
        at = rng.uniform(1.0, 5.0)
        while at < seconds:
            kind, on_controller, _ = rng.choices(kinds, weights=[k[2] for k in kinds])[0]
            node = 0 if kind in WHOLE_CLUSTER else CONTROLLER_NODE_ID if on_controller else rng.choice(BROKERS)
            hold = round(rng.uniform(0.5, 8.0), 1)
            faults.append(Fault(round(at, 1), cluster, kind, node, hold))
            at += hold + rng.uniform(1.0, 5.0)
    return sorted(faults, key=lambda f: (f.at_s, f.cluster))


class Nemesis:
    """Carries out a plan on the two clusters and ends every fault it began. Each cluster's
    faults run in a thread of their own, keeping their holds and the gaps between them: a
    restart that takes long delays the rest of that cluster's plan, not the other's."""

    def __init__(self, clusters: dict[str, LocalCluster], log: Callable[[str], None]) -> None:
        self.clusters = clusters
        self.log = log
        self.active: list[Fault] = []
        self.errors: list[BaseException] = []
        self.lock = threading.Lock()

    def run(self, plan: list[Fault]) -> None:
        start = time.monotonic()
        tracks = [threading.Thread(target=self.track, args=([f for f in plan if f.cluster == c], start), daemon=True)
                  for c in CLUSTERS]
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
        fault_actions(self.clusters[fault.cluster], fault)[0]()

    def end(self, fault: Fault) -> None:
        fault_actions(self.clusters[fault.cluster], fault)[1]()
        with self.lock:
            self.active.remove(fault)


def fault_actions(cluster: LocalCluster, fault: Fault) -> tuple[Callable[[], object], Callable[[], object]]:
    """What begins and what ends each kind of fault on `cluster`."""
    return {
        "kill9": (lambda: cluster.kill9(fault.node), lambda: cluster.start_node(fault.node, timeout_s=120)),
        "pause": (lambda: cluster.pause(fault.node), lambda: cluster.resume(fault.node)),
        "crash": (cluster.crash, cluster.start_all),
        "mirror-pause": (lambda: mirror_command(cluster, "--pause"), lambda: mirror_command(cluster, "--resume")),
    }[fault.kind]


def mirror_command(dest: LocalCluster, action: str) -> None:
    """`kmirror mirrors <action>` of every mirrored topic, retried while the destination's controller or
    a coordinator is moving (the command then fails with a retriable error)."""
    wait_until(lambda: kmirror("mirrors", "--bootstrap-server", dest.bootstrap, action, "--topic", "|".join(TOPICS),
                               check=False, timeout=60).returncode == 0,
               f"kmirror mirrors {action}", timeout_s=CONVERGE_TIMEOUT_S)


def retry(condition: Callable[[], T], what: str) -> T:
    """Metadata or a broker is briefly unavailable after a fault: an exception is "not yet"."""
    return wait_until(condition, what, timeout_s=CONVERGE_TIMEOUT_S, retry_on=(Exception,))


def mirror_rows(bootstrap: str) -> dict[tuple[str, int], tuple[int, int, int, str]]:
    """(topic, partition) -> (source offset, destination offset, lag, state)."""
    return {(t, p): row for (m, t, p), row in describe(bootstrap).items() if m == MIRROR}


def mirror_states(bootstrap: str) -> set[str]:
    rows = mirror_rows(bootstrap)
    return {row[3] for row in rows.values()} if len(rows) == len(TOPICS) * PARTITIONS else set()


def fully_in_sync(cluster: LocalCluster) -> bool:
    return all(len(isr) == len(BROKERS) for topic in TOPICS
               for _, _, isr in partition_layout(cluster.bootstrap, topic).values())


def source_batches(source: LocalCluster) -> dict[tuple[str, int], list[tuple[int, bytes]]]:
    out = {}
    for topic in TOPICS:
        leaders = partition_layout(source.bootstrap, topic)
        out.update({(topic, p): log_batches(source, topic, p, leaders[p][0]) for p in range(PARTITIONS)})
    return out


def replicas_identical(clusters: list[LocalCluster], expected: dict[tuple[str, int], list[tuple[int, bytes]]]) -> bool:
    return all(log_batches(c, topic, p, n) == batches for c in clusters for (topic, p), batches in expected.items()
               for n in BROKERS)


def set_up(source: LocalCluster, dest: LocalCluster, work: Path) -> None:
    for topic in TOPICS:
        kmirror("topics", "--bootstrap-server", source.bootstrap, "--create", "--topic", topic, "--partitions",
                str(PARTITIONS), "--replication-factor", "3", "--config", "min.insync.replicas=2")
    retry(lambda: fully_in_sync(source), "source partitions fully in sync")
    create_mirror(dest, source, MIRROR, "|".join(TOPICS), work / "mirror.properties")
    retry(lambda: mirror_states(dest.bootstrap) == {"MIRRORING"}, "the mirror MIRRORING")


def check_source(source: LocalCluster, writer: AckedWriter, txn_writer: TransactionalWriter) -> dict[str, list[int]]:
    """Checks 1-3 at the source alone; returns its log end offsets."""
    retry(partial(fully_in_sync, source), "source: every partition fully in sync")
    expected = retry(lambda: source_batches(source), "the source leaders' batches")
    retry(lambda: replicas_identical([source], expected), "every source replica byte-identical")
    assert_acked_mirrored_once(source.bootstrap, writer, timeout_s=CONVERGE_TIMEOUT_S)
    assert_committed_exactly(source.bootstrap, txn_writer)
    return {t: retry(partial(end_offsets, source.bootstrap, t, PARTITIONS), f"{t}: source log end offsets")
            for t in TOPICS}


def check_converged(source: LocalCluster, dest: LocalCluster, writer: AckedWriter,
                    txn_writer: TransactionalWriter) -> dict[str, list[int]]:
    """Checks 1-3 of the module's docstring; returns the source's log end offsets."""
    ends = check_source(source, writer, txn_writer)
    retry(partial(fully_in_sync, dest), "destination: every partition fully in sync")
    caught_up = {(t, p): (ends[t][p], ends[t][p], 0, "MIRRORING") for t in TOPICS for p in range(PARTITIONS)}
    retry(lambda: mirror_rows(dest.bootstrap) == caught_up, "--describe: every partition MIRRORING with lag 0")
    expected = source_batches(source)
    retry(lambda: replicas_identical([source, dest], expected), "every replica of both clusters byte-identical")
    assert_acked_mirrored_once(dest.bootstrap, writer, timeout_s=CONVERGE_TIMEOUT_S)
    assert_committed_exactly(dest.bootstrap, txn_writer)
    return ends


def writers_make_progress(writer: AckedWriter, txn_writer: TransactionalWriter) -> None:
    """Liveness once every fault has ended: both writers get writes through again (a cluster
    that stays stuck after healing fails the run, even if it loses nothing)."""
    acked, committed = len(writer.acked), len(txn_writer.committed)
    wait_until(lambda: len(writer.acked) > acked + 20 and len(txn_writer.committed) > committed + 3,
               "both writers to get writes through after the faults", timeout_s=CONVERGE_TIMEOUT_S,
               seen=lambda: (len(writer.acked) - acked, len(txn_writer.committed) - committed,
                             sorted({str(e) for e in writer.failed})[:3], txn_writer.errors[-3:]))


def fail_over(dest: LocalCluster) -> None:
    """`--remove` of both topics, then every partition STOPPED."""
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--remove", "--topic", "|".join(TOPICS))
    retry(lambda: mirror_states(dest.bootstrap) == {"STOPPED"}, "every partition STOPPED")


def write_after_failover(dest: LocalCluster, ends: dict[str, list[int]]) -> None:
    """Check 4's write: a producer's records land right after each MIRROR_PID_RESET marker,
    which is at `ends` (the mirrored log end)."""
    for topic in TOPICS:
        delivered = produce_delivered({"bootstrap.servers": dest.bootstrap, "enable.idempotence": True, "acks": "all"},
                                      topic, [(p, b"after", b"written at the destination") for p in range(PARTITIONS)])
        assert sorted(delivered) == [(p, ends[topic][p] + 1) for p in range(PARTITIONS)], (topic, delivered, ends)


def crash_source_and_fail_over(source: LocalCluster, dest: LocalCluster, log: Callable[[str], None]) -> None:
    """The disaster: every source node killed at once, the destination failed over without
    it, then the source started again (its writers carry on)."""
    source.crash()
    log("disaster: every source node killed; failing over")
    started = time.monotonic()
    fail_over(dest)
    log(f"disaster: every partition STOPPED {time.monotonic() - started:.1f} s after --remove")
    source.start_all()
    log("disaster: the source started again")


def check_disaster_copy(source: LocalCluster, dest: LocalCluster, txn_writer: TransactionalWriter) -> dict[str, list[int]]:
    """The destination's copy after a disaster failover (the module's docstring); returns the
    offsets of its MIRROR_PID_RESET markers."""
    retry(partial(fully_in_sync, dest), "destination: every partition fully in sync")
    source_logs = source_batches(source)
    dest_leaders = {t: partition_layout(dest.bootstrap, t) for t in TOPICS}
    dest_logs = {(t, p): log_batches(dest, t, p, dest_leaders[t][p][0]) for t in TOPICS for p in range(PARTITIONS)}
    retry(lambda: replicas_identical([dest], dest_logs), "every destination replica byte-identical")
    resets: dict[str, list[int]] = {t: [] for t in TOPICS}
    for (topic, p), batches in dest_logs.items():
        *mirrored, (reset_offset, reset) = batches
        assert read_control_type(reset) == ControlType.MIRROR_PID_RESET, (topic, p, "no MIRROR_PID_RESET last")
        assert mirrored == source_logs[(topic, p)][:len(mirrored)], f"{topic}-{p}: not a prefix of the source"
        resets[topic].append(reset_offset)
        low, hw = watermarks(dest.bootstrap, topic, p)
        assert watermarks(dest.bootstrap, topic, p, "read_committed") == (low, hw), f"{topic}-{p}: LSO below HW"
    assert_whole_or_absent(dest.bootstrap, txn_writer)
    return resets


def run(source: LocalCluster, dest: LocalCluster, seed: int, seconds: float, work: Path,
        log: Callable[[str], None] = print, disaster: bool = False) -> tuple[AckedWriter, TransactionalWriter]:
    """One whole run on two started clusters: set up, write under the planned faults, check."""
    plan = plan_faults(seed, seconds)
    log(f"chaos seed {seed}, {seconds:.0f} s, {len(plan)} faults{', then a disaster' if disaster else ''}:")
    for fault in plan:
        log(f"  {fault}")
    set_up(source, dest, work)
    writer = AckedWriter(source.bootstrap, f"chaos-{seed}", TOPIC, PARTITIONS)
    txn_writer = TransactionalWriter(source.bootstrap, f"chaos-txn-{seed}", TXN_TOPIC, PARTITIONS, seed)
    writer.start()
    txn_writer.start()
    try:
        Nemesis({"source": source, "destination": dest}, log).run(plan)
        writers_make_progress(writer, txn_writer)
        if disaster:
            crash_source_and_fail_over(source, dest, log)
    finally:
        writer.finish()
        txn_writer.finish()
    log(f"{TOPIC}: acknowledged {len(writer.acked)} records, {len(writer.failed)} deliveries failed "
        f"{sorted({str(e) for e in writer.failed})[:3]}")
    log(f"{TXN_TOPIC}: {len(txn_writer.committed)} transactions committed, {len(txn_writer.aborted)} aborted, "
        f"{len(txn_writer.uncertain)} of unknown outcome; {len(txn_writer.errors)} errors met")
    if disaster:
        source_ends = check_source(source, writer, txn_writer)
        ends = check_disaster_copy(source, dest, txn_writer)
        log(f"disaster copy: MIRROR_PID_RESET at {ends} (source log ends {source_ends}), a byte-identical prefix "
            "of the source on every replica, every transaction whole or absent")
    else:
        ends = check_converged(source, dest, writer, txn_writer)
        log(f"converged: source log end offsets {ends}, every replica byte-identical, every acknowledged record "
            "once, every committed transaction whole")
        fail_over(dest)
    write_after_failover(dest, ends)
    log("failover: every partition STOPPED and writable after its MIRROR_PID_RESET")
    if disaster:
        fail_back(source, dest, seed, seconds / 2, work, log)
    return writer, txn_writer


def fail_back(source: LocalCluster, dest: LocalCluster, seed: int, seconds: float, work: Path,
              log: Callable[[str], None]) -> None:
    """After a disaster failover: the old source mirrors the destination back (a mirror of the
    same name, towards the destination) while new writers write at the destination and a
    second plan injects faults with the roles swapped; then the old source must converge with
    the destination (checks 1-3 the other way round: its own unmirrored tail is truncated)."""
    plan = plan_faults(seed + 1, seconds)
    log(f"failback with roles swapped (source = the destination), {len(plan)} faults:")
    for fault in plan:
        log(f"  {fault}")
    writer = AckedWriter(dest.bootstrap, f"failback-{seed}", TOPIC, PARTITIONS)
    txn_writer = TransactionalWriter(dest.bootstrap, f"failback-txn-{seed}", TXN_TOPIC, PARTITIONS, seed + 1)
    writer.start()
    txn_writer.start()
    try:
        create_mirror(source, dest, MIRROR, "|".join(TOPICS), work / "failback.properties")
        Nemesis({"source": dest, "destination": source}, log).run(plan)
        writers_make_progress(writer, txn_writer)
    finally:
        writer.finish()
        txn_writer.finish()
    log(f"failback writers: {len(writer.acked)} records acknowledged, {len(txn_writer.committed)} transactions "
        f"committed, {len(txn_writer.aborted)} aborted")
    ends = check_converged(dest, source, writer, txn_writer)
    log(f"failback converged: log end offsets {ends} at both ends, every replica byte-identical, every record "
        "acknowledged by the destination once at the old source, every committed transaction whole")


def clusters_in(work: Path) -> tuple[LocalCluster, LocalCluster]:
    source = LocalCluster(dir=work / "source", port=free_port_block(3), nodes=3, overrides=dict(REPLICATED_CLUSTER))
    dest = LocalCluster(dir=work / "dest", port=free_port_block(3), nodes=3,
                        overrides={**REPLICATED_CLUSTER, "mirror.metadata.refresh.interval.ms": "1000"})
    return source, dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kmirror.testing.chaos", description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120, help="how long faults are injected (default 120)")
    parser.add_argument("--seed", type=int, default=None, help="the plan's seed (default: random, printed)")
    parser.add_argument("--disaster", action="store_true",
                        help="kill the whole source at the end and fail over without it")
    parser.add_argument("--dir", type=Path, default=None, help="where the clusters live (default: a new temp dir)")
    args = parser.parse_args(argv)
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)  # progress shows as it happens, also in a file
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    work = args.dir or Path(tempfile.mkdtemp(prefix="kmirror-chaos-"))
    source, dest = clusters_in(work)
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
