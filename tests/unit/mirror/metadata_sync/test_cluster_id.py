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
