"""The mirror state store of one simulated cluster: the real sans-IO `MirrorCoordinator`
(transition table, LME kept on -1, tombstones) over a durable `__mirror_state` model.

`__mirror_state` is modelled as durable (replicated in a real cluster, so a broker crash does
not lose acknowledged state writes): `crash` rebuilds the coordinator by replaying the
persisted records, as a new coordinator loads its partition. Faults are injected by the
simulation through `unavailable` (the coordinator moving or loading: reads and writes fail
and the manager's step stays pending). Every write the coordinator refused as an illegal
transition is kept in `refused`: a correct manager never asks for one.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from kmirror.kip1279.state import MirrorPartitionState
from kmirror.mirror.coordinator.coordinator import MirrorCoordinator, MirrorOutput, StatesResult, StateWrite
from kmirror.mirror.coordinator.records import MirrorPartitionKey, StateRecord
from kmirror.mirror.lifecycle_ports import PartitionKey, StepPending
from kmirror.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class PersistedChange:
    key: MirrorPartitionKey
    old: MirrorPartitionState
    new: MirrorPartitionState  # UNKNOWN for a tombstone


class SimStateStore:
    def __init__(self, topic_name: str) -> None:
        self.topic_name = topic_name
        self.records: list[StateRecord] = []  # the durable `__mirror_state` (one partition)
        self.changes: list[PersistedChange] = []
        self.refused: list[str] = []
        self.unavailable = False
        self._ids = itertools.count()
        self._load()

    def _load(self) -> None:
        self.coordinator = MirrorCoordinator(1)
        self.coordinator.begin_load(0)
        self.coordinator.complete_load(0, list(self.records))

    def crash(self) -> None:
        """The coordinator's memory is lost; a new one replays `__mirror_state`."""
        self._load()

    def current(self, key: MirrorPartitionKey) -> MirrorPartitionState:
        value = self.coordinator.state_of(key)
        return MirrorPartitionState.UNKNOWN if value is None else value.state

    def last_mirrored_epoch(self, key: MirrorPartitionKey) -> int:
        value = self.coordinator.state_of(key)
        return -1 if value is None else value.last_mirrored_epoch

    def _run(self, request_id: int, out: MirrorOutput) -> StatesResult:
        """Execute the coordinator's output as its shell does: persist each append, report
        it, then take the answer."""
        for append in list(out.appends):
            before = {k: self.current(k) for k, _ in append.records if isinstance(k, MirrorPartitionKey)}
            self.records.extend(append.records)
            out.extend(self.coordinator.on_append_completed(append.ticket))
            for k, old in before.items():
                if old is not self.current(k):
                    self.changes.append(PersistedChange(k, old, self.current(k)))
        result = out.response_for(request_id)
        assert isinstance(result, StatesResult)
        return result

    # -- MirrorStateStore ------------------------------------------------------------------

    async def load(self, key: PartitionKey) -> tuple[MirrorPartitionState, int] | None:
        if self.unavailable:
            raise StepPending("ReadMirrorStates: COORDINATOR_NOT_AVAILABLE")
        ckey = MirrorPartitionKey(key.mirror_name, key.topic_id, key.partition)
        rid = next(self._ids)
        (result,) = self._run(rid, self.coordinator.read_states(rid, [ckey])).partitions
        if result.state is MirrorPartitionState.UNKNOWN:
            return None
        return result.state, result.last_mirrored_epoch

    async def save(self, key: PartitionKey, state: MirrorPartitionState | None, last_mirrored_epoch: int) -> None:
        if self.unavailable:
            raise StepPending("WriteMirrorStates: COORDINATOR_NOT_AVAILABLE")
        ckey = MirrorPartitionKey(key.mirror_name, key.topic_id, key.partition)
        rid = next(self._ids)
        write = StateWrite(ckey, self.topic_name, MirrorPartitionState.UNKNOWN if state is None else state,
                           last_mirrored_epoch)
        answer = self._run(rid, self.coordinator.write_states(rid, [write]))
        for partition in answer.partitions:
            if partition.error is ErrorCode.invalid_request:
                self.refused.append(partition.message or "")
            if partition.error is not ErrorCode.none:
                raise StepPending(f"WriteMirrorStates {ckey}: {partition.error.name} {partition.message or ''}")
