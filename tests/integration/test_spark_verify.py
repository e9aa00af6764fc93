"""`kmirror verify` on real processes: two single-node clusters A -> B with a mirror, a real
SparkSession (local[2], one per module) for the job's functions and the `kmirror verify`
command (its own Spark) for exit codes, JSON and the report.

Proven: a caught-up mirror verifies (exit 0) and the bytes compared are exactly the bytes of
B's log segments; a paused mirror is behind, not diverged, and the records, bytes and time
behind equal what was written at A after the pause; a destination written after failover
diverges at exactly the failover offset; a compacted topic the source cleaned after mirroring
it is faithful; an unrelated topic of the same name diverges at offset 0 and names both topic
ids; usage and connection errors exit 2."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from kmirror.spark.verify import plan_verification, run_verification
from kmirror.spark.verify_compare import PartitionVerification
from kmirror.spark.verify_report import Round, write_report
from kmirror.testing.kafka_clients import create_topic, end_offsets, produce_delivered
from kmirror.testing.mirror_clusters import clusters_up, create_mirror, describe, topic_id, wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror
from kmirror.testing.segments import headers, log_batches
from kmirror.testing.spark import SKIP_REASON, java_available

pytestmark = [pytest.mark.integration, pytest.mark.skipif(not java_available(), reason=SKIP_REASON)]

MIRROR = "dr"
T0 = 1_760_000_000_000  # record timestamps: T0 + the record's index (ms)


@pytest.fixture(scope="module")
def ab(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Clusters A (source) and B (destination) with mirror `dr` created on B (no topics yet)."""
    base = tmp_path_factory.mktemp("verify")
    a = LocalCluster(dir=base / "a", port=free_port_block(), overrides={"mirror.metadata.refresh.interval.ms": "300",
                                                                         "log.cleaner.backoff.ms": "200"})
    b = LocalCluster(dir=base / "b", port=free_port_block(), overrides={"mirror.metadata.refresh.interval.ms": "300"})
    with clusters_up(a, b):
        create_mirror(b, a, MIRROR, None, base / "mirror.properties")
        yield a, b


def produce(bootstrap: str, topic: str, partitions: int, count: int, first: int = 0, codec: str = "zstd",
            t0: int = T0) -> None:
    """`count` records per partition, record i with timestamp t0 + i."""
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5,
                         "enable.idempotence": True})
    for i in range(first, first + count):
        for p in range(partitions):
            producer.produce(topic, key=b"k%d" % i, value=b'{"n": %d, "pad": "%s"}' % (i, b"x" * (i % 90)),
                             partition=p, timestamp=t0 + i)
    assert producer.flush(60) == 0


def mirrored_topic(a: LocalCluster, b: LocalCluster, topic: str, partitions: int, count: int,
                   t0: int = T0) -> list[int]:
    """`topic` on A with `count` records per partition, added to `dr` and caught up on B."""
    create_topic(a.bootstrap, topic, partitions)
    produce(a.bootstrap, topic, partitions, count, t0=t0)
    kmirror("mirrors", "--bootstrap-server", b.bootstrap, "--add", "--mirror", MIRROR, "--topic", topic)
    ends = end_offsets(a.bootstrap, topic, partitions)
    wait_until(lambda: all(log_batches(b, topic, p) == log_batches(a, topic, p) for p in range(partitions))
               and end_offsets(b.bootstrap, topic, partitions) == ends, f"B to mirror {topic}")
    return ends


def verify(spark: Any, a: LocalCluster, b: LocalCluster, topic: str) -> dict[int, PartitionVerification]:
    src, dst = {"bootstrap.servers": a.bootstrap}, {"bootstrap.servers": b.bootstrap}
    plans = asyncio.run(plan_verification(src, dst, topic_pattern=topic))
    return {r.plan.partition: r for r in run_verification(spark, plans, src, dst)}


def verify_cli(a: LocalCluster | str, b: LocalCluster, *args: str) -> Any:
    source = a if isinstance(a, str) else a.bootstrap
    return kmirror("verify", "--source-bootstrap-server", source, "--bootstrap-server", b.bootstrap,
                   "--master", "local[2]", *args, check=False, timeout=300)


def test_caught_up_mirror_is_faithful_exit_0_json_and_report(ab: tuple[LocalCluster, LocalCluster],
                                                            tmp_path: Path) -> None:
    a, b = ab
    ends = mirrored_topic(a, b, "orders", 3, 400)
    out = tmp_path / "verify.json"
    report = tmp_path / "report.html"
    proc = kmirror("verify", "--bootstrap-server", b.bootstrap, "--mirror", MIRROR, "--master", "local[2]",
                   "--json", str(out), "--report", str(report), check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "DIVERGED" not in proc.stdout
    assert f"Report: {report.resolve()}" in proc.stdout
    result = json.loads(out.read_text())
    assert result["source"] == a.bootstrap  # the mirror's bootstrap.servers
    parts = {(p["plan"]["topic"], p["plan"]["partition"]): p for p in result["partitions"]}
    assert set(parts) == {("orders", p) for p in range(3)}
    for p in range(3):
        row = parts[("orders", p)]
        on_disk = log_batches(b, "orders", p)
        assert row["status"] == "IN-SYNC"
        assert row["plan"]["destination_high_watermark"] == ends[p] == row["plan"]["source_high_watermark"]
        assert row["batches_compared"] == len(on_disk)
        assert row["bytes_compared"] == sum(len(raw) for _, raw in on_disk)
        assert row["records_behind"] == row["bytes_behind"] == row["time_behind_ms"] == 0
        assert row["plan"]["source_topic_id"] == row["plan"]["destination_topic_id"] == topic_id(a.bootstrap, "orders")
    assert result["totals"]["diverged"] == 0 and result["totals"]["rpo_ms"] == 0
    text = report.read_text()
    assert "FAITHFUL" in text and "<h2>Partitions</h2>" in text and "data:image/png;base64," in text


def test_lag_is_not_divergence_and_records_bytes_time_behind_are_exact(
        ab: tuple[LocalCluster, LocalCluster], spark: Any) -> None:
    a, b = ab
    ends = mirrored_topic(a, b, "lagging", 2, 300)
    kmirror("mirrors", "--bootstrap-server", b.bootstrap, "--pause", "--topic", "lagging")
    wait_until(lambda: {row[3] for (_, t, _), row in describe(b.bootstrap).items() if t == "lagging"} == {"PAUSED"},
               "lagging PAUSED")
    # Partition 1 only: 37 records at T0+300..T0+336, after the last mirrored one (T0+299).
    produce_delivered({"bootstrap.servers": a.bootstrap, "linger.ms": 5, "compression.type": "lz4"}, "lagging",
                      [(1, None, b"late %d" % i) for i in range(37)])
    late = [h for h in headers(log_batches(a, "lagging", 1)) if h.base_offset >= ends[1]]
    latest_ts = max(h.max_timestamp for h in late)
    assert end_offsets(b.bootstrap, "lagging", 2) == ends

    results = verify(spark, a, b, "lagging")
    assert results[0].status == "IN-SYNC" and results[0].records_behind == 0
    r = results[1]
    assert r.divergence is None and r.status == "BEHIND"
    assert r.records_behind == 37
    assert r.bytes_behind == sum(h.size for h in late)
    assert r.last_mirrored_timestamp == T0 + 299
    assert r.time_behind_ms == latest_ts - (T0 + 299)
    kmirror("mirrors", "--bootstrap-server", b.bootstrap, "--resume", "--topic", "lagging")


def test_a_compacted_topic_cleaned_at_the_source_after_mirroring_is_faithful(
        ab: tuple[LocalCluster, LocalCluster], spark: Any) -> None:
    """The source cleans a compacted topic after the mirror copied it (the destination does
    not clean a mirror topic): the source's rebuilt and removed batches are no divergence, a
    record the source kept being the destination's record at that offset."""
    a, b = ab
    create_topic(a.bootstrap, "table", 1, config={"cleanup.policy": "compact", "segment.bytes": "4096",
                                                  "min.cleanable.dirty.ratio": "0.01",
                                                  "min.compaction.lag.ms": "3600000"})
    producer = Producer({"bootstrap.servers": a.bootstrap, "compression.type": "lz4", "linger.ms": 5,
                         "batch.size": 1024})  # batches below segment.bytes
    for i in range(400):
        producer.produce("table", key=b"row-%d" % (i % 12), value=b"version %d of the row" % i, partition=0)
    assert producer.flush(30) == 0 and end_offsets(a.bootstrap, "table", 1) == [400]
    kmirror("mirrors", "--bootstrap-server", b.bootstrap, "--add", "--mirror", MIRROR, "--topic", "table")
    wait_until(lambda: log_batches(b, "table", 0) == log_batches(a, "table", 0) != [], "B to mirror table")
    mirrored = log_batches(b, "table", 0)
    kmirror("configs", "--bootstrap-server", a.bootstrap, "--entity-type", "topics", "--entity-name", "table",
            "--alter", "--add-config", "min.compaction.lag.ms=0")
    wait_until(lambda: "cleaned table-0 " in a.log_text(), "A to clean table")
    assert log_batches(a, "table", 0) != mirrored == log_batches(b, "table", 0)
    result = verify(spark, a, b, "table")[0]
    assert result.plan.compacted and result.divergence is None and result.status == "IN-SYNC", result
    assert result.batches_cleaned_at_source > 0


def test_destination_written_after_failover_diverges_at_the_failover_offset(
        ab: tuple[LocalCluster, LocalCluster], tmp_path: Path) -> None:
    a, b = ab
    ends = mirrored_topic(a, b, "events", 2, 200)
    kmirror("mirrors", "--bootstrap-server", b.bootstrap, "--remove", "--topic", "events")
    wait_until(lambda: {row[3] for (_, t, _), row in describe(b.bootstrap).items() if t == "events"} <= {"STOPPED"},
               "events STOPPED on B")
    produce(b.bootstrap, "events", 2, 5, first=1000)   # B is written to after failover
    produce(a.bootstrap, "events", 2, 5, first=2000)   # and A goes on: a tail B never saw
    out = tmp_path / "v.json"
    proc = verify_cli(a, b, "--topic", "ev.*", "--json", str(out))
    assert proc.returncode == 1, proc.stderr + proc.stdout
    lines = [line for line in proc.stdout.splitlines() if line.startswith("DIVERGED ")]
    assert len(lines) == 2, proc.stdout
    for p in range(2):
        # B's MIRROR_PID_RESET (failover) sits where A's next batch is: the first differing offset.
        assert any(line.startswith(f"DIVERGED events-{p} diverges at offset {ends[p]}: ") for line in lines), lines
    rows = {r["plan"]["partition"]: r for r in json.loads(out.read_text())["partitions"]}
    for p in range(2):
        d = rows[p]["divergence"]
        assert d["offset"] == ends[p]
        assert d["destination_batch"]["is_control"] and not d["source_batch"]["is_control"]
        assert rows[p]["batches_compared"] == len([h for h in headers(log_batches(a, "events", p))
                                                   if h.base_offset < ends[p]])


def test_unrelated_topic_with_the_same_name_diverges_naming_both_topic_ids(
        ab: tuple[LocalCluster, LocalCluster], spark: Any) -> None:
    """Two topics created separately: one with the same bytes on both clusters (same records,
    timestamps and producer ids from fresh clusters), one with other records at B."""
    a, b = ab
    for cluster in (a, b):
        create_topic(cluster.bootstrap, "plain", 1)
        produce(cluster.bootstrap, "plain", 1, 50)
        create_topic(cluster.bootstrap, "plain-other", 1)
    produce(a.bootstrap, "plain-other", 1, 50)
    produce(b.bootstrap, "plain-other", 1, 50, first=7)
    ids = f"topic id {topic_id(a.bootstrap, 'plain')} on the source, {topic_id(b.bootstrap, 'plain')} on the destination"
    same_bytes = verify(spark, a, b, "plain")[0]
    assert same_bytes.batches_compared == len(log_batches(b, "plain", 0)) > 0  # the logs are equal...
    assert same_bytes.divergence is not None and same_bytes.divergence.offset == 0
    assert same_bytes.divergence.what == ids  # ...but they are not the same topic

    other = verify(spark, a, b, "plain-other")[0]
    assert other.divergence is not None and other.divergence.offset == 0 and other.batches_compared == 0
    assert other.divergence.what.startswith("batch CRC ") and "topic id" in other.divergence.what
    assert other.divergence.source_batch and other.divergence.destination_batch


def test_usage_and_connection_errors_exit_2(ab: tuple[LocalCluster, LocalCluster]) -> None:
    a, b = ab
    nobody = f"127.0.0.1:{free_port_block()}"  # reserved for this process, nothing listens
    proc = verify_cli(nobody, b, "--topic", "orders")
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].startswith("Error: cannot reach the source")
    proc = verify_cli(a, b, "--topic", "no-such-topic-.*")
    assert proc.returncode == 2 and "no topic of the destination cluster matches" in proc.stderr
    proc = verify_cli(a, b, "--every", "5")
    assert proc.returncode == 2 and "--every and --duration go together" in proc.stderr
    proc = verify_cli(a, b, "--topic", "x", "--mirror", MIRROR)
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr


def chromium() -> str | None:
    """Headless Chromium. scripts/bootstrap.sh installs Debian's `chromium`; where it is
    missing the browser tests skip, except under CI, where a missing browser is a broken
    install and fails them."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if found := shutil.which(name):
            return found
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail("headless Chromium is missing under CI: scripts/bootstrap.sh should have installed Debian's "
                    "chromium (apt-get install -y chromium)")
    pytest.skip("headless Chromium is not installed (Debian: apt-get install -y chromium)")


def headless(browser: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--virtual-time-budget=5000", *args], capture_output=True, text=True, timeout=120)


def assert_renders_in_chromium(report: Path, tables: int) -> Path:
    """Chromium loads the report, decodes every plot and shows its tables; a full-page
    screenshot is taken (and kept where KMIRROR_REPORT_SCREENSHOT names a file)."""
    browser = chromium()
    assert browser is not None
    dom = headless(browser, "--dump-dom", report.resolve().as_uri())
    assert dom.returncode == 0, dom.stderr
    assert 'data-plots="rendered"' in dom.stdout  # every plot decoded in the browser
    assert dom.stdout.count("<table>") == tables and "<h2>Partitions</h2>" in dom.stdout
    shot = report.with_suffix(".png")
    taken = headless(browser, f"--screenshot={shot}", "--window-size=1280,2600", report.resolve().as_uri())
    assert taken.returncode == 0 and shot.stat().st_size > 50_000, taken.stderr
    keep = os.environ.get("KMIRROR_REPORT_SCREENSHOT")
    if keep:
        shutil.copy(shot, keep)
        shutil.copy(report, Path(keep).with_suffix(".html"))
    return shot


def test_report_of_two_rounds_renders_in_headless_chromium(ab: tuple[LocalCluster, LocalCluster], spark: Any,
                                                           tmp_path: Path) -> None:
    """The report of two verifications of a paused mirror and a diverged topic (the job's
    own results, rendered as `--report` writes them) shows its tables, the divergence and
    both plots in Chromium."""
    a, b = ab
    chromium()  # skips (or fails under CI) before any work when there is no browser
    mirrored_topic(a, b, "shown", 2, 50)
    kmirror("mirrors", "--bootstrap-server", b.bootstrap, "--pause", "--topic", "shown")
    wait_until(lambda: {row[3] for (_, t, _), row in describe(b.bootstrap).items() if t == "shown"} == {"PAUSED"},
               "shown PAUSED")
    for cluster, first in ((a, 0), (b, 3)):
        create_topic(cluster.bootstrap, "shown-diverged", 1)
        produce(cluster.bootstrap, "shown-diverged", 1, 20, first=first)
    src, dst = {"bootstrap.servers": a.bootstrap}, {"bootstrap.servers": b.bootstrap}
    rounds = []
    for i in range(2):
        produce_delivered({"bootstrap.servers": a.bootstrap}, "shown", [(0, None, b"unmirrored %d" % i)] * 5)
        started = time.time()
        plans = asyncio.run(plan_verification(src, dst, topic_pattern="shown(-diverged)?"))
        results = run_verification(spark, plans, src, dst)
        rounds.append(Round(int(started * 1000), time.time() - started, results))
    assert [sum(r.records_behind for r in rd.results) for rd in rounds] == [5, 10]
    report = tmp_path / "report.html"
    write_report(report, a.bootstrap, b.bootstrap, rounds)
    text = report.read_text()
    assert text.count("<img ") == 2 and "shown-diverged-0 at offset 0" in text
    assert_renders_in_chromium(report, tables=3)
    kmirror("mirrors", "--bootstrap-server", b.bootstrap, "--resume", "--topic", "shown")


@pytest.mark.slow
def test_repeated_verify_report_renders_in_headless_chromium(ab: tuple[LocalCluster, LocalCluster],
                                                             tmp_path: Path) -> None:
    """`--every 1 --duration 9` while A takes writes the paused mirror does not copy: the RPO
    grows round after round; the report shows tables, the divergence's two batch headers and
    both plots, and Chromium renders it (screenshot kept next to the report)."""
    a, b = ab
    ends = mirrored_topic(a, b, "audit", 2, 100, t0=int(time.time() * 1000) - 100)
    kmirror("mirrors", "--bootstrap-server", b.bootstrap, "--pause", "--topic", "audit")
    wait_until(lambda: {row[3] for (_, t, _), row in describe(b.bootstrap).items() if t == "audit"} == {"PAUSED"},
               "audit PAUSED")
    for cluster, first in ((a, 0), (b, 3)):
        create_topic(cluster.bootstrap, "audit-diverged", 1)
        produce(cluster.bootstrap, "audit-diverged", 1, 20, first=first)

    stop = threading.Event()

    def write_at_a() -> None:  # one record a partition every 300 ms, stamped with the wall clock
        producer = Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 0})
        while not stop.wait(0.3):
            for p in range(2):
                producer.produce("audit", value=b"tick", partition=p)
            producer.flush(10)

    writer = threading.Thread(target=write_at_a, daemon=True)
    produce_delivered({"bootstrap.servers": a.bootstrap}, "audit", [(0, None, b"first unmirrored")])
    writer.start()
    report, out = tmp_path / "report.html", tmp_path / "v.json"
    try:
        proc = verify_cli(a, b, "--topic", "audit.*", "--every", "1", "--duration", "9", "--report", str(report),
                          "--json", str(out))
    finally:
        stop.set()
        writer.join(10)
    assert proc.returncode == 1, proc.stderr + proc.stdout
    assert [line.split(":")[0] for line in proc.stdout.splitlines() if line.startswith("DIVERGED")] == \
        ["DIVERGED audit-diverged-0 diverges at offset 0"]
    rounds = json.loads(out.read_text())["rounds"]
    assert len(rounds) >= 2  # a loaded machine may spend most of the 9 s on the first round
    behind = [r["records_behind"] for r in rounds]
    assert behind == sorted(behind) and behind[-1] > behind[0] > 0
    assert rounds[-1]["rpo_ms"] > rounds[0]["rpo_ms"]
    assert json.loads(out.read_text())["partitions"][0]["plan"]["destination_high_watermark"] in (ends[0], ends[1])

    text = report.read_text()
    assert text.count("<img ") == 2 and "RPO over time" in text and "Lag per partition" in text
    assert "audit-diverged-0 at offset 0" in text  # the divergence with both batch headers
    assert_renders_in_chromium(report, tables=3)
