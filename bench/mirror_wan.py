"""Cluster Mirroring across a slow link: throughput by round trip and by the destination's fetch
settings (KIP-1279's system test "Measure replication throughput and latency across WAN").

A 1-node source reaches the destination only through a link proxy (`kmirror.testing.link`)
that adds half of each round trip each way (pipelined: it costs round trips, not bandwidth).
The source holds one copy of a 3-partition lz4 topic of `--mb` MB of ~1 KiB JSON records per
round trip. For each destination setting a new 1-node destination mirrors, for each round trip
in turn, its copy of the topic: the time from `kmirror mirrors --add` to the first mirrored
records (the add's round trips: topic ids, leaders, epochs, connections), then the rate until
every destination log end offset equals the source's. MB are source log bytes (the batches as
stored and sent). The 0 ms round trip of each setting is the same run's baseline.

Settings: Kafka's defaults (`replica.fetch.max.bytes` 1 MiB a partition, one fetcher per source
broker), `mirror.num.replica.fetchers=3` (a fetcher, so a Fetch in flight, per partition here),
and `replica.fetch.max.bytes=8388608` (8 MiB a partition per Fetch).

    .venv/bin/python bench/mirror_wan.py [--mb 300] [--rtt-ms 0,50,200] [--plot docs/mirror_wan.png]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from kmirror.testing.link import Link
from kmirror.testing.mirror_clusters import clusters_up, create_mirror
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror

sys.path.insert(0, str(Path(__file__).parent))
from line_plot import save_line_plot  # noqa: E402
from mirror import PARTITIONS, end_offsets, fill, log_bytes, records  # noqa: E402  (bench/mirror.py)

SETTINGS = {
    "defaults": {},
    "3 fetchers": {"mirror.num.replica.fetchers": "3"},
    "8 MiB fetches": {"replica.fetch.max.bytes": str(8 << 20)},
}
CODEC = "lz4"


def mirror_time(dest: LocalCluster, topic: str, ends: list[int], timeout_s: float = 600) -> tuple[float, float, float]:
    """(seconds from `--add` to the first mirrored records, share of the records then, seconds
    from then until every destination log end offset equals the source's)."""
    probe = Consumer({"bootstrap.servers": dest.bootstrap, "group.id": "bench-probe"})
    try:
        started = time.monotonic()
        kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--add", "--mirror", "wan", "--topic", topic)
        first: tuple[float, float] | None = None
        while time.monotonic() - started < timeout_s:
            try:
                now = end_offsets(probe, topic)
            except Exception:  # the mirror topic is still being created
                now = [0] * PARTITIONS
            at = time.monotonic()
            if first is None and sum(now):
                first = (at, sum(now) / sum(ends))
            if now == ends and first is not None:
                return first[0] - started, first[1], at - first[0]
            time.sleep(0.05)
        raise SystemExit(f"{topic} not mirrored within {timeout_s} s")
    finally:
        probe.close()


Result = tuple[float, float]
"""Seconds from `--add` to the first mirrored records, and MB/s of source log from then on."""


def run(mb: int, rtts: list[float], base: Path) -> dict[tuple[str, float], Result]:
    """(setting, round trip) -> its result."""
    source = LocalCluster(dir=base / "source", port=free_port_block(1), link_port=free_port_block(2))
    out: dict[tuple[str, float], Result] = {}
    with clusters_up(source), Link(source.link_routes()) as link:
        topics = {rtt: f"events-{i}" for i, rtt in enumerate(rtts)}
        admin = AdminClient({"bootstrap.servers": source.bootstrap})
        for f in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics.values()]).values():
            f.result(30)
        pool = records(4096)
        probe = Consumer({"bootstrap.servers": source.bootstrap, "group.id": "bench-probe"})
        ends = {}
        for topic in topics.values():
            fill(source.bootstrap, topic, CODEC, mb, pool)
            ends[topic] = end_offsets(probe, topic)
        probe.close()
        sizes = {t: log_bytes(source.dir / "node-1" / "data", t) / 1e6 for t in topics.values()}
        for name, overrides in SETTINGS.items():
            dest = LocalCluster(dir=base / f"dest-{len(out)}", port=free_port_block(1), overrides=overrides)
            with clusters_up(dest):
                create_mirror(dest, source.link_bootstrap, "wan", None, base / "wan.properties")
                for rtt, topic in topics.items():
                    link.delay(rtt / 2)
                    start_s, share, steady_s = mirror_time(dest, topic, ends[topic])
                    out[(name, rtt)] = (start_s, sizes[topic] * (1 - share) / steady_s)
                    print(f"{name}, {rtt:g} ms: first records {start_s:.1f} s after --add, then "
                          f"{sizes[topic] * (1 - share):.0f} MB in {steady_s:.1f} s", flush=True)
            link.delay(0)
    return out


def plot(results: dict[tuple[str, float], Result], path: Path) -> None:
    save_line_plot(path, {name: [(rtt, rate) for (n, rtt), (_, rate) in results.items() if n == name]
                          for name in SETTINGS},
                   "round trip between the sites, ms", "mirrored, MB/s of source log",
                   f"Mirror throughput across the link ({CODEC}, {PARTITIONS} partitions)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=300, help="MB of records (uncompressed) per topic copy")
    parser.add_argument("--rtt-ms", default="0,50,200", help="comma list of round trips; 0 is the baseline")
    parser.add_argument("--plot", type=Path)
    args = parser.parse_args()
    rtts = [float(x) for x in args.rtt_ms.split(",")]
    with tempfile.TemporaryDirectory(prefix="mirror-wan-") as tmp:
        results = run(args.mb, rtts, Path(tmp))
    print("\n| setting | round trip | --add to first records s | MB/s after | vs 0 ms, same setting "
          "| vs defaults, same round trip |")
    print("|---|---:|---:|---:|---:|---:|")
    for (name, rtt), (start_s, rate) in results.items():
        zero = results.get((name, 0.0))
        vs_zero = f"{rate / zero[1]:.2f}x" if zero else "-"
        print(f"| {name} | {rtt:g} ms | {start_s:.1f} | {rate:.0f} | {vs_zero} "
              f"| {rate / results[('defaults', rtt)][1]:.2f}x |")
    if args.plot:
        plot(results, args.plot)


if __name__ == "__main__":
    main()
