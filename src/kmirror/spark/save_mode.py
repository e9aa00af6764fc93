"""Batch writes in Spark's Kafka sink save modes: ErrorIfExists (the default) and Append
write, Overwrite and Ignore are refused with Spark's Kafka message.

Spark refuses ErrorIfExists and Ignore for every Python data source before the source is
asked (UNSUPPORTED_DATA_SOURCE_SAVE_MODE, "use Append or Overwrite"), while its Kafka sink
writes in the default mode. `install()` (called by `kmirror.spark.register`) wraps PySpark's
`DataFrameWriter.mode`, `.format` and `.save` so that a `save()` of format `kmirror` in the
default mode is sent as Append, and Overwrite / Ignore fail with Spark's Kafka sink message.
Writers of other formats are untouched.
"""

from __future__ import annotations

import functools
from typing import Any

from pyspark.sql.readwriter import DataFrameWriter

from kmirror.spark.options import KafkaOptionError

FORMAT = "kmirror"
_REFUSED = {"overwrite": "Overwrite", "ignore": "Ignore"}
_DEFAULT = frozenset({"error", "errorifexists", "default"})


def refused_mode_message(mode: str) -> str:
    """Spark's `KafkaSourceProvider.createRelation` message."""
    return f"Save mode {mode} not allowed for Kafka. Allowed save modes are Append and ErrorIfExists (default)."


def install() -> None:
    """Wrap PySpark's DataFrameWriter once per process."""
    if getattr(DataFrameWriter, "_kmirror_save_modes", False):
        return
    original_mode, original_format, original_save = DataFrameWriter.mode, DataFrameWriter.format, DataFrameWriter.save

    @functools.wraps(original_mode)
    def mode(self: DataFrameWriter, saveMode: str | None) -> DataFrameWriter:
        if saveMode is not None:
            self._kmirror_mode = saveMode  # type: ignore[attr-defined]
        return original_mode(self, saveMode)

    @functools.wraps(original_format)
    def format(self: DataFrameWriter, source: str) -> DataFrameWriter:
        self._kmirror_format = source  # type: ignore[attr-defined]
        return original_format(self, source)

    @functools.wraps(original_save)
    def save(self: DataFrameWriter, path: str | None = None, format: str | None = None, mode: str | None = None,
             partitionBy: Any = None, **options: Any) -> None:
        if format is not None:
            self.format(format)
        self.mode(mode)
        if str(getattr(self, "_kmirror_format", "")).lower() == FORMAT:
            chosen = str(getattr(self, "_kmirror_mode", "errorifexists")).lower()
            if chosen in _REFUSED:
                raise KafkaOptionError(refused_mode_message(_REFUSED[chosen]))
            if chosen in _DEFAULT:
                original_mode(self, "append")
        return original_save(self, path, None, None, partitionBy, **options)

    DataFrameWriter.mode = mode  # type: ignore[method-assign]
    DataFrameWriter.format = format  # type: ignore[method-assign]
    DataFrameWriter.save = save  # type: ignore[method-assign]
    DataFrameWriter._kmirror_save_modes = True  # type: ignore[attr-defined]
