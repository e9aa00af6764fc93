"""Consumer group offset sync across a slow link: how long after a commit at the source the
destination holds it, with many groups and a round trip between the sites.

Two single-node clusters; the destination reaches the source only through a link proxy
(`kmirror.testing.link`) that delays every chunk by half of `--rtt-ms` each way. A 4-partition
topic is mirrored, `--groups` consumer groups commit at the source (kmirror's admin, generation
-1), and the mirror's metadata sync runs after each data plane pass
(`mirror.metadata.refresh.interval.ms=1000`). Per round every group commits a new offset on
every partition at the source at once; the lag is the time until the destination's
coordinator answers that offset for every group (polled every 0.25 s: a sample of the groups
first, then all of them). The first round is the mirror's first sync of every group.

With the default 1 s refresh interval a sync follows a commit within one to two seconds on a
LAN; the 0 ms round trip of the same run is the baseline of each group count.

    .venv/bin/python bench/group_sync.py [--groups 100,1000,3000] [--rtt-ms 0,50,200] [--rounds 3]
        [--plot docs/group_sync.png]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from line_plot import save_line_plot

from kmirror.client.admin import Admin
from kmirror.client.groups import OffsetAndMetadata
from kmirror.testing.kafka_clients import produce_delivered
from kmirror.testing.link import Link
from kmirror.testing.mirror_clusters import clusters_up, create_mirror, partition_states, wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror
from kmirror.types import TopicPartition

TOPIC = "events"
PARTITIONS = 4
POLL_S = 0.25
SAMPLE = 16


def group_ids(n: int) -> list[str]:
    return [f"app-{i:05d}" for i in range(n)]


async def commit_all(bootstrap: str, groups: list[str], offset: int) -> None:
    offsets = {TopicPartition(TOPIC, p): OffsetAndMetadata(offset) for p in range(PARTITIONS)}
    async with await Admin.connect(bootstrap) as admin:
        for start in range(0, len(groups), 64):
            results = await asyncio.gather(*(admin.alter_consumer_group_offsets(g, offsets)
                                             for g in groups[start:start + 64]))
            failed = [e for r in results for e in r.values() if e is not None]
            assert not failed, failed[:3]


async def synced(admin: Admin, groups: list[str], offset: int) -> list[str]:
    """The groups whose every partition's offset at the destination is `offset`."""
    answers = await admin.list_consumer_groups_offsets(groups)
    return [g for g, got in ((g, answers[g]) for g in groups)
            if isinstance(got, dict) and len(got) == PARTITIONS and all(om.offset == offset for om in got.values())]


async def wait_synced(bootstrap: str, groups: list[str], offset: int, timeout_s: float = 600) -> float:
    started = time.monotonic()
    waiting = list(groups)
    async with await Admin.connect(bootstrap) as admin:
        while waiting:
            if time.monotonic() - started > timeout_s:
                raise AssertionError(f"{len(waiting)} groups not synced after {timeout_s} s")
            sample = waiting[:: max(1, len(waiting) // SAMPLE)]
            if set(await synced(admin, sample, offset)) == set(sample):
                done = set(await synced(admin, waiting, offset))
                waiting = [g for g in waiting if g not in done]
                if not waiting:
                    break
            await asyncio.sleep(POLL_S)
    return time.monotonic() - started


def run(groups_n: int, rtt_ms: float, rounds: int) -> list[float]:
    groups = group_ids(groups_n)
    with tempfile.TemporaryDirectory(prefix="group-sync-") as tmp:
        base = Path(tmp)
        source = LocalCluster(dir=base / "source", port=free_port_block(1), link_port=free_port_block(2))
        dest = LocalCluster(dir=base / "dest", port=free_port_block(1),
                            overrides={"mirror.metadata.refresh.interval.ms": "1000"})
        with clusters_up(source, dest), Link(source.link_routes(), delay_ms=rtt_ms / 2):
            kmirror("topics", "--bootstrap-server", source.bootstrap, "--create", "--topic", TOPIC,
                    "--partitions", str(PARTITIONS), "--replication-factor", "1")
            produce_delivered({"bootstrap.servers": source.bootstrap}, TOPIC,
                              [(p, b"k", b"v") for p in range(PARTITIONS) for _ in range(rounds + 1)])
            asyncio.run(commit_all(source.bootstrap, groups, 1))
            create_mirror(dest, source.link_bootstrap, "m", TOPIC, base / "mirror.properties")
            wait_until(lambda: set(partition_states(dest.bootstrap, TOPIC).values()) == {"MIRRORING"},
                       "the mirror running")
            lags = [asyncio.run(wait_synced(dest.bootstrap, groups, 1))]
            for r in range(2, rounds + 1):
                asyncio.run(commit_all(source.bootstrap, groups, r))
                lags.append(asyncio.run(wait_synced(dest.bootstrap, groups, r)))
    return lags


def plot(results: dict[tuple[int, float], list[float]], path: Path) -> None:
    save_line_plot(path, {f"{rtt:g} ms round trip": [(g, statistics.median(lags[1:] or lags))
                                                      for (g, r), lags in results.items() if r == rtt]
                          for rtt in sorted({r for _, r in results})},
                   "consumer groups at the source", "commit at the source to the destination, s",
                   "Group offset sync across the link (median of rounds)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", default="500", help="comma list of group counts")
    parser.add_argument("--rtt-ms", default="0,50", help="comma list of round trips; 0 is the same-run baseline")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--plot", type=Path, help="draw the lag against the group count, per round trip")
    args = parser.parse_args()
    results: dict[tuple[int, float], list[float]] = {}
    for groups in map(int, args.groups.split(",")):
        for rtt in map(float, args.rtt_ms.split(",")):
            results[(groups, rtt)] = lags = run(groups, rtt, args.rounds)
            print(f"groups={groups} rtt_ms={rtt:g}: first sync {lags[0]:.1f} s, then "
                  f"{', '.join(f'{x:.1f}' for x in lags[1:])} s", flush=True)
    print("\n| groups | round trip | first sync s | commit to destination s (median) | vs 0 ms round trip |")
    print("|---:|---:|---:|---:|---:|")
    for (groups, rtt), lags in results.items():
        lag = statistics.median(lags[1:] or lags)
        base = results.get((groups, 0.0))
        ratio = f"{lag / statistics.median(base[1:] or base):.1f}x" if base else "-"
        print(f"| {groups} | {rtt:g} ms | {lags[0]:.1f} | {lag:.1f} | {ratio} |")
    if args.plot:
        plot(results, args.plot)


if __name__ == "__main__":
    main()
