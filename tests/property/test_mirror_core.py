"""Property tests of the mirroring core: state machine, membership workflows, LME
truncation and failback convergence, coordinator persistence."""

from uuid import UUID

from hypothesis import example, given, settings
from hypothesis import strategies as st

from kmirror.kip1279.failover import (
    AppendMirrorPidReset,
    AwaitReplicasTruncated,
    ClearState,
    StartFetcher,
    TransitionTo,
    bump_min_leader_epoch,
    bumped_leader_epoch,
    plan_for,
)
from kmirror.kip1279.membership import (
    MembershipStatus,
    Rejected,
    SetMirrorName,
    add_topic,
    is_read_only,
    parse_mirror_name_config,
    pause_topic,
    remove_topic,
    resume_topic,
)
from kmirror.kip1279.state import (
    ALL_STATES,
    IllegalMirrorStateTransition,
    MirrorPartitionState,
    is_valid_transition,
    transition,
)
from kmirror.log.epoch_cache import EpochCache, EpochEntry
from kmirror.mirror.coordinator.coordinator import MirrorCoordinator, StateWrite
from kmirror.mirror.coordinator.records import MirrorPartitionKey
from kmirror.protocol.errors import ErrorCode
from kmirror.replication.fetcher.truncation import TruncateFully, last_mirrored_epoch_of, lme_truncation

S = MirrorPartitionState
states = st.sampled_from(ALL_STATES)


@given(st.lists(states, max_size=60))
def test_random_targets_never_reach_an_illegal_state(targets):
    state = S.UNKNOWN
    for target in targets:
        if is_valid_transition(state, target):
            previous, state = state, transition(state, target)
            assert state is target and state is not S.UNKNOWN
            assert previous in {S.STOPPING} or state is not S.STOPPED
        else:
            try:
                transition(state, target)
            except IllegalMirrorStateTransition:
                pass
            else:
                raise AssertionError(f"{state} -> {target} accepted")


ops = st.sampled_from(["add", "pause", "resume", "remove", "fail", "tick", "delete-source"])
reached_writable_path = [False]


@settings(max_examples=300)
@given(st.lists(ops, max_size=80))
@example(["add", "tick", "remove"])
@example(["add", "tick", "delete-source", "remove", "add", "remove"])
def test_workflows_take_only_legal_steps_and_writable_only_after_detach(script):
    """One partition, one mirror: operator commands change `mirror.name` through the
    workflow functions; the partition leader runs `plan_for` after each metadata update
    (PREPARING completes on 'tick'). No plan step is illegal, and an attached topic accepts
    Produce only when no mirrored data arrived since the last detach plan (LSO truncation,
    LME, bump, PID reset)."""
    config: str | None = None
    state = S.UNKNOWN
    source_topic_exists = True
    mirrored_since_detach = False
    waiting: tuple = ()
    for op in script:
        result: SetMirrorName | Rejected | None = None
        if op == "add":
            result = add_topic(config, "m", [state])
        elif op == "pause":
            result = pause_topic(config, "m", [state])
        elif op == "resume":
            result = resume_topic(config, "m")
        elif op == "remove":
            result = remove_topic(config, "m", [state])
        if isinstance(result, SetMirrorName):
            config = result.value
        if op == "fail" and config is not None:
            state = transition(state, S.FAILED)
        if op == "delete-source":
            source_topic_exists = False
        membership = parse_mirror_name_config(config)
        if op == "tick" and state is S.PREPARING and waiting:
            plan, waiting = waiting, ()  # the followers truncated: the PREPARING plan goes on
        else:
            plan = plan_for(membership, state, "src", source_topic_exists=source_topic_exists)
        for _ in range(3):  # the leader reacts until there is nothing left to do
            if not plan:
                break
            for i, action in enumerate(plan):
                if isinstance(action, AwaitReplicasTruncated):
                    waiting = plan[i + 1:]
                    break
                if isinstance(action, TransitionTo):
                    state = transition(state, action.state)
                    if state is not S.PREPARING:
                        waiting = ()
                elif isinstance(action, StartFetcher):
                    mirrored_since_detach = True
                elif isinstance(action, ClearState):
                    state = S.UNKNOWN
                elif isinstance(action, AppendMirrorPidReset):
                    mirrored_since_detach = False
                    reached_writable_path[0] = True
            plan = plan_for(membership, state, "src", source_topic_exists=source_topic_exists)
        if membership is not None and not is_read_only(membership, state):
            assert not mirrored_since_detach and state in (S.STOPPED, S.UNKNOWN)
            assert membership.status is MembershipStatus.REMOVED


def test_the_workflow_property_exercises_failover():
    reached_writable_path[0] = False
    test_workflows_take_only_legal_steps_and_writable_only_after_detach()
    assert reached_writable_path[0]


@settings(max_examples=300)
@given(st.lists(st.integers(0, 20), min_size=0, max_size=30), st.integers(0, 30), st.integers(0, 40))
def test_epochs_never_go_backwards_through_failover(source_epoch_steps, lso_cut, local_leader_epoch):
    """Mirrored batches keep their source epochs; on failover the log is truncated to the
    LSO, the LME read, the leader epoch bumped and the PID reset appended with it: the
    epoch cache only ever grows, and the new epoch is above every mirrored one."""
    epochs = []
    epoch = 0
    for step in source_epoch_steps:
        epoch += step % 3
        epochs.append(epoch)
    cache = EpochCache()
    for offset, e in enumerate(epochs):
        before = cache.entries
        cache.assign(e, offset)
        assert cache.entries[: len(before)] == before
    end = min(lso_cut, len(epochs))
    cache.truncate_from_end(end)
    lme = last_mirrored_epoch_of(cache, end)
    assert all(e <= lme for e in epochs[:end])
    new_epoch = bumped_leader_epoch(local_leader_epoch, bump_min_leader_epoch(lme))
    assert new_epoch > lme and new_epoch > local_leader_epoch
    before = cache.entries
    cache.assign(new_epoch, end)  # the MIRROR_PID_RESET batch
    assert cache.entries == [*before, EpochEntry(new_epoch, end)]


@st.composite
def failback_scenario(draw):
    """A's log C (epochs non-decreasing); B mirrored C[:k]; B failed over (LME, bump, PID
    reset, own records); A kept writing in its last epoch and then in newer epochs."""
    epochs = sorted(draw(st.lists(st.integers(0, 6), min_size=0, max_size=15)))
    common = [(e, f"c{i}") for i, e in enumerate(epochs)]
    k = draw(st.integers(0, len(common)))
    b = list(common[:k])
    lme = last_mirrored_epoch_of(cache_of(b), len(b))
    b_epoch = bump_min_leader_epoch(lme) + draw(st.integers(0, 2))
    b += [(b_epoch, "pid-reset")] + [(b_epoch, f"b{i}") for i in range(draw(st.integers(0, 3)))]
    a = list(common)
    last = a[-1][0] if a else 0
    a += [(last, f"a{i}") for i in range(draw(st.integers(0, 3)))]
    a_epoch = last + draw(st.integers(1, 3))
    a += [(a_epoch, f"a-new{i}") for i in range(draw(st.integers(0, 3)))]
    return a, b, k, lme


def cache_of(log):
    cache = EpochCache()
    for offset, (epoch, _) in enumerate(log):
        cache.assign(epoch, offset)
    return cache


@settings(max_examples=300)
@given(failback_scenario())
def test_failback_truncation_keeps_the_matching_prefix_and_converges(scenario):
    a, b, k, lme = scenario
    action = lme_truncation(lme, cache_of(a), len(a))
    if isinstance(action, TruncateFully):
        assert lme == -1 and k == 0
        a = []
    else:
        # never truncates data of epochs <= LME that matches the new source
        assert action.offset >= k
        a = a[: action.offset]
        assert all(epoch <= lme for epoch, _ in a)
    # fetch protocol: truncate to min(source end offset of our last epoch, ours), copy
    if a:
        source_end = cache_of(b).end_offset_for(a[-1][0], len(b))[1]
        a = a[: min(source_end, len(a))] if source_end >= 0 else []
    assert a == b[: len(a)]  # what is kept is exactly the source's prefix
    a = a + b[len(a):]
    assert a == b


keys = st.builds(MirrorPartitionKey, st.sampled_from(["m", "n"]), st.sampled_from([UUID(int=1), UUID(int=2)]),
                 st.integers(0, 3))


@settings(max_examples=200)
@given(st.lists(st.tuples(keys, states, st.integers(-1, 5), st.booleans()), max_size=40))
def test_coordinator_state_equals_replay_of_its_appends(writes):
    coordinator = MirrorCoordinator(num_partitions=3)
    for p in range(3):
        coordinator.begin_load(p)
        coordinator.complete_load(p, [])
    log: dict[int, list] = {p: [] for p in range(3)}
    model: dict[MirrorPartitionKey, S] = {}
    for i, (key, target, lme, succeed) in enumerate(writes):
        out = coordinator.write_states(i, [StateWrite(key, "t", target, lme)])
        current = model.get(key, S.UNKNOWN)
        # UNKNOWN clears a FAILED partition (a tombstone); clearing nothing appends nothing.
        clear = target is S.UNKNOWN and current in (S.FAILED, S.UNKNOWN)
        legal = clear or (target is not S.UNKNOWN and (target is current or is_valid_transition(current, target)))
        assert bool(out.appends) == (legal and not (clear and current is S.UNKNOWN))
        if not legal:
            assert out.response_for(i).partitions[0].error is ErrorCode.invalid_request
        elif not out.appends:
            assert out.response_for(i).partitions[0].error is ErrorCode.none
        for append in out.appends:
            error = ErrorCode.none if succeed else ErrorCode.not_leader_or_follower
            result = coordinator.on_append_completed(append.ticket, error)
            assert result.response_for(i).partitions[0].error is error
            if succeed:
                log[append.partition].extend(append.records)
                if target is S.UNKNOWN:
                    model.pop(key, None)
                else:
                    model[key] = target
    for key in {w[0] for w in writes} - set(model):
        assert coordinator.state_of(key) is None
    for key, state in model.items():
        value = coordinator.state_of(key)
        assert value is not None and value.state is state
    replayed = MirrorCoordinator(num_partitions=3)
    for p in range(3):
        replayed.begin_load(p)
        replayed.complete_load(p, log[p])
    for key in {w[0] for w in writes}:
        assert replayed.state_of(key) == coordinator.state_of(key)
