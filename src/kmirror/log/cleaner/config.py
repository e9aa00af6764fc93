"""Broker-level cleaner settings (Kafka `CleanerConfig`), with Kafka's names and defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DOUBLE_MAX = 1.7976931348623157e308


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    num_threads: int = 1  # log.cleaner.threads
    dedupe_buffer_size: int = 128 * 1024 * 1024  # log.cleaner.dedupe.buffer.size (all threads)
    dedupe_buffer_load_factor: float = 0.9  # log.cleaner.io.buffer.load.factor
    io_buffer_size: int = 512 * 1024  # log.cleaner.io.buffer.size
    max_io_bytes_per_second: float = DOUBLE_MAX  # log.cleaner.io.max.bytes.per.second
    backoff_ms: int = 15_000  # log.cleaner.backoff.ms
    enable_cleaner: bool = True  # log.cleaner.enable

    @property
    def dedupe_buffer_size_per_thread(self) -> int:
        return self.dedupe_buffer_size // max(1, self.num_threads)

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> CleanerConfig:
        """From ServerConfig values (already parsed and validated by the config layer)."""
        def get(key: str, default: Any) -> Any:
            value = values.get(key)
            return default if value is None else value
        base = cls()
        return cls(
            num_threads=int(get("log.cleaner.threads", base.num_threads)),
            dedupe_buffer_size=int(get("log.cleaner.dedupe.buffer.size", base.dedupe_buffer_size)),
            dedupe_buffer_load_factor=float(get("log.cleaner.io.buffer.load.factor",
                                                base.dedupe_buffer_load_factor)),
            io_buffer_size=int(get("log.cleaner.io.buffer.size", base.io_buffer_size)),
            max_io_bytes_per_second=float(get("log.cleaner.io.max.bytes.per.second",
                                              base.max_io_bytes_per_second)),
            backoff_ms=int(get("log.cleaner.backoff.ms", base.backoff_ms)),
            enable_cleaner=_bool(get("log.cleaner.enable", base.enable_cleaner)),
        )


def _bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)
