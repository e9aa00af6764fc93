"""The sans-IO MirrorCoordinator (KIP-1279 "MirrorCoordinator"; the group coordinator's shape).

A mirror partition's state lives in partition `partition_for(mirror, topic id, partition)`
of the compacted `__mirror_state`; this node coordinates it only while it leads that
partition and has loaded it ("When a broker becomes the leader for a __mirror_state
partition, it loads the mirror metadata ...; On resignation, it clears its in-memory state").

Events in: `begin_load` / `complete_load` / `unload`, `read_states` (ReadMirrorStates or a
local read), `write_states` (WriteMirrorStates or a local write), `remove_topics`,
`delete_mirror`, `on_append_completed`, `poll` (no timers: the KIP's states need none).
Values out: `MirrorOutput` (appends, then responses), executed by `CoordinatorRuntime`
(the group and transaction coordinators' shell) in this order:
1. append each `StateAppend`'s records to its `__mirror_state` partition, durably;
2. report it with `on_append_completed(ticket, error)`: a write is answered, and becomes
   visible to reads, only once persisted; a failed append answers its error and is forgotten;
3. deliver `responses` (request id -> result).

Errors, per partition, as values: NOT_COORDINATOR (this node does not lead the key's
partition: the caller finds the coordinator again), COORDINATOR_LOAD_IN_PROGRESS (loading),
COORDINATOR_NOT_AVAILABLE (the coordinator is shut down), INVALID_REQUEST (a state the
transition table forbids). The KIP's RPCs carry no coordinator epoch; fencing is the
`__mirror_state` partition leadership itself (an append by a deposed leader fails).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from uuid import UUID

from kmirror.coordinator.partition_status import PartitionStatus, partition_coordinator_error
from kmirror.coordinator.results import Output
from kmirror.kip1279.state import MirrorPartitionState, is_valid_transition
from kmirror.mirror.coordinator.partitioner import metadata_partition_for, partition_for
from kmirror.mirror.coordinator.records import (
    NO_LAST_MIRRORED_EPOCH,
    AclEntry,
    ManagedAclsKey,
    ManagedAclsValue,
    MirrorPartitionKey,
    MirrorPartitionStateValue,
    StateRecord,
)
from kmirror.protocol.errors import ErrorCode

E = ErrorCode
S = MirrorPartitionState


@dataclass(frozen=True, slots=True)
class StateAppend:
    ticket: int
    partition: int
    records: list[StateRecord]


@dataclass(frozen=True, slots=True)
class PartitionStateResult:
    key: MirrorPartitionKey
    error: ErrorCode
    state: MirrorPartitionState = S.UNKNOWN
    last_mirrored_epoch: int = NO_LAST_MIRRORED_EPOCH
    message: str | None = None


@dataclass(frozen=True, slots=True)
class StatesResult:
    """Answer to a read or write: one result per requested key, in request order."""

    partitions: tuple[PartitionStateResult, ...]


@dataclass(frozen=True, slots=True)
class ManagedAclsResult:
    """Answer to a write of a mirror's managed ACL bindings."""

    error: ErrorCode


MirrorOutput = Output[StateAppend]


@dataclass(frozen=True, slots=True)
class StateWrite:
    """One partition of a WriteMirrorStates: the target state, and the LME to store
    (-1: keep the stored one, the KIP's "-1 if not available")."""

    key: MirrorPartitionKey
    topic_name: str
    state: MirrorPartitionState
    last_mirrored_epoch: int = NO_LAST_MIRRORED_EPOCH


@dataclass
class CoreState:
    """What `CoordinatorRuntime` reads: the `__mirror_state` partitions loading or loaded here."""

    partitions: dict[int, PartitionStatus] = field(default_factory=dict)


@dataclass
class _Pending:
    request_id: int
    records: list[StateRecord]
    results: list[PartitionStateResult]
    tickets: set[int]
    acls_error: ErrorCode | None = None  # a managed-ACLs write: its outcome


class MirrorCoordinator:
    def __init__(self, num_partitions: int) -> None:
        if num_partitions < 1:
            raise ValueError("__mirror_state needs at least one partition")
        self.num_partitions = num_partitions
        self.active = True
        self.state = CoreState()
        self._states: dict[MirrorPartitionKey, MirrorPartitionStateValue] = {}
        self._managed_acls: dict[str, frozenset[AclEntry]] = {}
        self._in_flight: dict[int, tuple[int, list[StateRecord]]] = {}  # ticket -> (request, records)
        # key -> (ticket, value) of its latest value being appended, which validation sees
        self._in_flight_latest: dict[MirrorPartitionKey | ManagedAclsKey,
                                     tuple[int, MirrorPartitionStateValue | ManagedAclsValue | None]] = {}
        self._requests: dict[int, _Pending] = {}
        self._next_ticket = 0

    # ---- ownership -------------------------------------------------------------------

    def partition_for(self, key: MirrorPartitionKey | ManagedAclsKey) -> int:
        if isinstance(key, ManagedAclsKey):
            return metadata_partition_for(key.mirror_name, self.num_partitions)
        return partition_for(key.mirror_name, key.topic_id, key.partition, self.num_partitions)

    def coordinator_error(self, key: MirrorPartitionKey | ManagedAclsKey) -> ErrorCode | None:
        if not self.active:
            return E.coordinator_not_available
        return partition_coordinator_error(self.state.partitions, self.partition_for(key))

    def begin_load(self, partition: int) -> None:
        self.state.partitions[partition] = PartitionStatus.LOADING

    def complete_load(self, partition: int, records: Iterable[StateRecord]) -> None:
        """Replay the partition's records in offset order (last value per key wins, a
        tombstone deletes). Records of keys hashed elsewhere are a broken invariant."""
        for record in records:
            if self.partition_for(record[0]) != partition:
                raise ValueError(f"record for {record[0]} found in __mirror_state-{partition}")
            self._apply(record)
        self.state.partitions[partition] = PartitionStatus.LOADED

    def _apply(self, record: StateRecord) -> None:
        key, value = record
        if isinstance(key, ManagedAclsKey):
            if value is None:
                self._managed_acls.pop(key.mirror_name, None)
            else:
                assert isinstance(value, ManagedAclsValue)
                self._managed_acls[key.mirror_name] = value.acls
        elif value is None:
            self._states.pop(key, None)
        else:
            assert isinstance(value, MirrorPartitionStateValue)
            self._states[key] = value

    def unload(self, partition: int) -> MirrorOutput:
        """Resignation: forget the partition's states; writes waiting on its appends answer
        NOT_COORDINATOR."""
        self.state.partitions.pop(partition, None)
        for key in [k for k in self._states if self.partition_for(k) == partition]:
            del self._states[key]
        for name in [n for n in self._managed_acls if metadata_partition_for(n, self.num_partitions) == partition]:
            del self._managed_acls[name]
        out = MirrorOutput()
        for ticket, (_request_id, records) in list(self._in_flight.items()):
            if records and self.partition_for(records[0][0]) == partition:
                out.extend(self.on_append_completed(ticket, E.not_coordinator))
        return out

    def shutdown(self) -> None:
        self.active = False
        self.state.partitions.clear()
        self._states.clear()
        self._managed_acls.clear()

    def next_deadline_ms(self) -> int | None:
        """No timers: a mirror partition's state changes only on a write."""
        return None

    def poll(self, now_ms: int) -> MirrorOutput:
        return MirrorOutput()

    @property
    def loaded_partitions(self) -> frozenset[int]:
        return frozenset(p for p, s in self.state.partitions.items() if s is PartitionStatus.LOADED)

    # ---- reads -----------------------------------------------------------------------

    def state_of(self, key: MirrorPartitionKey) -> MirrorPartitionStateValue | None:
        """The persisted value of a loaded key (None: no state, i.e. UNKNOWN)."""
        return self._states.get(key)

    def read_states(self, request_id: int, keys: Sequence[MirrorPartitionKey]) -> MirrorOutput:
        """ReadMirrorStates: the persisted state and LME per key; UNKNOWN / -1 when the key
        has no state. Writes not yet persisted are not visible."""
        results = []
        for key in keys:
            error = self.coordinator_error(key)
            if error is not None:
                results.append(PartitionStateResult(key, error))
                continue
            value = self._states.get(key)
            if value is None:
                results.append(PartitionStateResult(key, E.none))
            else:
                results.append(PartitionStateResult(key, E.none, value.state, value.last_mirrored_epoch))
        return MirrorOutput(responses=[(request_id, StatesResult(tuple(results)))])

    def last_mirrored_epoch(self, key: MirrorPartitionKey) -> int | ErrorCode:
        """The LME the source side answers in DescribeMirrors (-1 when unknown)."""
        error = self.coordinator_error(key)
        if error is not None:
            return error
        value = self._states.get(key)
        return NO_LAST_MIRRORED_EPOCH if value is None else value.last_mirrored_epoch

    def managed_acls(self, mirror_name: str) -> frozenset[AclEntry] | None | ErrorCode:
        """The mirror's persisted managed ACL bindings (None: never written), or why this
        node cannot answer (not the coordinator of its metadata partition, loading)."""
        error = self.coordinator_error(ManagedAclsKey(mirror_name))
        if error is not None:
            return error
        return self._managed_acls.get(mirror_name)

    def states_of_mirror(self, mirror_name: str) -> dict[MirrorPartitionKey, MirrorPartitionStateValue]:
        return {k: v for k, v in self._states.items() if k.mirror_name == mirror_name}

    # ---- writes ----------------------------------------------------------------------

    def _effective(self, key: MirrorPartitionKey) -> MirrorPartitionStateValue | None:
        """The latest value including writes still being appended (validation sees them)."""
        in_flight = self._in_flight_latest.get(key)
        if in_flight is None:
            return self._states.get(key)
        value = in_flight[1]
        assert not isinstance(value, ManagedAclsValue)
        return value

    def write_states(self, request_id: int, writes: Sequence[StateWrite]) -> MirrorOutput:
        """WriteMirrorStates. Each partition's move must be legal in the transition table;
        rewriting the current state is accepted (a retried write, or an LME update).
        UNKNOWN is not a state of the table: writing it clears a FAILED partition (a
        tombstone of that partition only, the "remove and add back" of a failed partition)
        and is accepted without a record once cleared; from any other state it is refused.
        Answered once every accepted record is persisted."""
        results: list[PartitionStateResult] = []
        records: list[StateRecord] = []
        for write in writes:
            error = self.coordinator_error(write.key)
            if error is not None:
                results.append(PartitionStateResult(write.key, error))
                continue
            current = self._effective(write.key)
            current_state = S.UNKNOWN if current is None else current.state
            if write.state is S.UNKNOWN and current_state in (S.FAILED, S.UNKNOWN):
                if current_state is S.FAILED:
                    records.append((write.key, None))
                results.append(PartitionStateResult(write.key, E.none, S.UNKNOWN, NO_LAST_MIRRORED_EPOCH))
                continue
            if write.state is S.UNKNOWN or (
                write.state is not current_state and not is_valid_transition(current_state, write.state)
            ):
                results.append(PartitionStateResult(
                    write.key, E.invalid_request, current_state,
                    NO_LAST_MIRRORED_EPOCH if current is None else current.last_mirrored_epoch,
                    f"Illegal mirror partition state transition {current_state.name} -> {write.state.name}"))
                continue
            lme = write.last_mirrored_epoch
            if lme < 0 and current is not None:
                lme = current.last_mirrored_epoch
            value = MirrorPartitionStateValue(write.topic_name, write.state, max(lme, NO_LAST_MIRRORED_EPOCH))
            records.append((write.key, value))
            results.append(PartitionStateResult(write.key, E.none, value.state, value.last_mirrored_epoch))
        return self._append(request_id, records, results)

    def remove_topics(self, request_id: int, mirror_name: str, topic_ids: Iterable[UUID]) -> MirrorOutput:
        """WriteMirrorStates.RemovedTopics: tombstone every loaded state of these topics in
        this mirror (each coordinator owning some of their partitions gets the request)."""
        wanted = set(topic_ids)
        keys = sorted({k for k in self._states if k.mirror_name == mirror_name and k.topic_id in wanted}
                      | {k for _, recs in self._in_flight.values() for k, _ in recs
                         if isinstance(k, MirrorPartitionKey) and k.mirror_name == mirror_name
                         and k.topic_id in wanted})
        kept = [k for k in keys if self.coordinator_error(k) is None]
        records: list[StateRecord] = [(k, None) for k in kept]
        results = [PartitionStateResult(k, E.none) for k in kept]
        return self._append(request_id, records, results)

    def delete_mirror(self, request_id: int, mirror_name: str) -> MirrorOutput:
        """DeleteMirror: tombstone every state of the mirror this coordinator holds (and its
        managed ACL bindings)."""
        keys = sorted(k for k in self._states if k.mirror_name == mirror_name and self.coordinator_error(k) is None)
        records: list[StateRecord] = [(k, None) for k in keys]
        acls_key = ManagedAclsKey(mirror_name)
        if mirror_name in self._managed_acls and self.coordinator_error(acls_key) is None:
            records.append((acls_key, None))
        return self._append(request_id, records, [PartitionStateResult(k, E.none) for k in keys])

    def write_managed_acls(self, request_id: int, mirror_name: str, acls: frozenset[AclEntry]) -> MirrorOutput:
        """Persist the mirror's managed ACL bindings (one compacted record, the whole set);
        answered with `ManagedAclsResult` once appended."""
        key = ManagedAclsKey(mirror_name)
        error = self.coordinator_error(key)
        if error is not None:
            return MirrorOutput(responses=[(request_id, ManagedAclsResult(error))])
        out = self._append(request_id, [(key, ManagedAclsValue(frozenset(acls)))], [])
        self._requests[request_id].acls_error = E.none
        return out

    def _append(self, request_id: int, records: list[StateRecord],
                results: list[PartitionStateResult]) -> MirrorOutput:
        if not records:
            return MirrorOutput(responses=[(request_id, StatesResult(tuple(results)))])
        by_partition: dict[int, list[StateRecord]] = {}
        for record in records:
            by_partition.setdefault(self.partition_for(record[0]), []).append(record)
        out = MirrorOutput()
        pending = _Pending(request_id, records, results, set())
        for partition, partition_records in sorted(by_partition.items()):
            ticket = self._next_ticket
            self._next_ticket += 1
            self._in_flight[ticket] = (request_id, partition_records)
            for key, value in partition_records:
                self._in_flight_latest[key] = (ticket, value)
            pending.tickets.add(ticket)
            out.appends.append(StateAppend(ticket, partition, partition_records))
        self._requests[request_id] = pending
        return out

    def _forget_in_flight(self, ticket: int, records: list[StateRecord], appended: bool) -> None:
        """An appended record stops being in flight unless a later append of its key is. After a
        failed append, the latest values in flight are taken again from the appends left
        (failures are rare: a resignation, a full ISR loss)."""
        if appended:
            for key, _ in records:
                latest = self._in_flight_latest.get(key)
                if latest is not None and latest[0] == ticket:
                    del self._in_flight_latest[key]
            return
        self._in_flight_latest = {key: (t, value) for t, (_, recs) in self._in_flight.items() for key, value in recs}

    def on_append_completed(self, ticket: int, error: ErrorCode = E.none) -> MirrorOutput:
        """The shell reports an append. Success makes its records visible; failure drops
        them and answers their partitions with `error`."""
        entry = self._in_flight.pop(ticket, None)
        if entry is None:
            return MirrorOutput()
        request_id, records = entry
        self._forget_in_flight(ticket, records, error is E.none)
        pending = self._requests[request_id]
        pending.tickets.discard(ticket)
        if error is E.none:
            for record in records:
                if self.coordinator_error(record[0]) is not None:
                    continue  # resigned meanwhile: the next leader replays the log
                self._apply(record)
        else:
            if pending.acls_error is not None:
                pending.acls_error = error
            failed = {key for key, _ in records}
            pending.results = [
                PartitionStateResult(r.key, error) if r.key in failed and r.error is E.none else r
                for r in pending.results
            ]
        if pending.tickets:
            return MirrorOutput()
        del self._requests[request_id]
        if pending.acls_error is not None:
            return MirrorOutput(responses=[(request_id, ManagedAclsResult(pending.acls_error))])
        return MirrorOutput(responses=[(request_id, StatesResult(tuple(pending.results)))])
