"""`kmirror demo`: the disaster-recovery story, end to end, on this machine.

Two kmirror clusters, A (production) and B (disaster recovery). A producer writes click
events to A; a Spark Structured Streaming job reads them from A (`format("kmirror")`) and
writes a cleaned copy and per-user aggregates to Parquet. B mirrors A (KIP-1279): same
offsets, same bytes, and the mirror topic refuses producers. `kmirror verify` proves B a
byte-exact prefix of A as a Spark job and writes an HTML report. Disaster: the Spark job and
A's node are killed (kill -9). The operator reads what failover loses (the mirror's lag),
fails over on B, and restarts the same Spark job on B with the same checkpoint, only the
bootstrap servers changed; its output is checked exactly-once against an uninterrupted run.
Failback: A comes back, mirrors B under the same mirror name (cutting the records it alone
had), the two logs end byte-identical, and the job moves back to A.
"""

from __future__ import annotations

import asyncio
import shlex
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from kmirror.client.admin import LATEST_TIMESTAMP, Admin, NewTopic
from kmirror.client.errors import KafkaClientError, KafkaError
from kmirror.client.producer import Producer
from kmirror.records.batch import iter_batches
from kmirror.records.builder import SimpleRecord
from kmirror.records.compression import CompressionType
from kmirror.runtime.local_cluster import down
from kmirror.testing.processes import LocalCluster
from kmirror.types import TopicPartition

TOPIC = "clicks"
PARTITIONS = 3
MIRROR = "dr"
T = TypeVar("T")
console = Console(highlight=False)


def run_demo(base: Path, port: int) -> int:
    started = time.monotonic()
    if base.exists():
        for name in ("A", "B"):
            if (base / name).exists():
                down(base / name)
        shutil.rmtree(base)
    base.mkdir(parents=True)
    a = LocalCluster(dir=base / "A", port=port, overrides={"mirror.metadata.refresh.interval.ms": "500"})
    b = LocalCluster(dir=base / "B", port=port + 1, overrides={"mirror.metadata.refresh.interval.ms": "500"})
    try:
        _story(base, a, b)
    except (KafkaClientError, AssertionError, RuntimeError) as exc:
        console.print(f"[red]Error: {exc}[/red]")
        return 1
    finally:
        with _step("stopping both clusters"):
            for cluster in (b, a):
                try:
                    cluster.down()
                except AssertionError:
                    pass
    console.print(f"\n[bold green]done in {time.monotonic() - started:.0f} s[/bold green]; data left in {base}")
    return 0


def _story(base: Path, a: LocalCluster, b: LocalCluster) -> None:
    with ExitStack() as stack:  # Spark stops when the story ends, however it ends
        _title(1, f"two kmirror clusters: A (production) on {a.bootstrap}, B (disaster recovery) on {b.bootstrap}")
        with _step("starting A and B (one node each: broker and controller)"):
            a.up()
            b.up()
        asyncio.run(_create_topic(a.bootstrap))
        producer = ClickProducer(a.bootstrap)
        producer.start()
        console.print(f"a producer writes click events to topic '{TOPIC}' on A ({PARTITIONS} partitions, zstd)")

        _title(2, "a Spark Structured Streaming job reads the clicks from A")
        with _step("starting Spark (local[2]; the first start takes a few seconds)"):
            spark = stack.enter_context(_spark())
        # Loaded with Spark: the connector and the pipeline import pyspark.
        from kmirror.pipelines import clickstream

        out, checkpoint = base / "output", base / "checkpoint"
        console.print(f"  job: parse JSON, drop malformed events, write a cleaned copy and per-user counts to {out}")
        console.print(f"  its checkpoint (Kafka offsets, as Spark's Kafka source writes them): {checkpoint}")
        query = clickstream.start(spark, a.bootstrap, TOPIC, out, checkpoint, {"kafkaConsumer.pollTimeoutMs": "5000"},
                                  processing_time="2 seconds")
        _progress("the job processes what A receives", lambda: _processed(query), 500)

        _title(3, "B mirrors A (KIP-1279 Cluster Mirroring, built into the brokers)")
        _kmirror(["features", "--bootstrap-server", b.bootstrap, "upgrade", "--feature", "mirror.version=1"])
        (base / "mirror.properties").write_text(f"bootstrap.servers={a.bootstrap}\n")
        _kmirror(["mirrors", "--bootstrap-server", b.bootstrap, "--create", "--mirror", MIRROR,
                  "--mirror-config", str(base / "mirror.properties")])
        _kmirror(["mirrors", "--bootstrap-server", b.bootstrap, "--add", "--mirror", MIRROR, "--topic", TOPIC])
        total = sum(asyncio.run(_ends(a.bootstrap)).values())
        _progress("B copies A's log (same offsets, same bytes)", lambda: sum(asyncio.run(_ends(b.bootstrap)).values()),
                  total)
        _kmirror(["mirrors", "--bootstrap-server", b.bootstrap, "--describe"])
        try:
            asyncio.run(_produce_one(b.bootstrap))
            raise AssertionError("the mirror topic on B accepted a Produce")
        except KafkaError as exc:
            console.print(f"producing to the mirror topic on B is refused: {exc.error_name} (B is read-only while it mirrors)")

        _title(4, "kmirror verify: is B a byte-exact prefix of A, and what is the RPO? (a Spark job)")
        report = _verify(spark, a, b, base / "verify-report.html")
        console.print(f"  report: [bold]{report}[/bold] (open it in a browser)")

        _title(5, "disaster: the Spark job (it ran next to A) and A's node are killed with kill -9")
        with _step("stopping the job, between two micro-batches if one comes within 20 s"):
            _between_micro_batches(query, 20)
            query.stop()  # an interrupted micro-batch runs again from the checkpoint, idempotently
        done = clickstream.checkpoint_offsets(checkpoint).get(TOPIC, {})
        _progress("B holds every offset the job's checkpoint names",
                  lambda: sum(min(o, int(done.get(str(tp.partition), 0)))
                              for tp, o in asyncio.run(_ends(b.bootstrap)).items()),
                  sum(int(v) for v in done.values()))
        a.kill9()
        producer.stop()
        console.print(f"A is gone (kill -9). The producer had {producer.acked} events acknowledged by A.")

        _title(6, "failover: B stops mirroring and becomes writable")
        # Loaded with Spark, as above.
        from kmirror.pipelines.failover import lag_at_failover, lost_records

        points = asyncio.run(lag_at_failover(b.bootstrap, [TOPIC]))
        lost = lost_records(points)
        console.print(f"  what failover loses: {lost} record(s) A acknowledged that the mirror had not copied yet "
                      f"(the lag at failover, per partition {[p.lost_records for p in points]}): asynchronous "
                      "mirroring's RPO")
        _kmirror(["mirrors", "--bootstrap-server", b.bootstrap, "--remove", "--topic", TOPIC])
        _wait("B's partitions to be STOPPED (writable)",
              lambda: {p.state for p in asyncio.run(lag_at_failover(b.bootstrap, [TOPIC]))} <= {"STOPPED"})
        failover_ends = {p.partition: p.destination_log_end for p in points}
        producer = ClickProducer(b.bootstrap, first_id=1_000_000, limit=600)
        producer.start()
        producer.join()
        console.print(f"the producers moved to B: {producer.acked} new events written there")

        _title(7, "the same Spark job continues on B from its checkpoint (only kafka.bootstrap.servers changed)")
        with _step("running the job on B until it has read everything (Trigger.AvailableNow)"):
            n = clickstream.run_available(spark, b.bootstrap, TOPIC, out, checkpoint, **{"kafkaConsumer.pollTimeoutMs": "5000"})
        console.print(f"  the job read {n} records on B, starting where its checkpoint stopped on A")
        with _step("checking the output exactly-once against an uninterrupted run over B's log"):
            rows, totals = clickstream.clean_rows(spark, out), clickstream.user_totals(spark, out)
            reference = base / "reference"
            clickstream.run_available(spark, b.bootstrap, TOPIC, reference / "out", reference / "checkpoint")
            ref_rows, ref_totals = clickstream.clean_rows(spark, reference / "out"), clickstream.user_totals(
                spark, reference / "out")
        ids = [r[3] for r in rows]
        if rows != ref_rows or totals != ref_totals or len(ids) != len(set(ids)):
            raise AssertionError("the output after failover differs from an uninterrupted run")
        console.print(f"  [green]exactly-once[/green]: {len(rows)} cleaned events, each once, at the same offsets; "
                      f"per-user counts equal ({len(totals)} users)")

        _title(8, "failback: A comes back and mirrors B under the same mirror name")
        with _step("restarting A's node"):
            a.start_node(1)
        a_ends = asyncio.run(_ends(a.bootstrap))
        extra = sum(a_ends[TopicPartition(TOPIC, p)] - failover_ends[p] for p in range(PARTITIONS))
        console.print(f"  A's log holds {extra} record(s) beyond B's failover point: the loss reported at failover "
                      f"was {lost} ({'exact' if extra == lost else 'a lower bound: the mirror had not seen them'})")
        _kmirror(["features", "--bootstrap-server", a.bootstrap, "upgrade", "--feature", "mirror.version=1"])
        (base / "failback.properties").write_text(f"bootstrap.servers={b.bootstrap}\n")
        _kmirror(["mirrors", "--bootstrap-server", a.bootstrap, "--create", "--mirror", MIRROR,
                  "--mirror-config", str(base / "failback.properties")])
        _kmirror(["mirrors", "--bootstrap-server", a.bootstrap, "--add", "--mirror", MIRROR, "--topic", TOPIC])
        _wait("A to converge with B", lambda: _same_logs(a, b))
        console.print("  A cut the records only it had and copied what B wrote: every partition byte-identical")
        producer = ClickProducer(b.bootstrap, first_id=2_000_000, limit=300)
        producer.start()
        producer.join()
        _wait("A to mirror 300 more events written at B", lambda: _same_logs(a, b))
        with _step("the job moves back to A with the same checkpoint"):
            n = clickstream.run_available(spark, a.bootstrap, TOPIC, out, checkpoint, **{"kafkaConsumer.pollTimeoutMs": "5000"})
            rows_after = clickstream.clean_rows(spark, out)
        ids = [r[3] for r in rows_after]
        if n != producer.acked or len(rows_after) != len(rows) + producer.acked or len(ids) != len(set(ids)):
            raise AssertionError("the job on A re-read or lost records")
        console.print(f"  on A the job read exactly the {n} new events: nothing again, nothing skipped")


class ClickProducer(threading.Thread):
    """Click events, a few hundred a second, with kmirror's idempotent-free client, acks=all."""

    def __init__(self, bootstrap: str, first_id: int = 0, limit: int | None = None) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.next_id = first_id
        self.limit = limit
        self.acked = 0
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()
        self.join(30)

    def run(self) -> None:
        try:
            asyncio.run(self._run())
        except (KafkaClientError, OSError):
            pass  # the cluster went away: the disaster

    async def _run(self) -> None:
        from kmirror.pipelines.clickstream import click_event  # loaded with Spark (see _story)

        async with await Admin.connect(self.bootstrap) as admin:
            producer = Producer(admin.cluster, acks=-1, compression=CompressionType.ZSTD)
            while not self._halt.is_set() and (self.limit is None or self.acked < self.limit):
                for p in range(PARTITIONS):
                    batch = []
                    for _ in range(10):
                        i = self.next_id
                        self.next_id += 1
                        batch.append(SimpleRecord(f"u{i % 17}".encode(), click_event(
                            f"e{i}", f"u{i % 17}", "click" if i % 4 else "view", f"/item/{i % 50}",
                            int(time.time() * 1000))))
                    await producer.send(TOPIC, batch, partition=p)
                    self.acked += len(batch)
                await asyncio.sleep(0.05)


def _spark() -> Any:
    # Spark loads only when the demo runs: `kmirror --help` stays quick.
    from kmirror.testing.spark import spark_session

    return spark_session("local[2]", **{"spark.ui.showConsoleProgress": "false"})


def _verify(spark: Any, a: LocalCluster, b: LocalCluster, path: Path) -> Path:
    # Loaded with Spark, as in _story.
    from kmirror.spark.verify import plan_verification, run_verification
    from kmirror.spark.verify_compare import divergence_line, totals
    from kmirror.spark.verify_report import Round, write_report

    src, dst = {"bootstrap.servers": a.bootstrap}, {"bootstrap.servers": b.bootstrap}
    rounds = []
    for i in range(3):
        with _step(f"verification {i + 1} of 3 (one Spark task per partition)"):
            start = time.monotonic()
            plans = asyncio.run(plan_verification(src, dst, topic_pattern=TOPIC))
            results = run_verification(spark, plans, src, dst)
            rounds.append(Round(int(time.time() * 1000), time.monotonic() - start, results))
        t = totals(results)
        console.print(f"    {t.partitions} partitions, {t.bytes_compared:,} bytes compared: {t.diverged} diverged; "
                      f"{t.records_behind} records / {t.bytes_behind:,} bytes behind; RPO {t.rpo_ms} ms")
        for r in results:
            if r.divergence is not None or r.error is not None:
                raise AssertionError(divergence_line(r))
        time.sleep(1)
    write_report(path, a.bootstrap, b.bootstrap, rounds)
    return path.resolve()


async def _create_topic(bootstrap: str) -> None:
    async with await Admin.connect(bootstrap) as admin:
        await admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])


async def _ends(bootstrap: str) -> dict[TopicPartition, int]:
    async with await Admin.connect(bootstrap) as admin:
        listed = await admin.list_offsets({TopicPartition(TOPIC, p): LATEST_TIMESTAMP for p in range(PARTITIONS)})
    return {tp: o.offset for tp, o in listed.items()}


async def _produce_one(bootstrap: str) -> Any:
    async with await Admin.connect(bootstrap) as admin:
        producer = Producer(admin.cluster, acks=-1)
        (meta,) = await producer.send(TOPIC, [SimpleRecord(b"u0", b"{}")], partition=0)
        return meta


def _same_logs(a: LocalCluster, b: LocalCluster) -> bool:
    return all(_batches(a.dir, p) == _batches(b.dir, p) for p in range(PARTITIONS))


def _batches(cluster_dir: Path, partition: int) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    for segment in sorted((cluster_dir / "node-1" / "data" / f"{TOPIC}-{partition}").glob("*.log")):
        data = segment.read_bytes()
        out.extend((h.base_offset, data[pos:pos + h.size]) for pos, h in iter_batches(data, allow_truncated_tail=True))
    return out


def _kmirror(args: list[str]) -> None:
    # Imported here: cli.main imports the command modules, this one among them.
    from kmirror.cli.main import main

    command = shlex.join(["kmirror", *args])
    console.print(f"[cyan]$ {command}[/cyan]")
    if main(args) != 0:
        raise AssertionError(f"{command} failed")


def _title(n: int, text: str) -> None:
    console.print(f"\n[bold]{n}/8 {text}[/bold]")


@contextmanager
def _step(text: str) -> Iterator[None]:
    console.print(f"  {text} ...")
    yield
    console.print(f"  {text}: [green]ok[/green]")


def _progress(text: str, current: Callable[[], int], target: int, timeout_s: float = 90) -> None:
    """A bar from `current()` up to `target`."""
    with Progress(SpinnerColumn(), TextColumn("  {task.description}"), BarColumn(), TextColumn("{task.completed:,}/"
                  "{task.total:,}"), TimeElapsedColumn(), console=console, transient=False) as bar:
        task = bar.add_task(text, total=max(target, 1))
        deadline = time.monotonic() + timeout_s
        while True:
            value = _until_retriable_error_clears(current, 0)
            bar.update(task, completed=min(value, target))
            if value >= target:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out: {text} ({value}/{target})")
            time.sleep(0.3)


def _wait(what: str, done: Callable[[], bool], timeout_s: float = 90) -> None:
    with _step(f"waiting for {what}"):
        deadline = time.monotonic() + timeout_s
        while not _until_retriable_error_clears(done, False):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.3)


def _until_retriable_error_clears(probe: Callable[[], T], meanwhile: T) -> T:
    """`probe()`, or `meanwhile` while it fails with a retriable error: a mirror topic that B is
    still creating answers UNKNOWN_TOPIC_OR_PARTITION, a partition moving its leader
    NOT_LEADER_OR_FOLLOWER, as a Kafka client would retry."""
    try:
        return probe()
    except KafkaError as exc:
        if not exc.retriable:
            raise
        return meanwhile


def _between_micro_batches(query: Any, timeout_s: float) -> None:
    """Return when `query` is between two micro-batches, or after `timeout_s`: on a busy
    machine one micro-batch follows the next with hardly a gap, and a disaster would not wait."""
    deadline = time.monotonic() + timeout_s
    while query.status["isTriggerActive"] and time.monotonic() < deadline:
        time.sleep(0.05)


def _processed(query: Any) -> int:
    return sum(int(p["numInputRows"]) for p in query.recentProgress)
