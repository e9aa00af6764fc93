"""LME truncation, the KIP's "Log Convergence" examples A and B step by step, the
PREPARING -> MIRRORING predicate and the MirrorLeaderEpoch rule."""

from kmirror.log.epoch_cache import EpochCache, EpochEntry
from kmirror.replication.fetcher.truncation import (
    NO_LAST_MIRRORED_EPOCH,
    ReplicaTruncation,
    TruncateFully,
    TruncateTo,
    accepts_batch,
    last_mirrored_epoch_of,
    lme_truncation,
    max_batch_epoch,
    mirror_leader_epoch_for_request,
    mirror_leader_epoch_for_response,
    truncation_progress,
)

# A log is a list of (epoch, payload); a record's offset is its index.
Log = list[tuple[int, str]]


def cache_of(log: Log) -> EpochCache:
    cache = EpochCache()
    for offset, (epoch, _) in enumerate(log):
        cache.assign(epoch, offset)
    return cache


def apply(log: Log, action) -> Log:
    if isinstance(action, TruncateFully):
        assert action.start_offset == 0
        return []
    return log[: action.offset]


def fetch_protocol_converge(local: Log, source: Log) -> Log:
    """What the shared fetch engine does next: truncate to min(source end offset of the
    local last epoch, local end offset of it), then copy the source from there unchanged."""
    if local:
        last_epoch = local[-1][0]
        source_end = cache_of(source).end_offset_for(last_epoch, len(source))[1]
        local = local[: min(source_end, len(local))] if source_end >= 0 else []
    return local + source[len(local):]


def test_example_a_first_mirroring_truncates_everything():
    source_a: Log = [(0, "a0"), (0, "a1"), (1, "a2")]
    dest_b: Log = [(5, "stale")]  # whatever B held before: not from A
    action = lme_truncation(NO_LAST_MIRRORED_EPOCH, cache_of(dest_b), len(dest_b))
    assert action == TruncateFully(0)
    dest_b = apply(dest_b, action)
    assert dest_b == []
    assert fetch_protocol_converge(dest_b, source_a) == source_a


def test_unsupported_api_truncates_to_zero():
    assert lme_truncation(None, cache_of([(0, "x")]), 1) == TruncateFully(0)


def test_example_b_failback_truncates_the_new_record_then_copies_the_delta():
    # A mirrored to B: both hold epochs 0 and 1.
    common: Log = [(0, "r0"), (0, "r1"), (1, "r2"), (1, "r3")]
    # Mirroring stops on B: B stores LME=1, bumps to epoch 2, writes its PID reset + a record.
    dest_b = [*common, (2, "pid-reset"), (2, "b5")]
    lme_on_b = last_mirrored_epoch_of(cache_of(common), len(common))
    assert lme_on_b == 1
    # Meanwhile A also bumps to epoch 2 and gets a new record.
    source_a = [*common, (2, "a4")]
    # A now mirrors from B: asks B for the LME (1) and truncates at the first epoch > 1.
    action = lme_truncation(lme_on_b, cache_of(source_a), len(source_a))
    assert action == TruncateTo(4)
    source_a = apply(source_a, action)
    assert source_a == common  # the new record a4 is gone, nothing B has is lost
    # The fetch protocol finds no divergence within epoch 1 and copies only the delta.
    converged = fetch_protocol_converge(source_a, dest_b)
    assert converged == dest_b
    assert len(converged) - len(source_a) == 2


def test_divergence_within_the_lme_epoch_is_left_to_the_fetch_protocol():
    # B had mirrored only up to r2 (epoch 1) when it failed over; A kept writing epoch 1.
    dest_b: Log = [(0, "r0"), (0, "r1"), (1, "r2"), (3, "pid-reset"), (3, "b4")]
    source_a: Log = [(0, "r0"), (0, "r1"), (1, "r2"), (1, "r3"), (2, "a4")]
    action = lme_truncation(1, cache_of(source_a), len(source_a))
    assert action == TruncateTo(4)  # start of epoch 2 on A
    source_a = apply(source_a, action)
    assert source_a[-1] == (1, "r3")  # epoch 1 still longer than B's: the fetch protocol cuts it
    assert fetch_protocol_converge(source_a, dest_b) == dest_b


def test_no_epoch_beyond_lme_keeps_the_log():
    log: Log = [(0, "a"), (1, "b")]
    assert lme_truncation(1, cache_of(log), 2) == TruncateTo(2)
    assert lme_truncation(7, cache_of(log), 2) == TruncateTo(2)
    assert lme_truncation(0, cache_of(log), 2) == TruncateTo(1)
    assert lme_truncation(0, EpochCache(), 0) == TruncateTo(0)


def test_lme_below_every_local_epoch_truncates_at_the_first_entry():
    cache = EpochCache([EpochEntry(3, 10), EpochEntry(5, 20)])
    assert lme_truncation(1, cache, 30) == TruncateTo(10)


def test_last_mirrored_epoch_of_empty_log():
    assert last_mirrored_epoch_of(EpochCache(), 0) == -1


def test_last_mirrored_epoch_ignores_an_epoch_without_records():
    # A leader change after the topic was removed assigns the destination's own epoch 7 at
    # the log end: no mirrored record is in epoch 7, the LME stays the source's epoch 2.
    cache = EpochCache([EpochEntry(1, 0), EpochEntry(2, 5), EpochEntry(7, 9)])
    assert last_mirrored_epoch_of(cache, 9) == 2
    assert last_mirrored_epoch_of(EpochCache([EpochEntry(7, 0)]), 0) == -1


def progress(**overrides):
    args = dict(leader_id=1, truncation_offset=10, replicas=[1, 2, 3], isr=[1, 2, 3], min_insync_replicas=2,
                followers={2: ReplicaTruncation(10, True), 3: ReplicaTruncation(10, True)},
                support_unclean_leader_election=False)
    args.update(overrides)
    return truncation_progress(**args)


def test_complete_when_every_isr_member_truncated():
    assert progress().complete


def test_waits_for_isr_members():
    p = progress(followers={2: ReplicaTruncation(10, True), 3: ReplicaTruncation(12, True)})
    assert not p.complete and p.pending_replicas == {3}
    p = progress(followers={2: ReplicaTruncation(10, True), 3: ReplicaTruncation(10, False)})
    assert p.pending_replicas == {3}
    assert progress(followers={2: ReplicaTruncation(10, True)}).pending_replicas == {3}


def test_out_of_sync_replica_ignored_unless_unclean_support():
    followers = {2: ReplicaTruncation(10, True)}
    assert progress(isr=[1, 2], followers=followers).complete
    p = progress(isr=[1, 2], followers=followers, support_unclean_leader_election=True)
    assert not p.complete and p.pending_replicas == {3}
    # Once 3 rejoined the ISR and truncated, unclean support is satisfied too.
    assert progress(support_unclean_leader_election=True).complete


def test_below_min_isr_retries():
    p = progress(isr=[1], followers={})
    assert not p.complete and p.below_min_isr and not p.pending_replicas


def test_mirror_leader_epoch_rule():
    # Destination leader answers with the latest epoch of its (source-epoch) log.
    assert mirror_leader_epoch_for_response(True, 9) == 9
    assert mirror_leader_epoch_for_response(False, 9) == -1
    assert mirror_leader_epoch_for_response(True, None) == -1
    assert mirror_leader_epoch_for_request(9) == 9
    assert mirror_leader_epoch_for_request(-5) == -1
    # A follower with local epoch 1 accepts source-epoch-9 batches thanks to MirrorLeaderEpoch...
    bound = max_batch_epoch(current_leader_epoch=1, mirror_leader_epoch=9)
    assert bound == 9 and accepts_batch(9, bound) and not accepts_batch(10, bound)
    # ...and without it the KAFKA-18723 rule uses the current leader epoch.
    assert max_batch_epoch(4, -1) == 4 and not accepts_batch(5, 4)
    assert accepts_batch(100, -1)


def test_lme_ignores_an_epoch_that_starts_at_the_log_end() -> None:
    cache = EpochCache([EpochEntry(0, 0), EpochEntry(3, 5), EpochEntry(4, 9)])  # epoch 4: the local bump
    assert last_mirrored_epoch_of(cache) == 4
    assert last_mirrored_epoch_of(cache, log_end_offset=9) == 3
    assert last_mirrored_epoch_of(cache, log_end_offset=10) == 4
    assert last_mirrored_epoch_of(EpochCache([EpochEntry(2, 0)]), log_end_offset=0) == -1
