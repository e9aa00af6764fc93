"""A clickstream DR pipeline: a Structured Streaming job over `format("kmirror")` whose
checkpoint survives a failover to a mirror cluster.

The job reads JSON click events (`{"event_id", "user_id", "event", "url", "ts"}`), parses
them, drops malformed ones, and writes per micro-batch, with `foreachBatch`:
- a cleaned copy (`<output>/clean/batch=<id>`), one row per event with its topic,
  partition and offset;
- per-user aggregates of the micro-batch (`<output>/users/batch=<id>`).
Each micro-batch overwrites its own directory, so a batch Spark runs again after a crash
(same batch id, same offsets: Spark's offset log) replaces its earlier output: the sink is
idempotent and the output exactly-once. `user_totals` folds the per-batch aggregates.

Failover: the checkpoint holds plain Kafka offsets. A mirror keeps offsets, so after
`kmirror mirrors --remove` on the destination the same query, started with the same
checkpoint and only `kafka.bootstrap.servers` changed, continues where it stopped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

CLICK_SCHEMA = "event_id STRING, user_id STRING, event STRING, url STRING, ts BIGINT"
CLEAN_COLUMNS = ("topic", "partition", "offset", "event_id", "user_id", "event", "url", "ts")


def click_event(event_id: str, user_id: str, event: str, url: str, ts: int) -> bytes:
    """One click event as the producers of this pipeline write it."""
    return json.dumps({"event_id": event_id, "user_id": user_id, "event": event, "url": url, "ts": ts}).encode()


def clicks(spark: Any, bootstrap: str, topic: str, **options: str) -> Any:
    """The parsed, cleaned click stream of `topic` (malformed events dropped)."""
    reader = (spark.readStream.format("kmirror").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    for key, value in options.items():
        reader = reader.option(key, value)
    raw = reader.load()
    parsed = raw.selectExpr("topic", "partition", "offset",
                            f"from_json(CAST(value AS STRING), '{CLICK_SCHEMA}') AS e")
    return (parsed.where("e IS NOT NULL AND e.event_id IS NOT NULL AND e.user_id IS NOT NULL")
            .selectExpr("topic", "partition", "offset", "e.event_id AS event_id", "trim(e.user_id) AS user_id",
                        "lower(trim(e.event)) AS event", "trim(e.url) AS url", "e.ts AS ts"))


def write_batch(output: Path) -> Callable[[Any, int], None]:
    """The idempotent `foreachBatch` sink: each batch id overwrites its own directories."""
    out = str(output)

    def write(batch: Any, batch_id: int) -> None:
        batch.persist()
        try:
            batch.write.mode("overwrite").parquet(f"{out}/clean/batch={batch_id:08d}")
            (batch.groupBy("user_id")
             .agg({"*": "count", "ts": "max"})
             .withColumnRenamed("count(1)", "events").withColumnRenamed("max(ts)", "last_ts")
             .write.mode("overwrite").parquet(f"{out}/users/batch={batch_id:08d}"))
        finally:
            batch.unpersist()

    return write


def start(spark: Any, bootstrap: str, topic: str, output: Path, checkpoint: Path,
          options: Mapping[str, str] | None = None, *, available_now: bool = False,
          processing_time: str | None = None) -> Any:
    """Start the job; the same `checkpoint` resumes it, on whichever cluster `bootstrap` names.
    `options`: more source options (e.g. `kafkaConsumer.pollTimeoutMs`); `processing_time`:
    a micro-batch every such interval (e.g. "2 seconds") instead of as soon as possible."""
    writer = (clicks(spark, bootstrap, topic, **(options or {})).writeStream.foreachBatch(write_batch(output))
              .option("checkpointLocation", str(checkpoint)).queryName(f"clickstream-{topic}"))
    if available_now:
        writer = writer.trigger(availableNow=True)
    elif processing_time is not None:
        writer = writer.trigger(processingTime=processing_time)
    return writer.start()


def run_available(spark: Any, bootstrap: str, topic: str, output: Path, checkpoint: Path, **options: str) -> int:
    """Run the job over everything now in the topic (Trigger.AvailableNow) and stop; the
    number of input records it processed."""
    query = start(spark, bootstrap, topic, output, checkpoint, options, available_now=True)
    try:
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
        return sum(int(p["numInputRows"]) for p in query.recentProgress)
    finally:
        query.stop()


def clean_rows(spark: Any, output: Path) -> list[tuple[Any, ...]]:
    """The cleaned copy, sorted: (topic, partition, offset, event_id, user_id, event, url, ts)."""
    if not (output / "clean").exists():
        return []
    return sorted(tuple(r[c] for c in CLEAN_COLUMNS) for r in spark.read.parquet(str(output / "clean")).collect())


def user_totals(spark: Any, output: Path) -> dict[str, tuple[int, int]]:
    """Per user: (events, last ts), folded over every micro-batch's aggregates."""
    if not (output / "users").exists():
        return {}
    totals: dict[str, tuple[int, int]] = {}
    for r in spark.read.parquet(str(output / "users")).collect():
        events, last = totals.get(r["user_id"], (0, -1))
        totals[r["user_id"]] = (events + int(r["events"]), max(last, int(r["last_ts"])))
    return totals


def checkpoint_offsets(checkpoint: Path) -> dict[str, dict[str, int]]:
    """The offsets of the last micro-batch in Spark's offset log: {topic: {partition: next offset}}."""
    logs = [p for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()]
    last = max(logs, key=lambda p: int(p.name))
    offsets: dict[str, dict[str, int]] = json.loads(last.read_text().splitlines()[-1])
    return offsets
