from kmirror.log.epoch_cache import EpochCache, EpochEntry


def _cache(*pairs):
    c = EpochCache()
    for epoch, offset in pairs:
        c.assign(epoch, offset)
    return c


def test_assign_keeps_monotonic_entries():
    c = _cache((0, 0), (1, 10), (3, 20))
    assert c.assign(3, 25) is False  # same latest epoch, later offset: no change
    assert c.assign(2, 30) is True  # lower epoch: entries with epoch >= 2 are dropped
    assert c.entries == [EpochEntry(0, 0), EpochEntry(1, 10), EpochEntry(2, 30)]
    assert c.assign(5, 5) is True  # lower offset: entries starting >= 5 dropped
    assert c.entries == [EpochEntry(0, 0), EpochEntry(5, 5)]
    assert c.assign(5, 3) is True  # same epoch, earlier start: moved back
    assert c.entries == [EpochEntry(0, 0), EpochEntry(5, 3)]
    assert c.latest_epoch == 5


def test_end_offset_for_matches_kafka():
    c = _cache((1, 0), (3, 10), (6, 20))
    assert c.end_offset_for(-1, 30) == (-1, -1)
    assert c.end_offset_for(6, 30) == (6, 30)
    assert c.end_offset_for(7, 30) == (-1, -1)
    assert c.end_offset_for(3, 30) == (3, 20)
    assert c.end_offset_for(4, 30) == (3, 20)
    assert c.end_offset_for(2, 30) == (1, 10)
    assert c.end_offset_for(0, 30) == (0, 0)  # below the earliest: earliest epoch's start
    assert EpochCache().end_offset_for(0, 5) == (-1, -1)


def test_truncate_from_end_and_start():
    c = _cache((1, 0), (3, 10), (6, 20))
    assert c.truncate_from_end(25) is False
    assert c.truncate_from_end(10) is True
    assert c.entries == [EpochEntry(1, 0)]
    c = _cache((1, 0), (3, 10), (6, 20))
    assert c.truncate_from_start(0) is False
    assert c.truncate_from_start(15) is True
    assert c.entries == [EpochEntry(3, 15), EpochEntry(6, 20)]
    assert c.truncate_from_start(20) is True
    assert c.entries == [EpochEntry(6, 20)]


def test_epoch_for_offset():
    c = _cache((1, 0), (3, 10))
    assert c.epoch_for_offset(9) == 1
    assert c.epoch_for_offset(10) == 3
    assert _cache((2, 5)).epoch_for_offset(4) is None
