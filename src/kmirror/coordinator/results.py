"""What the coordinator core answers, as values. Handlers map these to kio responses.

`Output` is the core's action list, executed by the shell in this order:
1. append each `Append`'s records to its `__consumer_offsets` partition, durably;
2. report each append with `GroupCoordinator.on_append_completed(ticket, error)`, whose
   Output carries the responses that waited on it (a commit is answered only once
   persisted; a SyncGroup only once the generation's assignment is persisted);
3. deliver `responses` (request id -> result), which need no persistence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar

from kmirror.log.producer_state import VerificationGuard
from kmirror.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class Append:
    ticket: int
    partition: int
    records: list[tuple[bytes, bytes | None]]
    # a transactional write (TxnOffsetCommit): the producer whose transaction's marker will
    # commit or abort these records; -1 for the coordinator's own records
    producer_id: int = -1
    producer_epoch: int = -1
    # KIP-890 part 1: the guard of the transactional write's verification, which the partition
    # checks at the append (None: not verified)
    verification_guard: VerificationGuard | None = None


A = TypeVar("A")


@dataclass
class Output(Generic[A]):
    """A coordinator core's actions: `appends` (of the core's own record type: `Append` for
    groups, `StateAppend` for KIP-1279 mirror states) before `responses`."""

    responses: list[tuple[int, object]] = field(default_factory=list)
    appends: list[A] = field(default_factory=list)

    def extend(self, other: Output[A]) -> Output[A]:
        self.responses.extend(other.responses)
        self.appends.extend(other.appends)
        return self

    def response_for(self, request_id: int) -> object:
        """The result for one request, if this output carries it (tests, shells)."""
        for rid, result in self.responses:
            if rid == request_id:
                return result
        return None


GroupOutput = Output[Append]


@dataclass(frozen=True, slots=True)
class JoinMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: tuple[JoinMember, ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class LeaveMemberResult:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class LeaveResult:
    error: ErrorCode
    members: tuple[LeaveMemberResult, ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionResult:
    topic: str
    partition: int
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class CommitResult:
    partitions: tuple[PartitionResult, ...]


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class FetchOffsetsResult:
    group_id: str
    error: ErrorCode
    offsets: tuple[FetchedOffset, ...] = ()


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


@dataclass(frozen=True, slots=True)
class ListGroupsResult:
    error: ErrorCode
    groups: tuple[ListedGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    group_id: str
    error: ErrorCode
    state: str = "Dead"
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class DeleteGroupResult:
    group_id: str
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class DeleteGroupsResult:
    results: tuple[DeleteGroupResult, ...]


@dataclass(frozen=True, slots=True)
class OffsetDeleteResult:
    error: ErrorCode
    partitions: tuple[PartitionResult, ...] = ()
