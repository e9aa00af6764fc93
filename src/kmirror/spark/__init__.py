"""kmirror's Spark connector: `spark.read.format("kmirror")`, `readStream`, `write` and
`writeStream`, a drop-in for Spark's Kafka source and sink (`format("kafka")`) on Spark 4's
Python Data Source API. `register(spark)` makes the format name known to a session.

This package sits above `kmirror.client`: it uses the client, `kmirror.records` and
`kmirror.protocol` only, never broker internals; Spark executors run it far from any broker.
"""

from __future__ import annotations

from typing import Any

from kmirror.spark import save_mode
from kmirror.spark.options import KafkaOptionError
from kmirror.spark.source import KmirrorDataSource, kafka_schema

__all__ = ["KafkaOptionError", "KmirrorDataSource", "kafka_schema", "register"]


def register(spark: Any) -> None:
    """Register the `kmirror` format in `spark` (a SparkSession), and let batch writes of it
    use Spark's Kafka sink save modes (`kmirror.spark.save_mode`)."""
    spark.dataSource.register(KmirrorDataSource)
    save_mode.install()
