"""Fetch halting on a source cluster id mismatch, per broker."""

from __future__ import annotations

import asyncio
import logging

import pytest

from kmirror.mirror.metadata_sync.cluster_id import SourceClusterIdGuard
from kmirror.types import TopicPartition

TP = TopicPartition("t", 0)


class FakeSource:
    def __init__(self) -> None:
        self.id = "src-id"
        self.refreshes = 0
        self.reachable = True

    async def cluster_id(self, refresh: bool = False) -> str:
        if not self.reachable:
            raise ConnectionError("down")
        self.refreshes += refresh
        return self.id


def test_mismatch_halts_until_the_ids_match_again(caplog: pytest.LogCaptureFixture) -> None:
    source = FakeSource()
    guard = SourceClusterIdGuard(lambda name: "src-id", lambda name: source)  # type: ignore[arg-type, return-value]
    with caplog.at_level(logging.INFO, logger="kmirror.mirror.metadata_sync.cluster_id"):
        asyncio.run(guard.check({"m"}))
        assert not guard.is_halted("m") and source.refreshes == 1
        source.id = "other"
        asyncio.run(guard.check({"m"}))
        asyncio.run(guard.check({"m"}))
        assert guard.is_halted("m")
        source.reachable = False  # unknown: the previous decision stays
        asyncio.run(guard.check({"m"}))
        assert guard.is_halted("m")
        source.reachable, source.id = True, "src-id"
        asyncio.run(guard.check({"m"}))
        assert not guard.is_halted("m")
    assert [r.levelname for r in caplog.records] == ["ERROR", "INFO"]


def test_no_recorded_id_never_halts_and_a_mirror_not_led_is_forgotten() -> None:
    source = FakeSource()
    source.id = "other"
    recorded = {"m": ""}
    guard = SourceClusterIdGuard(lambda name: recorded[name], lambda name: source)  # type: ignore[arg-type, return-value]
    asyncio.run(guard.check({"m"}))
    assert not guard.is_halted("m")
    recorded["m"] = "src-id"
    asyncio.run(guard.check({"m"}))
    assert guard.is_halted("m")
    asyncio.run(guard.check(set()))
    assert not guard.is_halted("m")


def test_the_mirrors_are_checked_together_when_the_guard_may_run_them_so() -> None:
    """Each check is a round trip to a source: a pass over many mirrors must not chain them."""
    in_flight: list[int] = [0, 0]  # now, most at once

    class SlowSource(FakeSource):
        async def cluster_id(self, refresh: bool = False) -> str:
            in_flight[0] += 1
            in_flight[1] = max(in_flight)
            await asyncio.sleep(0)
            in_flight[0] -= 1
            return "other" if self is sources["b"] else self.id

    sources = {name: SlowSource() for name in ("a", "b", "c")}

    async def together(awaitables):  # type: ignore[no-untyped-def]
        return await asyncio.gather(*awaitables, return_exceptions=True)

    guard = SourceClusterIdGuard(lambda name: "src-id", sources.get, together)  # type: ignore[arg-type]
    asyncio.run(guard.check({"a", "b", "c"}))
    assert in_flight[1] == 3 and guard.halted == {"b": "other"}
