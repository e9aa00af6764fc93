"""`log.cleaner.io.max.bytes.per.second` (Kafka `Throttler`): how long to pause after I/O.

A value, not a sleeper: the shell asks `pause_ms` after each step and sleeps that long.
"""

from __future__ import annotations


class Throttler:
    def __init__(self, max_bytes_per_second: float, start_ms: int, check_interval_ms: int = 300) -> None:
        self.max_bytes_per_second = max_bytes_per_second
        self.check_interval_ms = check_interval_ms
        self._period_start_ms = start_ms
        self._observed = 0

    def pause_ms(self, io_bytes: int, now_ms: int) -> int:
        """Record `io_bytes` of cleaner I/O; the pause that brings the rate back under the
        limit (0 when under it). The window restarts after each check, as Kafka's does."""
        self._observed += io_bytes
        elapsed = now_ms - self._period_start_ms
        if elapsed < self.check_interval_ms:
            return 0
        rate = self._observed * 1000.0 / max(elapsed, 1)
        pause = 0
        if rate > self.max_bytes_per_second:
            pause = int(self._observed * 1000.0 / self.max_bytes_per_second - elapsed)
        self._period_start_ms = now_ms + max(pause, 0)
        self._observed = 0
        return max(pause, 0)
