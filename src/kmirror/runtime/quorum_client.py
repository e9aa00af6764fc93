"""The network side of a voter of the metadata log's quorum (Kafka's `KafkaRaftClient` I/O):
the election timers, Vote / BeginQuorumEpoch / EndQuorumEpoch to the other voters, and a
follower's fetches from the leader (`controller.quorum.*` timings). The rules are the sans-IO
`quorum.state.Quorum`; the controller's side is `metadata.quorum_service.QuorumControl`.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.broker.handlers.controller_metadata_fetch import REFUSAL_ERRORS
from kmirror.broker.handlers.describe_quorum import ZERO_DIRECTORY_ID
from kmirror.client.connection import BrokerConnection
from kmirror.client.errors import KafkaConnectionError
from kmirror.config.server import QuorumVoter
from kmirror.metadata.broker_service import METADATA_TOPIC, METADATA_TOPIC_ID, download_snapshot
from kmirror.metadata.controller_service import MetadataService
from kmirror.metadata.snapshot import batch_entries_by_epoch
from kmirror.metadata.snapshot_service import SnapshotId
from kmirror.protocol.entities import build, has_field, nested
from kmirror.quorum.state import (
    BeginQuorumEpoch,
    EndQuorumEpoch,
    FetchDiverging,
    FetchRefused,
    Message,
    Quorum,
    VoteAnswer,
    VoteRequest,
)

log = logging.getLogger(__name__)

RESIGN_GRACE_MS = 5_000
"""How long a stopping voter stays for other brokers' controlled shutdowns."""

FOLLOWER_FETCH_MAX_WAIT_MS = 500
FETCH_MAX_BYTES = 8 * 1024 * 1024
_ERROR_REFUSALS = {code: refusal for refusal, code in REFUSAL_ERRORS.items()}


class _VoterChannel:
    """One connection to a voter, opened on demand and dropped after a failure (a
    `ControllerClient` for the snapshot download)."""

    def __init__(self, voter: QuorumVoter, client_id: str, request_timeout_ms: int) -> None:
        self.voter = voter
        self._client_id = client_id
        self._request_timeout_ms = request_timeout_ms
        self._connection: BrokerConnection | None = None
        self._lock = asyncio.Lock()

    async def connection(self) -> BrokerConnection:
        async with self._lock:
            if self._connection is None or not self._connection.connected:
                conn = BrokerConnection(self.voter.host, self.voter.port, client_id=self._client_id,
                                        request_timeout_ms=self._request_timeout_ms)
                await conn.connect()
                self._connection = conn
            return self._connection

    async def send(self, api_key: int, timeout_ms: int | None = None, **fields: Any) -> Any:
        try:
            conn = await self.connection()
            return await conn.send(conn.build_request(api_key, **fields), timeout_ms=timeout_ms)
        except (KafkaConnectionError, OSError, TimeoutError):
            await self.close()
            raise

    async def forward(self, request: Any, timeout_ms: int | None = None) -> Any:
        conn = await self.connection()
        return await conn.send(request, timeout_ms=timeout_ms)

    async def close(self) -> None:
        conn, self._connection = self._connection, None
        if conn is not None:
            await conn.close()


class QuorumClient:
    def __init__(self, controller: MetadataService, voters: list[QuorumVoter], request_timeout_ms: int) -> None:
        assert controller.quorum is not None
        self._controller = controller
        self._quorum: Quorum = controller.quorum
        self._clock = controller.clock
        node_id = controller.config.node_id
        self._channels = {v.node_id: _VoterChannel(v, f"raft-client-{node_id}", request_timeout_ms)
                          for v in voters if v.node_id != node_id}
        self._wake = asyncio.Event()
        """Set on a role change: the timers run at once."""
        self._role_changed = asyncio.Event()
        """Set on a role change: a new follower starts fetching."""
        self._changed: asyncio.Event | None = None
        """While stopping: set on a role change or a new image."""
        self._tasks: list[asyncio.Task[None]] = []
        self._sends: set[asyncio.Task[None]] = set()
        controller.on_role_change = self._on_role_change

    def _on_role_change(self) -> None:
        self._wake.set()
        self._role_changed.set()
        if self._changed is not None:
            self._changed.set()

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._send_all(self._controller.execute(self._quorum.poll(self._clock.monotonic_ms())))
        self._tasks = [loop.create_task(self._timers()), loop.create_task(self._follow())]

    async def stop(self) -> None:
        """A leader resigns first (EndQuorumEpoch), so that another voter is elected at once.
        Before that, a voter stays while other brokers' controlled shutdowns are under way."""
        await self._stay_for_controlled_shutdowns()
        if self._quorum.role == "leader":
            sends = self._controller.execute(self._quorum.resign(self._clock.monotonic_ms()))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.5):
                    await asyncio.gather(*(self._send(v, m) for v, m in sends), return_exceptions=True)
        for task in [*self._tasks, *self._sends]:
            task.cancel()
        for channel in self._channels.values():
            await channel.close()

    async def _stay_for_controlled_shutdowns(self) -> None:
        """Stay in the quorum while the controlled shutdowns of other brokers are under way and
        a leader is there to grant them (for at most `RESIGN_GRACE_MS`): the combined voters of
        a quorum stop together, and each controlled shutdown commits records, which takes a
        majority, until its last heartbeat is answered."""
        controller = self._controller
        self._changed = changed = asyncio.Event()
        unsubscribe = controller.subscribe(lambda _old, _new: changed.set())
        try:
            async with asyncio.timeout(RESIGN_GRACE_MS / 1000):
                while self._quorum.role in ("leader", "follower") and (
                        pending := controller.controlled_shutdowns_pending()):
                    log.info("Staying in the metadata quorum until the controlled shutdown of brokers %s is "
                             "granted", pending)
                    changed.clear()
                    await changed.wait()
        except TimeoutError:
            log.warning("Leaving the metadata quorum with the controlled shutdown of brokers %s not granted",
                        controller.controlled_shutdowns_pending())
        finally:
            unsubscribe()
            self._changed = None

    # -- timers and messages to voters ---------------------------------------------------------

    async def _timers(self) -> None:
        while True:
            try:
                self._send_all(self._controller.execute(self._quorum.poll(self._clock.monotonic_ms())))
            except Exception:  # a bug here must not leave this voter without timers
                log.exception("metadata quorum timers failed")
            # a request handled meanwhile may bring a deadline forward (EndQuorumEpoch): look again soon
            wait_ms = min(self._quorum.until_next_poll_ms(self._clock.monotonic_ms()), 100)
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait_ms / 1000):
                    await self._wake.wait()

    def _send_all(self, sends: list[tuple[int, Message]]) -> None:
        for voter_id, message in sends:
            task = asyncio.get_running_loop().create_task(self._send(voter_id, message))
            self._sends.add(task)
            task.add_done_callback(self._sends.discard)

    async def _send(self, voter_id: int, message: Message) -> None:
        channel = self._channels.get(voter_id)
        if channel is None:
            return
        try:
            if isinstance(message, VoteRequest):
                await self._vote(channel, message)
            elif isinstance(message, BeginQuorumEpoch):
                await self._quorum_epoch(channel, 53, message.epoch, message.leader_id)
            else:
                await self._quorum_epoch(channel, 54, message.epoch, message.leader_id, message)
        except (KafkaConnectionError, OSError, TimeoutError) as exc:
            log.debug("%s to voter %d failed: %s", type(message).__name__, voter_id, exc)
        except Exception:
            log.exception("%s to voter %d failed", type(message).__name__, voter_id)

    def _cluster_id(self) -> str | None:
        return self._controller.image.cluster_id

    async def _vote(self, channel: _VoterChannel, message: VoteRequest) -> None:
        conn = await channel.connection()
        rt = conn.request_type(52)
        fields: dict[str, Any] = {"partition_index": 0, "replica_epoch": message.epoch,
                                  "replica_id": message.candidate_id, "last_offset_epoch": message.last_epoch,
                                  "last_offset": message.last_offset}
        top: dict[str, Any] = {}
        if has_field(nested(rt, "PartitionData"), "pre_vote"):  # v2 (KIP-996)
            fields |= {"pre_vote": message.pre_vote, "replica_directory_id": ZERO_DIRECTORY_ID,
                       "voter_directory_id": ZERO_DIRECTORY_ID}
            top["voter_id"] = channel.voter.node_id
        elif message.pre_vote:  # a voter of an older version takes no pre-votes: it decides on the vote itself
            self._send_all(self._controller.execute(self._quorum.handle_vote_answer(
                channel.voter.node_id, VoteAnswer(self._quorum.epoch, -1, True, pre_vote=True),
                self._clock.monotonic_ms())))
            return
        partition = build(nested(rt, "PartitionData"), **fields)
        response = await channel.send(52, cluster_id=self._cluster_id(), **top, topics=(
            build(nested(rt, "TopicData"), topic_name=METADATA_TOPIC, partitions=(partition,)),))
        if response.error_code != ErrorCode.none or not response.topics:
            return
        p = response.topics[0].partitions[0]
        if p.error_code not in (ErrorCode.none, ErrorCode.fenced_leader_epoch):
            return
        answer = VoteAnswer(int(p.leader_epoch), int(p.leader_id), bool(p.vote_granted), pre_vote=message.pre_vote)
        self._send_all(self._controller.execute(
            self._quorum.handle_vote_answer(channel.voter.node_id, answer, self._clock.monotonic_ms())))

    async def _quorum_epoch(self, channel: _VoterChannel, api_key: int, epoch: int, leader_id: int,
                            end: EndQuorumEpoch | None = None) -> None:
        conn = await channel.connection()
        rt = conn.request_type(api_key)
        fields: dict[str, Any] = {"partition_index": 0, "leader_id": leader_id, "leader_epoch": epoch}
        if end is not None:
            fields["preferred_successors"] = end.preferred_successors
        partition = build(nested(rt, "PartitionData"), **fields)
        response = await channel.send(api_key, cluster_id=self._cluster_id(), topics=(
            build(nested(rt, "TopicData"), topic_name=METADATA_TOPIC, partitions=(partition,)),))
        if response.error_code == ErrorCode.none and response.topics:
            p = response.topics[0].partitions[0]  # a voter in a newer epoch makes this leader step down
            self._send_all(self._controller.execute(
                self._quorum.observed(int(p.leader_epoch), int(p.leader_id), self._clock.monotonic_ms())))

    # -- a follower's fetches ------------------------------------------------------------------

    async def _follow(self) -> None:
        while True:
            leader = self._quorum.fetch_leader
            channel = None if leader is None else self._channels.get(leader)
            if channel is None:
                self._role_changed.clear()
                await self._role_changed.wait()
                continue
            try:
                await self._fetch(channel)
            except asyncio.CancelledError:
                raise
            except (KafkaConnectionError, OSError, TimeoutError) as exc:
                log.debug("metadata fetch from the leader %d failed: %s", channel.voter.node_id, exc)
                await asyncio.sleep(0.05)
            except Exception:
                log.exception("metadata fetch from the leader %d failed", channel.voter.node_id)
                await asyncio.sleep(0.5)

    async def _fetch(self, channel: _VoterChannel) -> None:
        store = self._controller.metadata_log
        epoch = self._quorum.epoch
        fetch_offset = store.log_end_offset
        conn = await channel.connection()
        rt = conn.request_type(1)
        partition = build(nested(rt, "FetchPartition"), partition=0, fetch_offset=fetch_offset,
                          partition_max_bytes=FETCH_MAX_BYTES, current_leader_epoch=epoch,
                          last_fetched_epoch=store.last_epoch, log_start_offset=-1)
        topic = build(nested(rt, "FetchTopic"), topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID,
                      partitions=(partition,))
        replica: dict[str, Any] = {"replica_id": self._controller.config.node_id}
        if has_field(rt, "replica_state"):
            replica["replica_state"] = build(nested(rt, "ReplicaState"), replica_id=self._controller.config.node_id,
                                             replica_epoch=-1)
        response = await channel.send(
            1, **replica, max_wait=datetime.timedelta(milliseconds=FOLLOWER_FETCH_MAX_WAIT_MS), min_bytes=1,
            max_bytes=FETCH_MAX_BYTES, isolation_level=0, session_id=0, session_epoch=-1, topics=(topic,),
            forgotten_topics_data=(), rack_id="",
            timeout_ms=FOLLOWER_FETCH_MAX_WAIT_MS + self._quorum_request_timeout_ms())
        if self._quorum.epoch != epoch or self._quorum.fetch_leader != channel.voter.node_id:
            return  # the quorum moved on while this fetch was out
        p = response.responses[0].partitions[0]
        now = self._clock.monotonic_ms()
        if p.error_code in _ERROR_REFUSALS:
            leader = getattr(p, "current_leader", None)
            refusal = FetchRefused(_ERROR_REFUSALS[p.error_code],  # type: ignore[arg-type]
                                   int(leader.leader_id) if leader is not None else -1,
                                   int(leader.leader_epoch) if leader is not None else -1)
            self._send_all(self._controller.execute(self._quorum.fetch_refused(refusal, now)))
            if self._quorum.fetch_leader == channel.voter.node_id and self._quorum.epoch == epoch:
                await asyncio.sleep(0.05)
            return
        if p.error_code != ErrorCode.none:
            log.warning("Metadata fetch from the leader %d: %s", channel.voter.node_id, ErrorCode(p.error_code).name)
            await asyncio.sleep(0.1)
            return
        diverging = getattr(p, "diverging_epoch", None)
        snapshot = getattr(p, "snapshot_id", None)
        if diverging is not None and int(diverging.end_offset) >= 0:
            await self._controller.truncate(self._quorum.truncation_offset(
                FetchDiverging(int(diverging.epoch), int(diverging.end_offset))))
        elif snapshot is not None and int(snapshot.end_offset) >= 0:
            wanted = SnapshotId(int(snapshot.end_offset), int(snapshot.epoch))
            data = await download_snapshot(channel, wanted)
            if data is not None:
                await self._controller.install_leader_snapshot(wanted, data)
        elif p.records:
            for batch_epoch, entries in batch_entries_by_epoch(bytes(p.records)):
                entries = [(offset, value) for offset, value in entries if offset >= store.log_end_offset]
                if entries:
                    await self._controller.follower_append(entries[0][0], [v for _, v in entries], batch_epoch)
        self._controller.follower_fetched(epoch, int(p.high_watermark))
        self._send_all(self._controller.execute(self._quorum.poll(self._clock.monotonic_ms())))

    def _quorum_request_timeout_ms(self) -> int:
        return int(self._controller.config.get("controller.quorum.request.timeout.ms"))
