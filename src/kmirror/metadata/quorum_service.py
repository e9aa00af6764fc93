"""The controller's side of the metadata log's quorum (KIP-595): what `MetadataService` does as a
voter of several (`controller.quorum.voters`). Kafka's `QuorumController` on `KafkaRaftClient`.

- The voter elected leader appends a no-op record of its epoch, waits for it to commit (every
  record of the earlier epochs commits with it and is replayed), formats an empty log, and only
  then becomes the active controller. Its operations append, then wait until a majority of the
  voters has the records (the high watermark) before their records are replayed and the
  operation answers.
- Every voter replays only what is committed: the image never holds a record a new leader could
  truncate. A follower appends what it fetches with its epoch, truncates where the leader says
  its log diverges, and replays up to the leader's high watermark.
- A controller that loses its leadership fails the operations waiting for their commit
  (NOT_CONTROLLER); brokers send them again to the new active controller.

The network (Vote, BeginQuorumEpoch, EndQuorumEpoch, the followers' fetches) is the runtime's
`QuorumClient`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from kmirror.config.server import ServerConfig
from kmirror.metadata.controller.features import bootstrap_records
from kmirror.metadata.controller.result import NotControllerError, Rng
from kmirror.metadata.image import MetadataImage
from kmirror.metadata.records import NoOpRecord, Record, decode
from kmirror.metadata.snapshot_service import MetadataLogStore, MetadataSnapshots, SnapshotId, snapshot_image
from kmirror.ports import Clock
from kmirror.quorum.election_state import NO_VOTER
from kmirror.quorum.state import Actions, FetchDecision, Message, Quorum, QuorumConfig

if TYPE_CHECKING:
    from kmirror.metadata.controller.brokers import BrokerHeartbeatManager

log = logging.getLogger("kmirror.metadata.controller_service")
T = TypeVar("T")


class Written(NamedTuple):
    """Records appended to the metadata log, and the image once they are replayed."""

    encoded: list[bytes]
    last_offset: int
    image: MetadataImage
    base_offset: int
    """The offset of the image the records were replayed onto: `image` is the log's only when
    that is the offset right below them."""


def quorum_config(config: ServerConfig) -> QuorumConfig:
    return QuorumConfig(
        election_timeout_ms=int(config.get("controller.quorum.election.timeout.ms")),
        fetch_timeout_ms=int(config.get("controller.quorum.fetch.timeout.ms")),
        election_backoff_max_ms=int(config.get("controller.quorum.election.backoff.max.ms")),
    )


async def to_the_end(awaitable: Awaitable[T]) -> T:
    """Await `awaitable` to its end even when the caller is cancelled meanwhile, then raise the
    cancellation. An operation holds the controller's lock while its records commit: a request
    whose client left (the server cancels its handler) must not release the lock with records
    in the log that the image does not hold yet, or the next operation would compute on an
    image without them. A second cancellation is not held back."""
    future = asyncio.ensure_future(awaitable)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        if not future.done():
            await asyncio.wait([future])
        raise


class OperationLock:
    """The controller's single-writer lock as its operations take it: refused (NOT_CONTROLLER)
    unless this controller is active, before waiting for the lock and once it has it, so that
    no operation waits behind an election or computes on the image of a lost leadership."""

    def __init__(self, lock: asyncio.Lock, active: Callable[[], bool], refusal: Callable[[], str]) -> None:
        self._lock = lock
        self._active = active
        self._refusal = refusal

    async def __aenter__(self) -> None:
        if not self._active():
            raise NotControllerError(self._refusal())
        await self._lock.acquire()
        if not self._active():
            self._lock.release()
            raise NotControllerError(self._refusal())

    async def __aexit__(self, *exc: object) -> None:
        self._lock.release()


class QuorumControl:
    # Provided by `MetadataService`.
    _config: ServerConfig
    _clock: Clock
    _rng: Rng
    _store: MetadataLogStore
    _image: MetadataImage
    _entries: list[tuple[int, bytes]]
    _log_lock: asyncio.Lock
    snapshots: MetadataSnapshots
    heartbeats: BrokerHeartbeatManager
    quorum: Quorum | None
    _publish: Callable[[MetadataImage], None]
    _wake_fetchers: Callable[[], None]
    _appended: Callable[[Written], None]
    _write: Callable[[MetadataImage, Sequence[Record]], Written]
    _new_cluster_id: Callable[[], str]
    read_entries: Callable[[int, int], list[tuple[int, bytes]]]

    def _init_quorum(self) -> None:
        self.quorum = None
        self._active_epoch = -1
        self._pending: dict[int, Written] = {}
        """The active controller's own appends not yet committed, by first offset: their
        records replayed ahead (`Written`), so a large operation is not replayed twice. Only
        used when the image is right below them: a new leader's first record is replayed from
        the log, with the records of earlier epochs before it."""
        self._commit_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._role_seen: tuple[str, int] = ("", -1)
        self.on_role_change: Callable[[], None] = lambda: None
        """The runtime's hook: the role or epoch changed (start or stop fetching)."""

    def _join_quorum(self) -> None:
        voters = [v.node_id for v in self._config.controller_quorum_voters]
        self.quorum = Quorum(self._config.node_id, voters, self._store.read_election_state(), self._store,
                             quorum_config(self._config), self._rng, self._clock.monotonic_ms())
        log.info("Joined the metadata quorum of voters %s in epoch %d; the metadata log ends at offset %d (epoch %d)",
                 sorted(voters), self.quorum.epoch, self._store.log_end_offset, self._store.last_epoch)

    @property
    def active(self) -> bool:
        """The active controller: the only voter, or the leader whose epoch's first record committed."""
        return self.quorum is None or (self.quorum.role == "leader" and self._active_epoch == self.quorum.epoch)

    def _epoch(self) -> int:
        return 0 if self.quorum is None else self.quorum.epoch

    def _not_controller_message(self) -> str:
        leader = NO_VOTER if self.quorum is None else self.quorum.leader_id
        return f"controller {self._config.node_id} is not the active controller (the leader is {leader})"

    @property
    def high_watermark(self) -> int:
        """The end of the committed metadata log, replayed into the image (brokers read up to it)."""
        return self._image.offset + 1

    # -- executing the core's actions ----------------------------------------------------------

    def execute(self, actions: Actions) -> list[tuple[int, Message]]:
        """Persist the election state, then report a role change; the messages to send."""
        if actions.persist is not None:
            self._store.write_election_state(actions.persist)
        assert self.quorum is not None
        seen = (self.quorum.role, self.quorum.epoch)
        if seen != self._role_seen:
            self._role_seen = seen
            self._role_changed()
        return actions.send

    def _role_changed(self) -> None:
        assert self.quorum is not None
        q = self.quorum
        log.info("Metadata quorum: %s in epoch %d (leader %d)", q.role, q.epoch, q.leader_id)
        if self._active_epoch != -1 and not (q.role == "leader" and q.epoch == self._active_epoch):
            log.info("Controller %d is no longer the active controller (epoch %d)", self._config.node_id,
                     self._active_epoch)
            self._active_epoch = -1
        if q.role != "leader":
            self._fail_waiters()
            self._pending.clear()
        else:
            asyncio.get_running_loop().create_task(self._activate(q.epoch))
        self.on_role_change()

    async def _activate(self, epoch: int) -> None:
        """Append this epoch's first record and wait for it to commit; then format an empty
        log and become the active controller."""
        assert self.quorum is not None
        try:
            async with self._log_lock:
                if self.quorum.epoch != epoch or self.quorum.role != "leader":
                    return
                await self._replicate_records([NoOpRecord()])
                if self._image.cluster_id is None:
                    cluster_id = self._config.cluster_id or self._new_cluster_id()
                    await self._replicate_records(bootstrap_records(cluster_id))
                    self._store.bind(cluster_id, self._config.node_id)
                self.heartbeats.last_contact_ms.clear()  # every broker's session starts now (Kafka's failover)
                self._active_epoch = epoch
            log.info("Controller %d is the active controller in epoch %d; the metadata log is committed up to "
                     "offset %d", self._config.node_id, epoch, self._image.offset + 1)
        except NotControllerError:
            log.info("Controller %d lost the leadership of epoch %d before becoming active", self._config.node_id,
                     epoch)

    async def _replicate_records(self, records: Sequence[Record]) -> None:
        await self._replicate(self._write(self._image, records))

    async def _replicate(self, written: Written) -> None:
        """Wait until the records `written` appended are on a majority (then replayed)."""
        assert self.quorum is not None
        if self.quorum.role != "leader":  # lost while a large operation wrote on a worker thread
            raise NotControllerError(self._not_controller_message())
        first = written.last_offset - len(written.encoded) + 1
        self._appended(written)
        self._pending[first] = written
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._commit_waiters.append((written.last_offset, waiter))
        if self.quorum.appended(self._store.log_end_offset, self._clock.monotonic_ms()):
            self._apply_committed()
        await to_the_end(waiter)

    def _fail_waiters(self) -> None:
        waiters, self._commit_waiters = self._commit_waiters, []
        for _, waiter in waiters:
            if not waiter.done():
                waiter.set_exception(NotControllerError(self._not_controller_message()))

    def _apply_committed(self) -> None:
        """Replay every record below the high watermark not yet in the image."""
        assert self.quorum is not None
        hw = self.quorum.high_watermark
        while self._image.offset + 1 < hw:
            first = self._image.offset + 1
            written = self._pending.pop(first, None)
            if written is not None and written.last_offset < hw:
                if written.base_offset == first - 1:
                    self._publish(written.image)
                    continue
                log.warning("The image of the metadata records at offsets %d-%d was computed on offset %d, not %d: "
                            "they are replayed from the log", first, written.last_offset, written.base_offset,
                            first - 1)
            entries = self.read_entries(first, hw - first)
            if not entries:
                break
            self._publish(self._image.apply((decode(data) for _, data in entries), entries[-1][0]))
        for first in [first for first in self._pending if first <= self._image.offset]:
            del self._pending[first]  # replayed from the log instead (a new leader's first record)
        self._wake_fetchers()
        done = [w for w in self._commit_waiters if w[0] < self._image.offset + 1]
        self._commit_waiters = [w for w in self._commit_waiters if w[0] >= self._image.offset + 1]
        for _, waiter in done:
            if not waiter.done():
                waiter.set_result(None)

    # -- the leader: the voters' and brokers' fetches ------------------------------------------

    def quorum_fetch(self, replica_id: int, fetcher_epoch: int, fetch_offset: int,
                     last_fetched_epoch: int) -> FetchDecision:
        assert self.quorum is not None
        decision, moved = self.quorum.handle_fetch(replica_id, fetcher_epoch, fetch_offset, last_fetched_epoch,
                                                   self._clock.monotonic_ms())
        if moved:
            self._apply_committed()
        return decision

    def is_voter(self, replica_id: int) -> bool:
        return self.quorum is not None and replica_id in self.quorum.voters

    # -- a follower ----------------------------------------------------------------------------

    async def follower_append(self, base_offset: int, values: list[bytes], epoch: int) -> None:
        """Records fetched from the leader, in one batch of `epoch`, at this log's end (under
        the log's lock: a snapshot is written meanwhile on a worker thread)."""
        async with self._log_lock:
            if base_offset != self._store.log_end_offset:
                raise RuntimeError(f"fetched records at offset {base_offset}, the metadata log ends at "
                                   f"{self._store.log_end_offset}")
            last = self._store.append(values, epoch)
            self._entries.extend((last - len(values) + 1 + i, data) for i, data in enumerate(values))
            self.snapshots.appended(values)

    def follower_fetched(self, leader_epoch: int, high_watermark: int) -> None:
        assert self.quorum is not None
        self.execute(self.quorum.fetched(leader_epoch, high_watermark, self._clock.monotonic_ms()))
        self._apply_committed()

    async def truncate(self, offset: int) -> None:
        """Cut the log where the leader's diverges (never below what is committed)."""
        async with self._log_lock:
            if offset >= self._store.log_end_offset:
                return
            log.info("Truncating the metadata log from offset %d to %d (it diverged from the leader's)",
                     self._store.log_end_offset, offset)
            self._store.truncate_to(offset)
            if self._entries and self._entries[-1][0] >= offset:
                del self._entries[max(0, offset - self._entries[0][0]):]

    async def install_leader_snapshot(self, snapshot: SnapshotId, data: bytes) -> None:
        """The leader's log starts past this follower's end: its snapshot becomes this log."""
        async with self._log_lock:
            records = self._store.install_snapshot(snapshot, data)
            self.snapshots.installed()
            self._entries = []
            self._pending.clear()
            self._publish(snapshot_image(records, snapshot.end_offset))
        log.info("Loaded the leader's metadata snapshot at offset %d (%d bytes)", snapshot.end_offset, len(data))
