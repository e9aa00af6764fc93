"""Simulated classic consumers for the sans-IO group coordinator: JoinGroup (with the KIP-394
handshake), SyncGroup and Heartbeat with the `consumer` embedded protocol, as a Java or
librdkafka consumer runs them, whether the group is a classic group or a consumer group being
migrated online.

A member is *eager* (it revokes everything before it rejoins, as `range`) or *cooperative*
(KIP-429: it reports what it owns, gives up only what an assignment takes away, then rejoins).
When it leads a classic group it assigns `topic`'s partitions in ranges over the member ids;
a cooperative leader holds back a partition another member still owns, as the cooperative
protocol does. Requests are sent one at a time; `poll` reads the answer of the one in flight
and moves on, so a JoinGroup that waits on a classic rebalance simply stays pending.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kmirror.coordinator.group.member import Protocol
from kmirror.coordinator.results import JoinResult, SyncResult
from kmirror.protocol.consumer_protocol import (
    ConsumerSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kmirror.protocol.errors import ErrorCode
from kmirror.testing.groups import CoreHarness

E = ErrorCode
PARTITIONS_OF = Callable[[str], int]


@dataclass
class ClassicMember:
    name: str
    h: CoreHarness
    cooperative: bool = True
    instance_id: str | None = None
    topic: str = "t"
    group: str = "g"
    session_ms: int = 10_000
    rebalance_ms: int = 30_000
    member_id: str = ""
    generation: int = -1
    protocol: str | None = None
    owned: set[int] = field(default_factory=set)
    join_rid: int | None = None
    sync_rid: int | None = None
    errors: list[ErrorCode] = field(default_factory=list)

    @property
    def protocols(self) -> tuple[str, ...]:
        return ("cooperative-sticky",) if self.cooperative else ("range", "roundrobin")

    @property
    def idle(self) -> bool:
        return self.join_rid is None and self.sync_rid is None

    def subscription(self) -> bytes:
        owned = ((self.topic, tuple(sorted(self.owned))),) if self.owned else ()
        return encode_subscription(ConsumerSubscription(1, (self.topic,), None, owned))

    def join(self) -> None:
        """(Re)join: an eager member first revokes all it owns."""
        if not self.cooperative:
            self.owned = set()
        rid = self.h.next_request_id()
        self.h.run(self.h.core.join(
            rid, group_id=self.group, member_id=self.member_id, group_instance_id=self.instance_id,
            client_id=self.name, client_host="/127.0.0.1", session_timeout_ms=self.session_ms,
            rebalance_timeout_ms=self.rebalance_ms, protocol_type="consumer",
            protocols=tuple(Protocol(p, self.subscription()) for p in self.protocols),
            require_known_member_id=True, supports_skip_assignment=True,
        ))
        self.join_rid, self.sync_rid = rid, None

    def poll(self, partitions_of: PARTITIONS_OF) -> None:
        """Act on the answer of the request in flight, or heartbeat when none is."""
        if self.join_rid is not None:
            result = self.h.responses.pop(self.join_rid, None)
            if result is not None:
                self.join_rid = None
                self._joined(result, partitions_of)
        elif self.sync_rid is not None:
            result = self.h.responses.pop(self.sync_rid, None)
            if result is not None:
                self.sync_rid = None
                self._synced(result)
        else:
            self.heartbeat()

    def heartbeat(self) -> None:
        error = self.h.core.heartbeat(group_id=self.group, generation_id=self.generation, member_id=self.member_id,
                                      group_instance_id=self.instance_id)
        if error == E.none:
            return
        self.errors.append(error)
        if error in (E.illegal_generation, E.unknown_member_id, E.fenced_instance_id):
            self._lose(error)
        self.join()

    def leave(self) -> None:
        rid = self.h.next_request_id()
        self.h.run(self.h.core.leave(rid, group_id=self.group, members=[(self.member_id, self.instance_id)]))
        self.owned = set()

    def _lose(self, error: ErrorCode) -> None:
        """Fenced: its partitions are lost (not revoked); an unknown member starts over."""
        self.owned, self.generation = set(), -1
        if error == E.unknown_member_id:
            self.member_id = ""

    def _joined(self, result: JoinResult, partitions_of: PARTITIONS_OF) -> None:
        if result.error == E.member_id_required:
            self.member_id = result.member_id
            self.join()
            return
        if result.error != E.none:
            self.errors.append(result.error)
            if result.error in (E.unknown_member_id, E.illegal_generation):
                self._lose(result.error)
            self.join()
            return
        self.member_id, self.generation, self.protocol = result.member_id, result.generation_id, result.protocol_name
        assignments = self._assign(result, partitions_of(self.topic)) if result.members else {}
        rid = self.h.next_request_id()
        self.h.run(self.h.core.sync(
            rid, group_id=self.group, generation_id=self.generation, member_id=self.member_id,
            protocol_type="consumer", protocol_name=self.protocol, assignments=assignments,
            group_instance_id=self.instance_id,
        ))
        self.sync_rid = rid

    def _synced(self, result: SyncResult) -> None:
        if result.error != E.none:
            self.errors.append(result.error)
            if result.error in (E.unknown_member_id, E.illegal_generation):
                self._lose(result.error)
            self.join()
            return
        assigned = decode_assignment(result.assignment) if result.assignment else None
        new = {p for t, ps in (assigned.partitions if assigned else ()) for p in ps if t == self.topic}
        revoked = self.owned - new
        self.owned = new
        if self.cooperative and revoked:
            self.join()  # KIP-429: rejoin once the revoked partitions are given up

    def _assign(self, result: JoinResult, partitions: int) -> dict[str, bytes]:
        """The leader's assignment: ranges over the sorted member ids; a cooperative leader
        holds back partitions another member owns (they move in the next rebalance)."""
        members = sorted(m.member_id for m in result.members)
        owners = {p: m.member_id for m in result.members
                  for t, ps in decode_subscription(m.metadata).owned_partitions if t == self.topic for p in ps}
        per, extra = divmod(partitions, len(members))
        out, start = {}, 0
        for i, member_id in enumerate(members):
            size = per + (1 if i < extra else 0)
            mine = [p for p in range(start, start + size)
                    if not (self.cooperative and owners.get(p) not in (None, member_id))]
            out[member_id] = encode_assignment({self.topic: mine}, 1)
            start += size
        return out
