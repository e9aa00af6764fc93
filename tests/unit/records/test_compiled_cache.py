"""The compiled functions' cache stamp covers the modules whose compiled code they inline."""

from __future__ import annotations

from pathlib import Path

import kmirror.log.cleaner.record_filter  # noqa: F401  (the modules must be loaded to be inspected)
from kmirror.records.compiled_cache import DependencyStampedLocator, compiled_dependencies
from kmirror.records.record_scan import scan_section


def test_a_callers_stamp_covers_its_callees_modules() -> None:
    names = [Path(p).name for p in compiled_dependencies("kmirror.log.cleaner.record_filter")]
    assert names == ["offset_map.py", "record_filter.py", "record_scan.py"]
    assert [Path(p).name for p in compiled_dependencies("kmirror.records.record_scan")] == ["record_scan.py"]


def test_kmirror_functions_use_the_locator() -> None:
    assert isinstance(scan_section._cache._impl.locator, DependencyStampedLocator)
