"""EpochCache against a naive model of Kafka's LeaderEpochFileCache, and format round-trips."""

from hypothesis import given
from hypothesis import strategies as st

from kmirror.log.checkpoint import LeaderEpochCheckpoint, OffsetCheckpoint
from kmirror.log.epoch_cache import EpochCache, EpochEntry
from kmirror.log.offset_index import OffsetIndex
from kmirror.log.time_index import TimeIndex
from kmirror.testing.memory_fs import MemoryFileSystem
from kmirror.types import TopicPartition

ops = st.lists(st.one_of(
    st.tuples(st.just("assign"), st.integers(0, 20), st.integers(0, 200)),
    st.tuples(st.just("end"), st.integers(-5, 220), st.just(0)),
    st.tuples(st.just("start"), st.integers(-5, 220), st.just(0)),
), max_size=40)


def naive_assign(entries, epoch, offset):
    if entries and entries[-1][0] == epoch and offset >= entries[-1][1]:
        return entries
    kept = [(e, o) for e, o in entries if e < epoch and o < offset]
    return kept + [(epoch, offset)]


def naive_end_offset_for(entries, requested, leo):
    if requested == -1:
        return (-1, -1)
    if entries and entries[-1][0] == requested:
        return (requested, leo)
    higher = [(e, o) for e, o in entries if e > requested]
    lower = [(e, o) for e, o in entries if e <= requested]
    if not higher:
        return (-1, -1)
    if not lower:
        return (requested, higher[0][1])
    return (lower[-1][0], higher[0][1])


def apply(entries, op):
    kind, a, b = op
    if kind == "assign":
        return naive_assign(entries, a, b)
    if kind == "end":
        return [(e, o) for e, o in entries if o < a] if a >= 0 else entries
    if entries and entries[0][1] < a:
        removed = [(e, o) for e, o in entries if o <= a]
        return [(removed[-1][0], a)] + [(e, o) for e, o in entries if o > a]
    return entries


@given(ops, st.integers(-1, 22), st.integers(0, 300))
def test_epoch_cache_matches_naive_model(operations, requested, leo):
    cache = EpochCache()
    model: list[tuple[int, int]] = []
    for op in operations:
        kind, a, b = op
        if kind == "assign":
            cache.assign(a, b)
        elif kind == "end":
            cache.truncate_from_end(a)
        else:
            cache.truncate_from_start(a)
        model = apply(model, op)
        assert [(e.epoch, e.start_offset) for e in cache.entries] == model
        epochs = [e for e, _ in model]
        offsets = [o for _, o in model]
        assert epochs == sorted(set(epochs)) and offsets == sorted(set(offsets))
    assert cache.end_offset_for(requested, leo) == naive_end_offset_for(model, requested, leo)


@given(st.lists(st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**62)), unique_by=lambda t: t[0]))
def test_leader_epoch_checkpoint_round_trip(pairs):
    fs = MemoryFileSystem()
    fs.mkdirs("/p")
    cache = EpochCache([EpochEntry(e, o) for e, o in sorted(pairs)])
    LeaderEpochCheckpoint(fs, "/p").write(cache)
    assert LeaderEpochCheckpoint(fs, "/p").read() == cache


@given(st.dictionaries(st.tuples(st.from_regex(r"[a-zA-Z0-9._-]{1,20}", fullmatch=True), st.integers(0, 1000)),
                       st.integers(0, 2**62)))
def test_offset_checkpoint_round_trip(offsets):
    fs = MemoryFileSystem()
    fs.mkdirs("/d")
    mapping = {TopicPartition(t, p): o for (t, p), o in offsets.items()}
    OffsetCheckpoint(fs, "/d", "recovery-point-offset-checkpoint").write(mapping)
    assert OffsetCheckpoint(fs, "/d", "recovery-point-offset-checkpoint").read() == mapping


@given(st.lists(st.integers(1, 1000), min_size=1, max_size=50), st.integers(0, 60_000))
def test_index_lookup_is_floor_and_survives_reload(gaps, target):
    fs = MemoryFileSystem()
    fs.mkdirs("/p")
    offsets, positions, timestamps = [], [], []
    o = p = t = 0
    for g in gaps:
        o, p, t = o + g, p + g * 10, t + g
        offsets.append(o)
        positions.append(p)
        timestamps.append(t)
    index = OffsetIndex(fs, "/p/0.index", 0, 10**6)
    time_index = TimeIndex(fs, "/p/0.timeindex", 0, 10**6)
    index.load()
    time_index.load()
    for o, p, t in zip(offsets, positions, timestamps, strict=True):
        index.append(o, p)
        time_index.maybe_append(t, o)
    index.flush()  # entries are written behind; a reload follows a flush or a close
    time_index.flush()
    for idx, tidx in ((index, time_index), (OffsetIndex(fs, "/p/0.index", 0, 10**6),
                                             TimeIndex(fs, "/p/0.timeindex", 0, 10**6))):
        idx.load()
        tidx.load()
        floor = [(o, p) for o, p in zip(offsets, positions, strict=True) if o <= target]
        assert idx.lookup(target) == (floor[-1] if floor else (0, 0))
        tfloor = [(t, o) for t, o in zip(timestamps, offsets, strict=True) if t <= target]
        assert tidx.lookup(target) == (tfloor[-1] if tfloor else (-1, 0))
