"""How long `kmirror mirrors --add` takes to start mirroring across a slow link, by the number
of topics added together and the round trip between the sites (KIP-1279's system test
"Measure replication throughput and latency across WAN", the latency side).

A 1-node source reaches a 1-node destination only through a link proxy
(`kmirror.testing.link`) that adds half of each round trip each way. For each round trip and
each count N, a new mirror gets N new one-partition source topics of one record each with one
`--add` (a regex), and the clock runs from the command until every topic's record is at the
destination (its log end offset is 1). What the time holds: the command itself (a process
start), AddTopicsToMirror's source lookup (topic ids, partition counts, configs), the topics'
creation at the destination, and the mirror leaders' steps (source cluster id, topic ids,
last mirrored epochs, a fetcher connection, the first Fetch). The 0 ms round trip is the same
run's baseline; "round trips" is (time - time at 0 ms) / round trip. Each point is the median of
`--repeat` adds (each of new topics, to a new mirror), after one unmeasured add that warms up
the command and the connections.

    .venv/bin/python bench/mirror_add_wan.py [--topics 1,100] [--rtt-ms 0,50,200] [--repeat 3]
                                             [--plot docs/mirror_add_wan.png] [--compare OLD_RUN.txt]

`--compare` draws another run's table (this bench's output, e.g. of an older tree run with
its `src` on PYTHONPATH) beside this one's, as "before".
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

from kmirror.client.admin import LATEST_TIMESTAMP, Admin, NewTopic
from kmirror.testing.link import Link
from kmirror.testing.mirror_clusters import clusters_up, create_mirror
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror
from kmirror.types import TopicPartition

sys.path.insert(0, str(Path(__file__).parent))
from line_plot import save_line_plot  # noqa: E402


async def mirrored(admin: Admin, topics: list[str]) -> int:
    """How many of `topics` have their record at the destination."""
    try:
        ends = await admin.list_offsets({TopicPartition(t, 0): LATEST_TIMESTAMP for t in topics})
    except Exception:  # some topics not created yet
        return 0
    return sum(ends[TopicPartition(t, 0)].offset >= 1 for t in topics)


async def time_to_mirror(dest: LocalCluster, mirror: str, prefix: str, topics: list[str],
                         timeout_s: float = 600) -> float:
    async with await Admin.connect(dest.bootstrap) as admin:
        started = time.monotonic()
        kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--add", "--mirror", mirror, "--topic", f"{prefix}.*")
        while await mirrored(admin, topics) < len(topics):
            if time.monotonic() - started > timeout_s:
                raise SystemExit(f"{mirror}: not every topic mirrored within {timeout_s} s")
            await asyncio.sleep(0.02)
        return time.monotonic() - started


def run(counts: list[int], rtts: list[float], repeat: int, base: Path) -> dict[tuple[int, float], float]:
    """(topics added, round trip) -> median seconds from `--add` until every topic is mirrored."""
    source = LocalCluster(dir=base / "source", port=free_port_block(1), link_port=free_port_block(2))
    dest = LocalCluster(dir=base / "dest", port=free_port_block(1))
    with clusters_up(source, dest), Link(source.link_routes()) as link:
        rounds = [(1, 0.0, -1)] + [(n, rtt, r) for r in range(repeat) for n in counts for rtt in rtts]
        plan = {key: [f"add{key[0]}-rtt{key[1]:g}-r{key[2]}-{i:04d}" for i in range(key[0])] for key in rounds}

        async def create() -> None:
            async with await Admin.connect(source.bootstrap) as admin:
                await admin.create_topics([NewTopic(t, 1, 1) for topics in plan.values() for t in topics])

        asyncio.run(create())
        producer = Producer({"bootstrap.servers": source.bootstrap, "linger.ms": 5})
        for topics in plan.values():
            for t in topics:
                producer.produce(t, b"first")
        assert producer.flush(60) == 0
        times: dict[tuple[int, float], list[float]] = {}
        for (n, rtt, r), topics in plan.items():
            mirror = f"m{n}-{rtt:g}-{r}"
            link.delay(0)
            create_mirror(dest, source.link_bootstrap, mirror, None, base / f"{mirror}.properties")
            link.delay(rtt / 2)
            took = asyncio.run(time_to_mirror(dest, mirror, f"add{n}-rtt{rtt:g}-r{r}-", topics))
            if r >= 0:  # r -1: the warm-up
                times.setdefault((n, rtt), []).append(took)
                print(f"{n} topics, {rtt:g} ms: every topic mirrored {took:.2f} s after --add", flush=True)
        link.delay(0)
    return {key: statistics.median(values) for key, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", default="1,100", help="comma list of topic counts added together")
    parser.add_argument("--rtt-ms", default="0,50,200", help="comma list of round trips; 0 is the baseline")
    parser.add_argument("--repeat", type=int, default=3, help="adds per point (the median is reported)")
    parser.add_argument("--plot", type=Path)
    parser.add_argument("--compare", type=Path, help="another run's output, drawn as 'before'")
    args = parser.parse_args()
    counts = [int(x) for x in args.topics.split(",")]
    rtts = [float(x) for x in args.rtt_ms.split(",")]
    with tempfile.TemporaryDirectory(prefix="mirror-add-wan-") as tmp:
        results = run(counts, rtts, args.repeat, Path(tmp))
    print("\n| topics added | round trip | --add to every topic mirrored, s | round trips over 0 ms |")
    print("|---:|---:|---:|---:|")
    for (n, rtt), took in results.items():
        zero = results.get((n, 0.0))
        trips = f"{(took - zero) * 1000 / rtt:.1f}" if zero is not None and rtt else "-"
        print(f"| {n} | {rtt:g} ms | {took:.2f} | {trips} |")
    if args.plot:
        plot(args.plot, results, None if args.compare is None else read_table(args.compare))


def plot(path: Path, results: dict[tuple[int, float], float], before: dict[tuple[int, float], float] | None) -> None:
    runs = {"": results} if before is None else {"before: ": before, "after: ": results}
    series = {f"{run}{n} topic{'s' if n > 1 else ''}": [(rtt, t) for (k, rtt), t in measured.items() if k == n]
              for run, measured in runs.items() for n in sorted({k for k, _ in measured})}
    save_line_plot(path, series, "round trip between the sites, ms", "seconds from --add to every topic mirrored",
                   "Starting a mirror across the link")


def read_table(path: Path) -> dict[tuple[int, float], float]:
    """The results of this bench's table in an earlier run's output."""
    out: dict[tuple[int, float], float] = {}
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].isdigit() and cells[1].endswith(" ms"):
            out[(int(cells[0]), float(cells[1][:-3]))] = float(cells[2])
    return out


if __name__ == "__main__":
    main()
