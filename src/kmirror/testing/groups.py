"""Test helpers for the group coordinator: a core with a manual clock, and an in-memory
`CoordinatorLog`."""

from __future__ import annotations

import itertools
from typing import Any

from kmirror.coordinator.config import CoordinatorConfig
from kmirror.coordinator.consumer_group.ports import TopicInfo
from kmirror.coordinator.group.coordinator import GroupCoordinator
from kmirror.coordinator.group.member import Protocol
from kmirror.coordinator.offsets.replay import remove_from_open_transactions
from kmirror.coordinator.results import GroupOutput
from kmirror.log.producer_state import VerificationGuard
from kmirror.ports import ManualClock
from kmirror.protocol.errors import ErrorCode


class MemoryCoordinatorLog:
    """`CoordinatorLog` kept in memory; `fail_with` makes the next appends raise. It verifies
    no transaction (`maybe_start_transaction_verification` answers None) unless told the
    answer (`verification`); `guards` are those the transactional appends carried."""

    def __init__(self) -> None:
        self.partitions: dict[int, list[tuple[bytes, bytes | None]]] = {}
        # partition -> producer id -> records of its open transaction
        self.transactional: dict[int, dict[int, list[tuple[bytes, bytes | None]]]] = {}
        self.fail_with: Exception | None = None
        self.verification: VerificationGuard | ErrorCode | None = None
        self.guards: list[VerificationGuard | None] = []

    async def maybe_start_transaction_verification(self, partition: int, *, transactional_id: str,
                                                   producer_id: int,
                                                   producer_epoch: int) -> VerificationGuard | ErrorCode | None:
        return self.verification

    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]], *, producer_id: int = -1,
                     producer_epoch: int = -1, verification_guard: VerificationGuard | None = None) -> int:
        if self.fail_with is not None:
            raise self.fail_with
        if producer_id >= 0:
            self.guards.append(verification_guard)
        self.write(partition, records, producer_id)
        return len(self.partitions.get(partition, [])) - 1

    def write(self, partition: int, records: list[tuple[bytes, bytes | None]], producer_id: int = -1) -> None:
        """Records of a producer's transaction are held until its marker; a tombstone outside
        a transaction takes its key out of the open ones (as a log's replay does)."""
        if producer_id >= 0:
            self.transactional.setdefault(partition, {}).setdefault(producer_id, []).extend(records)
            return
        self.partitions.setdefault(partition, []).extend(records)
        for key, value in records:
            if value is None:
                remove_from_open_transactions(self.transactional.get(partition, {}), key)

    async def append_end_transaction_marker(self, partition: int, *, producer_id: int, producer_epoch: int,
                                            coordinator_epoch: int, committed: bool) -> int:
        if self.fail_with is not None:
            raise self.fail_with
        self.end_transaction(partition, producer_id, committed)
        return len(self.partitions.get(partition, [])) - 1

    def end_transaction(self, partition: int, producer_id: int, committed: bool) -> None:
        """A marker: the producer's transactional records join the log at a COMMIT."""
        held = self.transactional.get(partition, {}).pop(producer_id, [])
        if committed:
            self.partitions.setdefault(partition, []).extend(held)

    def read_all(self, partition: int) -> list[tuple[bytes, bytes | None]]:
        return list(self.partitions.get(partition, []))

    def open_transactions(self, partition: int) -> dict[int, list[tuple[bytes, bytes | None]]]:
        return {pid: list(records) for pid, records in self.transactional.get(partition, {}).items()}


class CoreHarness:
    """Drives a `GroupCoordinator` the way the shell does: appends succeed at once and
    their completions' responses are collected with the event's own."""

    def __init__(self, **config: Any) -> None:
        defaults: dict[str, Any] = {"offsets_topic_num_partitions": 1, "group_initial_rebalance_delay_ms": 0}
        defaults.update(config)
        self.config = CoordinatorConfig(**defaults)
        self.clock = ManualClock()
        ids = itertools.count(1)
        # the cluster's topics, as the broker's metadata image gives them to the core
        self.topics: dict[str, TopicInfo] = {}
        self.core = GroupCoordinator(self.config, self.clock, lambda: f"uuid{next(ids)}", lambda: self.topics)
        self.log = MemoryCoordinatorLog()
        self.responses: dict[int, Any] = {}
        self._request_ids = itertools.count(1)
        self.pending = 0  # request id of the last `new_member` real JoinGroup
        for p in range(self.config.offsets_topic_num_partitions):
            self.core.begin_load(p)
            self.core.complete_load(p, [])

    def next_request_id(self) -> int:
        return next(self._request_ids)

    def run(self, out: GroupOutput) -> GroupOutput:
        """Execute appends (to the memory log) and completions; return everything answered."""
        done = GroupOutput(responses=list(out.responses))
        for append in out.appends:
            self.log.write(append.partition, list(append.records), append.producer_id)
            done.extend(self.run(self.core.on_append_completed(append.ticket, ErrorCode.none)))
        for rid, result in done.responses:
            self.responses[rid] = result
        return done

    def join(self, member_id: str = "", *, group: str = "g", client_id: str = "c", session_ms: int = 10_000,
             rebalance_ms: int = 30_000, protocols: tuple[str, ...] = ("range",), protocol_type: str = "consumer",
             require_known: bool = True, metadata: bytes = b"m", instance_id: str | None = None,
             skip_assignment: bool = True) -> int:
        rid = self.next_request_id()
        self.run(self.core.join(
            rid, group_id=group, member_id=member_id, group_instance_id=instance_id, client_id=client_id,
            client_host="/127.0.0.1", session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms,
            protocol_type=protocol_type, protocols=tuple(Protocol(p, metadata) for p in protocols),
            require_known_member_id=require_known, supports_skip_assignment=skip_assignment,
        ))
        return rid

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None,
             *, group: str = "g", instance_id: str | None = None) -> int:
        rid = self.next_request_id()
        self.run(self.core.sync(
            rid, group_id=group, generation_id=generation, member_id=member_id, protocol_type=None,
            protocol_name=None, assignments=assignments or {}, group_instance_id=instance_id,
        ))
        return rid

    def leave(self, *member_ids: str, group: str = "g") -> int:
        return self.leave_members([(m, None) for m in member_ids], group=group)

    def leave_members(self, members: list[tuple[str, str | None]], *, group: str = "g") -> int:
        """LeaveGroup v3+: (member id, group instance id) pairs."""
        rid = self.next_request_id()
        self.run(self.core.leave(rid, group_id=group, members=members))
        return rid

    def advance(self, ms: int) -> GroupOutput:
        self.clock.advance(ms)
        return self.run(self.core.poll(self.clock.monotonic_ms()))

    def new_member(self, group: str = "g", **kw: Any) -> str:
        """MEMBER_ID_REQUIRED handshake, then the real join; returns the member id."""
        first = self.responses[self.join(group=group, **kw)]
        assert first.error == ErrorCode.member_id_required
        self.pending = self.join(first.member_id, group=group, **kw)
        return str(first.member_id)
