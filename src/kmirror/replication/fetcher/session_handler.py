"""The fetching side of an incremental fetch session (KIP-227; Kafka `FetchSessionHandler`).

Sans-IO. One handler per connection to one leader. `build` turns the engine's `FetchPlan`
(every partition ready to fetch) into what the next request carries:

- a **full** request (epoch 0) lists every partition and asks the leader to open a session;
- an **incremental** request (the session's id, its next epoch) lists only the partitions
  that are new to the session or whose fetch parameters changed (fetch offset, epochs, log
  start offset, size), and names the session's partitions that left the plan as forgotten.
  The engine's plan entry of an idle partition is the same object round after round; a new
  entry with the same parameters means the partition restarted (removed and added back, or
  truncated) and may have dropped an answer the leader counts as told, so it is forgotten
  this time and added back the next, when the leader answers it in full.
  A leader holding a session answers only the partitions that have something to say, so a
  request and its answer do not re-list thousands of idle partitions.

`handle_response` moves the session on:

| answer                                      | next request                              |
|---------------------------------------------|-------------------------------------------|
| full request answered with session id 0     | full again (the leader keeps no session:  |
|                                             | a source without KIP-227, or its cache is |
|                                             | full)                                     |
| full request answered with session id s > 0 | incremental, session s, epoch 1           |
| incremental answered without error          | incremental, epoch + 1                    |
| FETCH_SESSION_ID_NOT_FOUND                  | full, opening a new session               |
| INVALID_FETCH_SESSION_EPOCH, or no answer   | full, closing session s and opening anew  |
| (connection lost, timeout)                  |                                           |

A leader whose Fetch version predates sessions (v < 7) always gets full sessionless
requests (`sessions=False`).
"""

from __future__ import annotations

from dataclasses import dataclass

from kmirror.protocol.errors import ErrorCode
from kmirror.replication.fetcher.engine import FetchPartitionPlan, FetchPlan
from kmirror.types import TopicPartition

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1

SESSION_ERRORS = frozenset({ErrorCode.fetch_session_id_not_found, ErrorCode.invalid_fetch_session_epoch})


@dataclass(frozen=True, slots=True)
class SessionRequest:
    """What one Fetch request carries: its session id and epoch, the partitions it lists,
    the session partitions it forgets."""

    session_id: int
    session_epoch: int
    partitions: tuple[FetchPartitionPlan, ...]
    forgotten: tuple[FetchPartitionPlan, ...]

    @property
    def full(self) -> bool:
        return self.session_epoch in (INITIAL_EPOCH, FINAL_EPOCH)


class FetchSessionHandler:
    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.next_epoch = INITIAL_EPOCH
        # What the leader's session holds for each partition: the parameters last sent.
        self._sent: dict[TopicPartition, FetchPartitionPlan] = {}

    @property
    def incremental(self) -> bool:
        return self.session_id != INVALID_SESSION_ID and self.next_epoch > INITIAL_EPOCH

    def build(self, plan: FetchPlan, *, sessions: bool = True) -> SessionRequest:
        """The next request for `plan`; its session state is committed by `handle_response`."""
        if not sessions:
            self.session_id, self.next_epoch = INVALID_SESSION_ID, INITIAL_EPOCH
            request = SessionRequest(INVALID_SESSION_ID, FINAL_EPOCH, plan.partitions, ())
        elif not self.incremental:
            request = SessionRequest(self.session_id, INITIAL_EPOCH, plan.partitions, ())
        else:
            sent = self._sent
            get = sent.get
            changed: list[FetchPartitionPlan] = []
            forgotten: list[FetchPartitionPlan] = []
            kept = 0
            for p in plan.partitions:
                was = get(p.topic_partition)
                if was is None:
                    changed.append(p)
                    continue
                kept += 1
                if was is p:
                    continue
                if was == p:
                    # A new fetch state with the same parameters: the partition restarted
                    # (removed and added again, or truncated) and may have dropped an answer
                    # the leader counts as told. A leader answers only changes, so take it
                    # out of the session now and add it back next time, when the leader
                    # answers it in full (high watermark included) as a new partition.
                    forgotten.append(was)
                else:
                    changed.append(p)
            if kept != len(sent):  # some session partitions left the plan
                wanted = {p.topic_partition for p in plan.partitions}
                forgotten.extend(p for tp, p in sent.items() if tp not in wanted)
            request = SessionRequest(self.session_id, self.next_epoch, tuple(changed), tuple(forgotten))
        return request

    def handle_response(self, request: SessionRequest, error: ErrorCode, session_id: int) -> bool:
        """Move the session on after an answer to `request`; False when the answer carries
        no partition data (a top-level error)."""
        if error != ErrorCode.none:
            if error == ErrorCode.fetch_session_id_not_found:
                self._reset(INVALID_SESSION_ID)
            else:
                self._reset(self.session_id)
            return False
        if request.session_epoch == FINAL_EPOCH or session_id == INVALID_SESSION_ID:
            self._reset(INVALID_SESSION_ID)  # no session: the next request is full again
            return True
        if request.full:
            self.session_id, self.next_epoch = session_id, 1
            self._sent = {p.topic_partition: p for p in request.partitions}
            return True
        if session_id != self.session_id:  # not the session asked for: start over
            self._reset(session_id)
            return True
        self.next_epoch = 1 if self.next_epoch >= 2**31 - 1 else self.next_epoch + 1
        for p in request.forgotten:
            self._sent.pop(p.topic_partition, None)
        for p in request.partitions:
            self._sent[p.topic_partition] = p
        return True

    def handle_failure(self) -> None:
        """No answer (connection lost, timeout): the leader may or may not have moved the
        session, so the next request is full, closing the session and opening another."""
        self._reset(self.session_id)

    def _reset(self, close_session_id: int) -> None:
        self.session_id, self.next_epoch = close_session_id, INITIAL_EPOCH
        self._sent = {}

