"""Mirror control plane and idle data plane at width, by partition count.

Two kmirror clusters (`LocalCluster`, the test helpers): a one-node source and a destination of
`--dest-nodes` nodes. For each N of `--partitions`: a source topic of N partitions with
`--records` small records each (confluent-kafka, acks=all), a mirror on the destination, then

1. **add to caught-up**: from `kmirror mirrors --add` until `--describe` shows every partition
   MIRRORING with lag 0 and the destination log end equal to the source's;
2. **idle**: nothing is produced for `--idle-s` seconds; the CPU seconds (utime+stime from
   /proc/PID/stat) the destination nodes and the source node spend meanwhile, per partition;
3. **describe**: `kmirror mirrors --describe` of all N partitions, and with `--state FAILED`
   (no row matches), wall time of the CLI process as an operator runs it (best of 3), and the
   DescribeMirrors round trip alone through the Admin client (best of 3);
4. **load** (with `--load-mb-s R`): a producer (a process of its own, paced by the clock) writes
   R MB/s of `--record-bytes` records round robin over the N source partitions for `--load-s`
   seconds, each record carrying its send time;
   a consumer of all N destination partitions (confluent-kafka, from their end) takes each
   mirrored record's arrival time: the **end-to-end lag** of a record is arrival minus send (it
   includes the source's produce path, the mirror and the destination's consumer path). The
   source topic stamps its batches at append (`message.timestamp.type=LogAppendTime`) and the
   mirror copies those bytes, so a record's timestamp at the destination is the source's append
   time: the **mirror lag** is arrival minus that (the source's serving of the mirror, the mirror
   and the destination's consumer path; not the producer's queue or the source's Produce).
   Reported: the rates achieved, p50 / p99 / max of both lags, and the records not arrived
   within 30 s after the producer stopped;
5. **failover to writable**: from the start of `kmirror mirrors --remove` until DescribeMirrors
   (one Admin connection, asked every 0.25 s) shows every partition STOPPED and an idempotent
   producer has one record acknowledged on every partition, at offset source end + 1 (the
   MIRROR_PID_RESET control record took the source end offset).

`--sessionless` runs each N a second time with a source that keeps no fetch session
(`max.incremental.fetch.session.cache.slots=0`): every mirror Fetch lists every partition and
is answered with every partition, the same-run baseline for the idle cost.

Add-to-caught-up timings include the CLI's process start (one `--describe` per poll, polled
every 0.25 s), as an operator would see them; the failover includes the `--remove` CLI's.
`--plot FILE.png` draws idle CPU per partition and failover time against N.

    .venv/bin/python bench/mirror_scale.py [--partitions 100,1000] [--records 3] [--idle-s 30]
        [--dest-nodes 1] [--sessionless] [--out docs/benchmarks.md] [--plot docs/mirror_scale.png]
        [--load-mb-s 10 --load-s 30 --linger-ms 50 --lag-every 10 --lag-plot docs/mirror_lag_10000.png]
        [--dest-config event.loop.stall.log.ms=100 --dest-log dest.log]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing
import os
import shutil
import struct
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_END, TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer, TopicPartition

from kmirror.client.admin import Admin
from kmirror.testing.kafka_clients import end_offsets, produce_delivered
from kmirror.testing.mirror_clusters import clusters_up, create_mirror, describe, wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror

TICKS = os.sysconf("SC_CLK_TCK")
MIRROR = "scale"
TIMEOUT_S = 900


def cpu_s(pid: int) -> float:
    """utime + stime of a process (fields 14 and 15 of /proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def cluster_cpu_s(cluster: LocalCluster) -> float:
    return sum(cpu_s(cluster.pid(node)) for node in range(1, cluster.nodes + 1))


def open_fds(cluster: LocalCluster) -> int:
    """The most descriptors one node of the cluster holds (entries of /proc/PID/fd)."""
    return max(len(os.listdir(f"/proc/{cluster.pid(node)}/fd")) for node in range(1, cluster.nodes + 1))


def load_average() -> float:
    return os.getloadavg()[0]


@dataclass
class Row:
    partitions: int
    sessions: bool
    dest_nodes: int
    create_s: float
    add_s: float
    add_cpu_s: float
    idle_s: float
    idle_dest_cpu_s: float
    idle_source_cpu_s: float
    describe_s: float
    describe_filtered_s: float
    failover_s: float
    failover_cpu_s: float
    load: dict[str, float] = field(default_factory=dict)
    describe_rpc_s: float = -1.0  # -1: not measured
    load_average: tuple[float, float] = (-1.0, -1.0)
    """The machine's 1-minute load average at the start and the end of the run."""
    dest_open_fds: int = -1
    failover_stopped_s: float = -1.0
    """From `--remove` until `--describe` shows every partition STOPPED (-1: not measured)."""
    """The most file descriptors a destination node held, sampled at the end of each phase."""

    @property
    def dest_us_per_partition_s(self) -> float:
        """Destination CPU microseconds per idle partition per second."""
        return self.idle_dest_cpu_s / self.idle_s / self.partitions * 1e6

    @property
    def source_us_per_partition_s(self) -> float:
        return self.idle_source_cpu_s / self.idle_s / self.partitions * 1e6


def fill(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for p in range(partitions):
        for i in range(records):
            producer.produce(topic, value=b"v%d-%d " % (p, i) * 20, partition=p)
        producer.poll(0)
    if producer.flush(600) != 0:
        raise SystemExit("fill: records not delivered")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def produce(bootstrap: str, topic: str, n: int, mb_s: float, seconds: float, record_bytes: int, linger_ms: int,
            lag_every: int, results: multiprocessing.Queue[tuple[int, list[float], float]]) -> None:
    """The load's producer, in a process of its own (the lag consumer's process would share its
    interpreter lock): `mb_s` MB/s round robin over the `n` partitions for `seconds`, each value
    starting with its send time. Puts (records sent, acknowledgement latencies of the lag
    consumer's partitions, this process's CPU seconds) on `results` once all are delivered."""
    per_s = mb_s * 1e6 / record_bytes
    padding = b"x" * max(0, record_bytes - 8)
    acked: list[float] = []  # the source's acknowledgement latency of the sampled records (acks=1)

    def on_delivery(err: object, msg: Any) -> None:
        if err is None:
            acked.append(time.time() - struct.unpack(">d", msg.value()[:8])[0])

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": linger_ms,
                         "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 2_000_000})
    start = time.monotonic()
    sent = 0
    while (now := time.monotonic()) - start < seconds:
        # paced by the clock, every 10 ms: a late wake-up sends more, not fewer in all
        while sent < (now - start) * per_s:
            partition = sent % n
            # acknowledgement latency on the lag consumer's sample: a Python callback per
            # record would cost the producing process more than the records themselves
            producer.produce(topic, value=struct.pack(">d", time.time()) + padding, partition=partition,
                             on_delivery=on_delivery if partition % lag_every == 0 else None)
            sent += 1
        producer.poll(0)
        time.sleep(max(0.0, 0.01 - (time.monotonic() - now)))
    producer.flush(120)
    results.put((sent, acked, time.process_time()))


def load(source: LocalCluster, dest: LocalCluster, topic: str, n: int, mb_s: float, seconds: float,
         record_bytes: int, linger_ms: int = 5, lag_every: int = 1,
         series: list[tuple[float, float, float]] | None = None) -> dict[str, float]:
    """Produce `mb_s` MB/s round robin over `n` partitions of the source; the lag of each record
    at a consumer of the destination (see the module docstring). `series` gets each sampled
    record's (arrival s since the load started, mirror lag s, end-to-end lag s)."""
    consumer = Consumer({"bootstrap.servers": dest.bootstrap, "group.id": "mirror-lag", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 50, "auto.offset.reset": "latest"})
    sampled = range(0, n, lag_every)
    consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in sampled])
    deadline = time.monotonic() + 120
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.1)
    for _ in range(20):  # let the consumer resolve its end offsets before the first record
        consumer.poll(0.1)

    def expected(sent: int) -> int:
        """How many of the first `sent` round-robin records went to a sampled partition."""
        return sum(1 for p in sampled if p < sent % n) + (sent // n) * len(sampled)

    spawn = multiprocessing.get_context("spawn")  # this process runs librdkafka threads: no fork
    results: multiprocessing.Queue[tuple[int, list[float], float]] = spawn.Queue()
    producer = spawn.Process(
        target=produce, args=(source.bootstrap, topic, n, mb_s, seconds, record_bytes, linger_ms, lag_every, results),
        daemon=True)
    source_cpu0, dest_cpu0, clients_cpu0 = cpu_s(source.pid()), cluster_cpu_s(dest), time.process_time()
    t0, t0_wall = time.monotonic(), time.time()
    producer.start()
    producer_cpu = 0.0
    sent = [0]
    acked: list[float] = []
    lags: list[float] = []
    mirror_lags: list[float] = []
    done_at: float | None = None
    while True:
        messages = consumer.consume(num_messages=10_000, timeout=0.05)
        arrived = time.time()
        for m in messages:
            value = m.value()
            if m.error() is None and value is not None and len(value) >= 8:
                lags.append(arrived - struct.unpack(">d", value[:8])[0])
                kind, appended_ms = m.timestamp()
                if kind == TIMESTAMP_LOG_APPEND_TIME:
                    mirror_lags.append(arrived - appended_ms / 1000)
                    if series is not None:
                        series.append((arrived - t0_wall, mirror_lags[-1], lags[-1]))
        if done_at is None and not results.empty():
            sent[0], acked, producer_cpu = results.get()
            done_at = time.monotonic()
        elif done_at is None and producer.exitcode not in (None, 0):
            raise SystemExit(f"the load's producer failed (exit code {producer.exitcode})")
        if done_at is not None and (len(lags) >= expected(sent[0]) or time.monotonic() - done_at > 30):
            break
    elapsed = time.monotonic() - t0
    source_cpu, dest_cpu = cpu_s(source.pid()) - source_cpu0, cluster_cpu_s(dest) - dest_cpu0
    clients_cpu = time.process_time() - clients_cpu0 + producer_cpu  # the lag consumer's process and the producer's
    consumer.close()
    producer.join()
    return {"target_mb_s": mb_s, "record_bytes": record_bytes, "seconds": seconds,
            "produced_mb_s": sent[0] * record_bytes / 1e6 / seconds, "produced": sent[0], "arrived": len(lags),
            "lag_p50_s": percentile(lags, 0.5), "lag_p99_s": percentile(lags, 0.99), "lag_max_s": max(lags, default=0),
            # a record that never arrived counts as an infinite lag
            "lag_p99_all_s": percentile(lags + [math.inf] * max(0, expected(sent[0]) - len(lags)), 0.99),
            "mirror_lag_p50_s": percentile(mirror_lags, 0.5), "mirror_lag_p99_s": percentile(mirror_lags, 0.99),
            "mirror_lag_max_s": max(mirror_lags, default=0), "mirror_lag_records": len(mirror_lags),
            "linger_ms": linger_ms, "lag_partitions": len(sampled),
            "ack_p50_s": percentile(acked, 0.5), "ack_p99_s": percentile(acked, 0.99),
            "elapsed_s": elapsed, "source_cpu_s": source_cpu, "dest_cpu_s": dest_cpu, "clients_cpu_s": clients_cpu}


def states(bootstrap: str, topic: str) -> dict[int, tuple[int, int, int, str]]:
    """The topic's rows of `--describe`; none while a busy node does not answer it in time
    (the poll asks again)."""
    try:
        described = describe(bootstrap)
    except AssertionError as exc:
        print(f"describe: {str(exc).splitlines()[0][-120:]}", flush=True)
        return {}
    return {p: row for (_, t, p), row in described.items() if t == topic}


async def wait_stopped(bootstrap: str, topic: str, n: int, interval_s: float = 0.25) -> None:
    """Until DescribeMirrors shows the topic's `n` partitions STOPPED, asked every `interval_s`
    on one Admin connection (a CLI process per poll would cost the nodes' cores ~0.5 CPU-s each
    and make the poll itself the resolution)."""
    deadline = time.monotonic() + TIMEOUT_S
    async with await Admin.connect(bootstrap) as admin:
        while time.monotonic() < deadline:
            rows = await admin.describe_mirrors(topics=[topic])
            if len(rows) == n and all(d.state == "STOPPED" for d in rows):
                return
            await asyncio.sleep(interval_s)
    raise SystemExit(f"{n} partitions not STOPPED within {TIMEOUT_S} s")


def timed_describe(bootstrap: str, *extra: str) -> float:
    t0 = time.monotonic()
    out = kmirror("mirrors", "--bootstrap-server", bootstrap, "--describe", *extra)
    if out.returncode != 0:
        raise SystemExit(f"describe failed: {out.stderr}")
    return time.monotonic() - t0


def describe_rpc_s(bootstrap: str) -> float:
    """DescribeMirrors of every partition through the Admin client, without the CLI's start."""

    async def timed() -> float:
        async with await Admin.connect(bootstrap) as admin:
            await admin.describe_mirrors()  # connections and metadata first
            t0 = time.monotonic()
            await admin.describe_mirrors()
            return time.monotonic() - t0

    return min(asyncio.run(timed()) for _ in range(3))


def run(n: int, records: int, base: Path, idle_s: float, dest_nodes: int, sessions: bool,
        load_args: tuple[float, float, int, int, int] | None = None,
        lag_series: list[tuple[float, float, float]] | None = None, dest_config: dict[str, str] | None = None) -> Row:
    source = LocalCluster(dir=base / "source", port=free_port_block(),
                          overrides={} if sessions else {"max.incremental.fetch.session.cache.slots": "0"})
    dest = LocalCluster(dir=base / "destination", port=free_port_block(), nodes=dest_nodes,
                        overrides=dest_config or {})
    topic = f"wide-{n}"
    load0 = load_average()
    fds: list[int] = []
    with clusters_up(source, dest):
        t0 = time.monotonic()
        kmirror("topics", "--bootstrap-server", source.bootstrap, "--create", "--topic", topic,
                "--partitions", str(n), "--replication-factor", "1", "--config", "message.timestamp.type=LogAppendTime")
        create_s = time.monotonic() - t0
        if records:
            fill(source.bootstrap, topic, n, records)
        ends = end_offsets(source.bootstrap, topic, n) if records else [0] * n
        create_mirror(dest, source, MIRROR, None, base / "mirror.properties")

        def caught_up() -> bool:
            rows = states(dest.bootstrap, topic)
            return len(rows) == n and all(rows[p] == (ends[p], ends[p], 0, "MIRRORING") for p in range(n))

        cpu0, t0 = cluster_cpu_s(dest), time.monotonic()
        kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--add", "--mirror", MIRROR, "--topic", topic)
        wait_until(caught_up, f"{n} partitions MIRRORING with lag 0", timeout_s=TIMEOUT_S)
        add_s, add_cpu = time.monotonic() - t0, cluster_cpu_s(dest) - cpu0
        fds.append(open_fds(dest))

        # Idle: the mirror fetchers wait on the source with nothing to copy.
        dest0, source0, t0 = cluster_cpu_s(dest), cpu_s(source.pid()), time.monotonic()
        time.sleep(idle_s)
        idle = time.monotonic() - t0
        idle_dest, idle_source = cluster_cpu_s(dest) - dest0, cpu_s(source.pid()) - source0

        describe_s = min(timed_describe(dest.bootstrap) for _ in range(3))
        filtered_s = min(timed_describe(dest.bootstrap, "--state", "FAILED") for _ in range(3))
        rpc_s = describe_rpc_s(dest.bootstrap)
        print(f"{n} partitions: add {add_s:.1f} s ({add_cpu:.2f} CPU-s), idle {idle:.0f} s: dest {idle_dest:.2f} "
              f"CPU-s, source {idle_source:.2f} CPU-s; describe {describe_s:.2f} s, --state {filtered_s:.2f} s, "
              f"DescribeMirrors {rpc_s:.2f} s", flush=True)
        loaded: dict[str, float] = {}
        if load_args is not None:
            loaded = load(source, dest, topic, n, *load_args, series=lag_series)
            print(f"load {n}: {loaded}", flush=True)
            fds.append(open_fds(dest))
            ends = end_offsets(source.bootstrap, topic, n)
            wait_until(caught_up, f"{n} partitions caught up after the load", timeout_s=TIMEOUT_S)

        cpu0, t0 = cluster_cpu_s(dest), time.monotonic()
        kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--remove", "--topic", topic)
        asyncio.run(wait_stopped(dest.bootstrap, topic, n))
        stopped_s = time.monotonic() - t0
        print(f"{n} partitions: STOPPED after {stopped_s:.1f} s", flush=True)
        delivered = produce_delivered({"bootstrap.servers": dest.bootstrap, "enable.idempotence": True}, topic,
                                      [(p, None, b"written after failover") for p in range(n)],
                                      flush_timeout_s=TIMEOUT_S)
        failover_s, failover_cpu = time.monotonic() - t0, cluster_cpu_s(dest) - cpu0
        fds.append(open_fds(dest))
        print(f"{n} partitions: failover {failover_s:.1f} s ({failover_cpu:.2f} CPU-s), destination fds {fds}",
              flush=True)
        if sorted(delivered) != [(p, ends[p] + 1) for p in range(n)]:
            raise SystemExit(f"failover: records not after MIRROR_PID_RESET: {sorted(delivered)[:5]}...")
    return Row(n, sessions, dest_nodes, create_s, add_s, add_cpu, idle, idle_dest, idle_source, describe_s,
               filtered_s, failover_s, failover_cpu, loaded, rpc_s, (load0, load_average()), max(fds), stopped_s)


def table(rows: list[Row]) -> str:
    lines = ["| partitions | dest nodes | fetch sessions | add to caught-up s | dest CPU-s | idle dest CPU us/partition/s "
             "| idle source CPU us/partition/s | describe s | describe --state s | DescribeMirrors s | failover to writable s "
             "| dest CPU-s | load avg start/end |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r.partitions} | {r.dest_nodes} | {'yes' if r.sessions else 'no'} | {r.add_s:.1f} | {r.add_cpu_s:.1f} "
              f"| {r.dest_us_per_partition_s:.1f} | {r.source_us_per_partition_s:.1f} | {r.describe_s:.2f} "
              f"| {r.describe_filtered_s:.2f} | {f'{r.describe_rpc_s:.2f}' if r.describe_rpc_s >= 0 else '-'} | {r.failover_s:.1f} | {r.failover_cpu_s:.1f} "
              f"| {_load_average(r)} |" for r in rows]
    return "\n".join(lines)


def _load_average(r: Row) -> str:
    start, end = r.load_average
    return "-" if start < 0 else f"{start:.1f}/{end:.1f}"


def plot(rows: list[Row], path: Path) -> None:
    # matplotlib is imported here only: the bench runs without a display and most runs plot nothing
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (cpu_ax, failover_ax) = plt.subplots(1, 2, figsize=(11, 4.2))
    for sessions, style in ((True, "o-"), (False, "s--")):
        chosen = sorted((r for r in rows if r.sessions == sessions and r.dest_nodes == 1), key=lambda r: r.partitions)
        if not chosen:
            continue
        label = "fetch sessions" if sessions else "sessionless source"
        xs = [r.partitions for r in chosen]
        cpu_ax.plot(xs, [r.dest_us_per_partition_s for r in chosen], style, label=f"destination, {label}")
        cpu_ax.plot(xs, [r.source_us_per_partition_s for r in chosen], style, alpha=0.5, label=f"source, {label}")
        if sessions:
            failover_ax.plot(xs, [r.failover_s for r in chosen], "o-", label="failover to writable, wall s")
            failover_ax.plot(xs, [r.failover_cpu_s for r in chosen], "o--", label="failover, destination CPU-s")
            failover_ax.plot(xs, [r.add_s for r in chosen], "^:", label="add to caught-up, wall s")
    cpu_ax.set(xscale="log", xlabel="mirrored partitions", ylabel="CPU us per idle partition per second",
               title="Steady CPU of idle mirrored partitions")
    failover_ax.set(xscale="log", yscale="log", xlabel="mirrored partitions", ylabel="seconds",
                    title="Failover and add, one-node clusters")
    failover_ax.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    for ax in (cpu_ax, failover_ax):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def lag_plot(series: list[tuple[float, float, float]], row: Row, path: Path) -> None:
    """Per second of arrival: p50 and p99 of the mirror lag and of the end-to-end lag."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seconds: dict[int, tuple[list[float], list[float]]] = {}
    for arrived, mirror, end_to_end in series:
        mirror_lags, end_to_end_lags = seconds.setdefault(int(arrived), ([], []))
        mirror_lags.append(mirror)
        end_to_end_lags.append(end_to_end)
    xs = sorted(seconds)
    fig, ax = plt.subplots(figsize=(9, 4.2))
    for index, label, style in ((0, "mirror lag (from the source's append)", "-"), (1, "end-to-end lag (from send)", "--")):
        for q, width in ((0.5, 1.0), (0.99, 2.0)):
            ax.plot(xs, [percentile(seconds[x][index], q) for x in xs], style, linewidth=width,
                    label=f"{label}, p{round(q * 100)}")
    load = row.load
    ax.axvline(load["seconds"], color="grey", linestyle=":", label="producer stops and flushes its backlog")
    ax.axhline(1.0, color="red", alpha=0.4, label="goal: p99 < 1 s")
    ax.set(xlabel="seconds since the load started (arrival at the destination consumer)", ylabel="lag, s",
           title=f"{row.partitions:,} mirrored partitions, {load['produced_mb_s']:.1f} MB/s produced "
                 f"({int(load['record_bytes'])}-byte records)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", default="100,1000", help="comma-separated partition counts")
    ap.add_argument("--records", type=int, default=3, help="records per source partition")
    ap.add_argument("--idle-s", type=float, default=30, help="seconds of idle CPU measurement")
    ap.add_argument("--dest-nodes", type=int, default=1, help="brokers of the destination cluster")
    ap.add_argument("--sessionless", action="store_true",
                    help="also run each count against a source without fetch sessions")
    ap.add_argument("--load-mb-s", type=float, default=0, help="after idle: produce this many MB/s (0: no load)")
    ap.add_argument("--load-s", type=float, default=30, help="seconds of load")
    ap.add_argument("--record-bytes", type=int, default=1000, help="record size of the load")
    ap.add_argument("--linger-ms", type=int, default=5, help="the load producer's linger.ms")
    ap.add_argument("--lag-every", type=int, default=1,
                    help="the lag consumer reads every K-th partition (1: all of them)")
    ap.add_argument("--json", type=Path, default=None, help="append each row as a JSON line")
    ap.add_argument("--plot", type=Path, default=None, help="draw the rows of --json (or this run) as a PNG")
    ap.add_argument("--lag-plot", type=Path, default=None,
                    help="with --load-mb-s: draw the lag over the load of the last partition count as a PNG")
    ap.add_argument("--dest-config", action="append", default=[], metavar="KEY=VALUE",
                    help="a destination broker config (repeatable), e.g. event.loop.stall.log.ms=50")
    ap.add_argument("--dest-log", type=Path, default=None,
                    help="copy the last run's destination node-1 server.log here")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    dest_config = dict(kv.split("=", 1) for kv in args.dest_config)
    rows: list[Row] = []
    for n in (int(x) for x in args.partitions.split(",") if x):
        for sessions in (True, False) if args.sessionless else (True,):
            with tempfile.TemporaryDirectory() as d:
                load_args = ((args.load_mb_s, args.load_s, args.record_bytes, args.linger_ms, args.lag_every)
                             if args.load_mb_s else None)
                series: list[tuple[float, float, float]] = []
                rows.append(run(n, args.records, Path(d), args.idle_s, args.dest_nodes, sessions, load_args, series,
                                dest_config))
                if args.dest_log:
                    shutil.copyfile(Path(d) / "destination" / "node-1" / "server.log", args.dest_log)
            print(rows[-1], flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(asdict(rows[-1])) + "\n")
    if args.json and args.json.exists():
        rows = [Row(**json.loads(line)) for line in args.json.read_text().splitlines() if line.strip()]
    print(table(rows))
    if args.lag_plot and rows[-1].load:
        lag_plot(series, rows[-1], args.lag_plot)
    if args.plot:
        plot(rows, args.plot)
    if args.out:
        with open(args.out, "a") as f:
            f.write(f"\n### mirror_scale, {time.strftime('%Y-%m-%d')}\n\n{table(rows)}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
