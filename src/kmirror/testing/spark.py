"""A SparkSession for tests and benchmarks: loopback only, no UI, Python workers on this
interpreter (so they import this kmirror), the `kmirror` format registered."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def java_available() -> bool:
    """Whether Spark can start a JVM here (`java` on PATH or JAVA_HOME set)."""
    return shutil.which("java") is not None or bool(os.environ.get("JAVA_HOME"))


SKIP_REASON = "Spark needs Java 17 or later (scripts/bootstrap.sh installs it from Debian)"


@contextmanager
def spark_session(master: str = "local[2]", **conf: str) -> Iterator[Any]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import kmirror.spark

    builder = (SparkSession.builder.master(master).appName("kmirror-test")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.sql.session.timeZone", "UTC"))
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    kmirror.spark.register(spark)
    try:
        yield spark
    finally:
        spark.stop()
