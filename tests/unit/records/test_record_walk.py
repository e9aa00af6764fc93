"""Which walk `record_walk.walk` takes: the Python walk until `load_compiled` has returned."""

from __future__ import annotations

import sys
import threading
import types

import pytest

from kmirror.records import record_walk
from kmirror.records.batch import RECORD_BATCH_OVERHEAD
from kmirror.records.builder import build_batch


def test_a_half_imported_compiled_walk_is_not_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """While a node's worker thread imports `record_scan`, the module is in `sys.modules`
    without its functions yet: produce validation on the event loop must not use it. It did,
    and an append failed with "partially initialized module ... has no attribute 'scan_section'"."""
    monkeypatch.setattr(record_walk, "_compiled_loaded", False)
    monkeypatch.setitem(sys.modules, "kmirror.records.record_scan", types.ModuleType("kmirror.records.record_scan"))
    raw = build_batch([(b"k", b"v", (), 5), (None, b"w", (), 7)])
    deltas, keyless = record_walk.walk(raw, RECORD_BATCH_OVERHEAD, len(raw), 2)
    assert deltas.tolist() == [0, 2] and keyless.tolist() == [False, True]


def test_the_compiled_walk_is_taken_once_loaded_in_another_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(record_walk, "_compiled_loaded", False)
    loader = threading.Thread(target=record_walk.load_compiled)
    loader.start()
    loader.join()
    taken: list[str] = []
    monkeypatch.setattr(record_walk, "walk_python", lambda *a: taken.append("python"))
    compiled = record_walk.walk_compiled
    monkeypatch.setattr(record_walk, "walk_compiled", lambda *a: (taken.append("compiled"), compiled(*a))[1])
    raw = build_batch([(b"k", b"v", (), 5)])
    deltas, _ = record_walk.walk(raw, RECORD_BATCH_OVERHEAD, len(raw), 1)
    assert taken == ["compiled"] and deltas.tolist() == [0]


def test_a_large_section_loads_the_compiled_walk_rather_than_take_the_python_walk(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """In a node's first moments a hostile batch of millions of empty records would hold the
    event loop for seconds in the Python walk; past `_PYTHON_WALK_MAX_RECORDS` the walk waits for
    the compiled one instead (here two records are "large")."""
    monkeypatch.setattr(record_walk, "_compiled_loaded", False)
    monkeypatch.setattr(record_walk, "_PYTHON_WALK_MAX_RECORDS", 1)
    loads: list[int] = []
    load = record_walk.load_compiled
    monkeypatch.setattr(record_walk, "load_compiled", lambda: (loads.append(1), load())[1])
    one, two = build_batch([(b"k", b"v", (), 5)]), build_batch([(b"k", b"v", (), 5), (b"k", b"w", (), 6)])
    record_walk.walk(one, RECORD_BATCH_OVERHEAD, len(one), 1)
    assert loads == [] and not record_walk._compiled_loaded
    deltas, _ = record_walk.walk(two, RECORD_BATCH_OVERHEAD, len(two), 2)
    assert loads == [1] and record_walk._compiled_loaded and deltas.tolist() == [0, 1]
