"""Ports: the side effects a core may ask for, given to constructors."""

from __future__ import annotations

from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (record timestamps, retention)."""
        ...

    def monotonic_ms(self) -> int:
        """Monotonic milliseconds (timeouts, session expiry)."""
        ...


class ManualClock:
    """A clock that only moves when told to: for tests and simulation."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self._now = now_ms
        self._mono = 0

    def now_ms(self) -> int:
        return self._now

    def monotonic_ms(self) -> int:
        return self._mono

    def advance(self, ms: int) -> None:
        self._now += ms
        self._mono += ms
