"""`MirrorCoordinatorService`: the asyncio shell of the mirror control plane on a broker.

It owns the sans-IO `MirrorCoordinator` (partition states and LMEs by mirror partition),
persists them in the compacted internal topic `__mirror_state`, and holds the connection to
source clusters the control plane needs (AddTopicsToMirror reads the source topic's id,
partition count and configs; the source cluster id is learned on first contact).

Persistence (KIP-1279 "MirrorCoordinator") runs on `CoordinatorRuntime`, the shell the group
and transaction coordinators share (Kafka's coordinator-common):
- `on_partitions_led(partitions)` with the `__mirror_state` partitions this broker leads:
  new ones are loaded by replaying their records, the others are dropped (resignation);
- a write is appended to its `__mirror_state` partition and answered only after the append
  (`MirrorCoordinator` makes it visible then);
- the topic is created (compacted, `mirror.topic.num.partitions` partitions, replication
  factor min(`mirror.topic.replication.factor`, live brokers)) by the controller with the
  first mirror (CreateMirror); `ensure_state_topic`, which the first state write calls,
  creates it when it is still missing (no live broker at CreateMirror time).

Routing: a key's coordinator is the leader of its `__mirror_state` partition. `read_states`,
`read_state_results` and `write_states` answer locally when this broker is that leader and
send ReadMirrorStates / WriteMirrorStates (keys 100 / 101) to the leader otherwise;
`local_read` / `local_write` / `remove_topics` never route (the RPC handlers use them).
Errors are per partition values: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE (no leader, leader unreachable), INVALID_REQUEST (transition).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Protocol, overload, runtime_checkable
from uuid import UUID

from kio.static.primitive import i8, i32

from kmirror.config.mirror import MIRROR_STATE_TOPIC, STATE_TOPIC_CONFIGS, MirrorConfig
from kmirror.coordinator.ports import CoordinatorLog
from kmirror.coordinator.runtime import CoordinatorRuntime
from kmirror.kip1279.state import MirrorPartitionState
from kmirror.log.producer_state import VerificationGuard
from kmirror.metadata.image import MetadataImage, TopicImage
from kmirror.mirror.coordinator import codec
from kmirror.mirror.coordinator.coordinator import (
    ManagedAclsResult,
    MirrorCoordinator,
    MirrorOutput,
    PartitionStateResult,
    StateAppend,
    StatesResult,
    StateWrite,
)
from kmirror.mirror.coordinator.records import AclEntry, MirrorPartitionKey
from kmirror.mirror.metadata_sync.admins import SyncAdmins, client_admin
from kmirror.mirror.source_lookup import MirrorSourceLookups, SourceDescription, SourceLookup
from kmirror.ports import Clock, ManualClock
from kmirror.protocol.errors import ErrorCode
from kmirror.protocol.mirror import read_mirror_states as rms
from kmirror.protocol.mirror import write_mirror_states as wms

log = logging.getLogger("kmirror.mirror.coordinator")


class BrokerSender(Protocol):
    """Sends a mirror coordinator request to broker `node_id` and returns its answer (raises
    if the broker cannot be reached)."""

    @overload
    async def __call__(self, node_id: int, request: rms.ReadMirrorStatesRequest) -> rms.ReadMirrorStatesResponse: ...

    @overload
    async def __call__(self, node_id: int, request: wms.WriteMirrorStatesRequest) -> wms.WriteMirrorStatesResponse: ...


@runtime_checkable
class _Closable(Protocol):
    async def close(self) -> None: ...


class StateTopicMetadata(Protocol):
    """The node's metadata service, as the mirror coordinator reads it: who leads each
    `__mirror_state` partition, and the topic's creation."""

    @property
    def image(self) -> MetadataImage: ...

    async def ensure_internal_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: Mapping[str, str] | None = None
    ) -> TopicImage: ...


class _MemoryStateLog:
    """No `__mirror_state` log: states live in memory only, every append acknowledged."""

    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]], *, producer_id: int = -1,
                     producer_epoch: int = -1, verification_guard: VerificationGuard | None = None) -> int:
        return -1

    async def maybe_start_transaction_verification(self, partition: int, *, transactional_id: str,
                                                   producer_id: int,
                                                   producer_epoch: int) -> VerificationGuard | ErrorCode | None:
        return None

    async def append_end_transaction_marker(self, partition: int, *, producer_id: int, producer_epoch: int,
                                            coordinator_epoch: int, committed: bool) -> int:
        return -1

    def read_all(self, partition: int) -> list[tuple[bytes, bytes | None]]:
        return []

    def open_transactions(self, partition: int) -> dict[int, list[tuple[bytes, bytes | None]]]:
        return {}


class MirrorCoordinatorService(CoordinatorRuntime[StateAppend]):
    """The MirrorCoordinator on `CoordinatorRuntime` (`__mirror_state`), plus the routing of
    reads and writes to each key's coordinator and the source lookups of the control plane."""

    def __init__(
        self,
        coordinator: MirrorCoordinator,
        source_lookup: SourceLookup | None = None,
        *,
        log: CoordinatorLog | None = None,
        node_id: int = -1,
        metadata: StateTopicMetadata | None = None,
        send: BrokerSender | None = None,
        replication_factor: int = 3,
        state_topic_configs: Mapping[str, str] = STATE_TOPIC_CONFIGS,
        clock: Clock | None = None,
        source_request_timeout_ms: int = 30_000,
    ) -> None:
        """`log` None keeps states in memory only (acknowledged at once); `metadata` None
        means this broker coordinates every key it has loaded (no routing). The core has no
        timers, so the clock (still) only serves the runtime's contract when none is given.
        `source_request_timeout_ms`: the broker's `request.timeout.ms`, for the source lookups."""
        super().__init__(coordinator, _MemoryStateLog() if log is None else log, clock or ManualClock(),
                         MIRROR_STATE_TOPIC)
        self.coordinator = coordinator
        self._source_lookups = MirrorSourceLookups(SyncAdmins(
            node_id, lambda: None, None, "lookup",
            functools.partial(client_admin, request_timeout_ms=source_request_timeout_ms)))
        self._source_lookup = source_lookup or self._source_lookups
        self.node_id = node_id
        self.metadata = metadata
        self._send = send
        self.replication_factor = replication_factor
        self.state_topic_configs = dict(state_topic_configs)

    # ---- __mirror_state records (the runtime's serde hooks) ----------------------------

    def _replay(self, partition: int) -> tuple[int, MirrorOutput | None]:
        raw = list(self._log.read_all(partition))
        self.coordinator.complete_load(partition, codec.decode_records(raw))
        return len(raw), None

    async def _append_to_log(self, append: StateAppend) -> None:
        await self._log.append(append.partition, codec.encode_records(append.records))

    async def stop(self) -> None:
        await super().stop()
        self.coordinator.shutdown()
        await self._source_lookups.close()
        if isinstance(self._send, _Closable):
            await self._send.close()

    async def ensure_state_topic(self) -> ErrorCode:
        """Create `__mirror_state` if missing; NONE when it exists, else the reason it cannot
        be created yet (callers answer COORDINATOR_NOT_AVAILABLE and retry)."""
        metadata = self.metadata
        if metadata is None:
            return ErrorCode.none
        if MIRROR_STATE_TOPIC in metadata.image.topics:
            return ErrorCode.none
        live = len(metadata.image.live_brokers()) or 1
        try:
            await metadata.ensure_internal_topic(
                MIRROR_STATE_TOPIC, num_partitions=self.coordinator.num_partitions,
                replication_factor=max(1, min(self.replication_factor, live)), configs=dict(self.state_topic_configs))
        except Exception as exc:  # not enough brokers yet, controller unreachable: retried later
            log.warning("cannot create %s: %s", MIRROR_STATE_TOPIC, exc)
            return ErrorCode.coordinator_not_available
        return ErrorCode.none

    def coordinator_node(self, key: MirrorPartitionKey) -> int | None:
        """The broker coordinating `key` (leader of its `__mirror_state` partition); this
        broker when there is no metadata to route by; None while it has no leader."""
        return self._coordinators()(key)

    def _coordinators(self) -> Callable[[MirrorPartitionKey], int | None]:
        """`coordinator_node`, with the `__mirror_state` leaders read from the image once."""
        if self.metadata is None:
            return lambda key: self.node_id
        topic = self.metadata.image.topics.get(MIRROR_STATE_TOPIC)
        registrations = {} if topic is None else topic.partitions
        partition_for = self.coordinator.partition_for

        def node(key: MirrorPartitionKey) -> int | None:
            reg = registrations.get(partition_for(key))
            return None if reg is None or reg.leader < 0 else int(reg.leader)
        return node

    # ---- source clusters ----------------------------------------------------------------

    async def describe_source_topics(self, mirror_name: str, config: MirrorConfig,
                                     names: Sequence[str]) -> SourceDescription:
        return await self._source_lookup(mirror_name, config, names)

    def cached_state(self, mirror_name: str, topic_id: UUID, partition: int) -> MirrorPartitionState | None:
        """The state if this broker coordinates the partition and has loaded it, else None."""
        key = MirrorPartitionKey(mirror_name, topic_id, partition)
        if self.coordinator.coordinator_error(key) is not None:
            return None
        value = self.coordinator.state_of(key)
        return MirrorPartitionState.UNKNOWN if value is None else value.state

    # ---- routed reads and writes --------------------------------------------------------

    async def read_states(self, keys: Sequence[MirrorPartitionKey]) -> dict[MirrorPartitionKey, MirrorPartitionState]:
        """The coordinator's state of each key; UNKNOWN when it holds none or cannot answer."""
        result = await self.read_state_results(keys)
        return {r.key: (r.state if r.error is ErrorCode.none else MirrorPartitionState.UNKNOWN)
                for r in result.partitions}

    async def read_state_results(self, keys: Sequence[MirrorPartitionKey]) -> StatesResult:
        """State, LME and error per key, in request order, from each key's coordinator."""
        results: dict[MirrorPartitionKey, PartitionStateResult] = {}
        for node, group in self._by_coordinator(keys).items():
            if node is None:
                results.update({k: PartitionStateResult(k, ErrorCode.coordinator_not_available) for k in group})
            elif node == self.node_id:
                results.update({r.key: r for r in (await self.local_read(group)).partitions})
            else:
                results.update(await self._remote_read(node, group))
        return StatesResult(tuple(results[k] for k in keys))

    async def read_state_results_in_steps(self, keys: Sequence[MirrorPartitionKey], per_step: int
                                          ) -> AsyncIterator[tuple[int, StatesResult]]:
        """`read_state_results` of `per_step` keys at a time, as (index of the step's first key,
        its answer), giving the event loop back between steps: a reader of thousands of keys
        (DescribeMirrors) does its own work on each step's answer in between."""
        for start in range(0, len(keys), per_step):
            if start:
                await asyncio.sleep(0)
            yield start, await self.read_state_results(keys[start:start + per_step])

    async def write_states(self, writes: Sequence[StateWrite]) -> StatesResult:
        """Persist each write through its key's coordinator; answered once appended."""
        created = await self.ensure_state_topic()
        by_key = {w.key: w for w in writes}
        results: dict[MirrorPartitionKey, PartitionStateResult] = {}
        for node, group in self._by_coordinator([w.key for w in writes]).items():
            batch = [by_key[k] for k in group]
            if node is None or created is not ErrorCode.none:
                results.update({k: PartitionStateResult(k, ErrorCode.coordinator_not_available) for k in group})
            elif node == self.node_id:
                results.update({r.key: r for r in (await self.local_write(batch)).partitions})
            else:
                results.update(await self._remote_write(node, batch))
        return StatesResult(tuple(results[w.key] for w in writes))

    def _by_coordinator(self, keys: Iterable[MirrorPartitionKey]) -> dict[int | None, list[MirrorPartitionKey]]:
        node_of = self._coordinators()
        groups: dict[int | None, list[MirrorPartitionKey]] = {}
        for key in keys:
            groups.setdefault(node_of(key), []).append(key)
        return groups

    # ---- this broker's coordinator (the RPC handlers) --------------------------------

    async def local_read(self, keys: Sequence[MirrorPartitionKey]) -> StatesResult:
        rid, future = self._new_waiter()
        return await self._run(rid, future, self.coordinator.read_states(rid, keys))

    async def local_write(self, writes: Sequence[StateWrite]) -> StatesResult:
        rid, future = self._new_waiter()
        return await self._run(rid, future, self.coordinator.write_states(rid, writes))

    async def remove_topics(self, mirror_name: str, topic_ids: Iterable[UUID]) -> StatesResult:
        """Tombstone this coordinator's states of these topics in the mirror."""
        rid, future = self._new_waiter()
        return await self._run(rid, future, self.coordinator.remove_topics(rid, mirror_name, topic_ids))

    async def delete_mirror(self, mirror_name: str) -> StatesResult:
        """Tombstone every state of the mirror this coordinator holds."""
        rid, future = self._new_waiter()
        return await self._run(rid, future, self.coordinator.delete_mirror(rid, mirror_name))

    def managed_acls(self, mirror_name: str) -> frozenset[AclEntry] | None | ErrorCode:
        """This broker's view of the mirror's persisted managed ACL bindings (it syncs the
        mirror's metadata only while it leads the partition that holds them)."""
        return self.coordinator.managed_acls(mirror_name)

    async def write_managed_acls(self, mirror_name: str, acls: frozenset[AclEntry]) -> ErrorCode:
        """Persist the mirror's managed ACL bindings in `__mirror_state`, here."""
        rid, future = self._new_waiter()
        result = await self._answer(rid, future, self.coordinator.write_managed_acls(rid, mirror_name, acls))
        if not isinstance(result, ManagedAclsResult):
            raise AssertionError(f"mirror coordinator answered request {rid} with {result!r}")
        return result.error

    async def _run(self, rid: int, future: asyncio.Future[object], output: MirrorOutput) -> StatesResult:
        result = await self._answer(rid, future, output)
        if not isinstance(result, StatesResult):
            raise AssertionError(f"mirror coordinator answered request {rid} with {result!r}")
        return result

    # ---- other coordinators ---------------------------------------------------------

    def _topic_name(self, topic_id: UUID) -> str | None:
        topic = None if self.metadata is None else self.metadata.image.topics_by_id.get(topic_id)
        return None if topic is None else str(topic.name)

    async def _remote_read(self, node: int, keys: Sequence[MirrorPartitionKey]
                           ) -> dict[MirrorPartitionKey, PartitionStateResult]:
        out: dict[MirrorPartitionKey, PartitionStateResult] = {}
        by_mirror: dict[str, dict[str, list[MirrorPartitionKey]]] = {}
        for key in keys:
            name = self._topic_name(key.topic_id)
            if name is None:
                out[key] = PartitionStateResult(key, ErrorCode.unknown_topic_id)
                continue
            by_mirror.setdefault(key.mirror_name, {}).setdefault(name, []).append(key)
        for mirror_name, topics in by_mirror.items():
            wanted = {(name, k.partition): k for name, ks in topics.items() for k in ks}
            request = rms.ReadMirrorStatesRequest(mirror_name=mirror_name, topics=tuple(
                rms.TopicData(name=name, partitions=tuple(rms.PartitionData(partition_index=i32(k.partition))
                                                           for k in ks))
                for name, ks in topics.items()))
            response = await self._call(node, request)
            error = ErrorCode.coordinator_not_available if response is None else ErrorCode(response.error_code)
            if response is not None and error is ErrorCode.none:
                for t in response.topics:
                    for p in t.partitions:
                        hit = wanted.get((t.name, int(p.partition_index)))
                        if hit is not None:
                            out[hit] = PartitionStateResult(hit, ErrorCode(p.error_code),
                                                            MirrorPartitionState.from_code(int(p.state)),
                                                            int(p.last_mirror_epoch))
            for key in wanted.values():
                out.setdefault(key, PartitionStateResult(key, error if error is not ErrorCode.none
                                                         else ErrorCode.coordinator_not_available))
        return out

    async def _remote_write(self, node: int, writes: Sequence[StateWrite]
                            ) -> dict[MirrorPartitionKey, PartitionStateResult]:
        out: dict[MirrorPartitionKey, PartitionStateResult] = {}
        by_mirror: dict[str, dict[str, list[StateWrite]]] = {}
        for w in writes:
            by_mirror.setdefault(w.key.mirror_name, {}).setdefault(w.topic_name, []).append(w)
        for mirror_name, topics in by_mirror.items():
            wanted = {(name, w.key.partition): w for name, ws in topics.items() for w in ws}
            request = wms.WriteMirrorStatesRequest(mirror_name=mirror_name, topics=tuple(
                wms.TopicData(name=name, partitions=tuple(
                    wms.PartitionData(partition_index=i32(w.key.partition), state=i8(int(w.state)),
                                      last_mirror_epoch=i32(w.last_mirrored_epoch)) for w in ws))
                for name, ws in topics.items()))
            response = await self._call(node, request)
            error = ErrorCode.coordinator_not_available if response is None else ErrorCode(response.error_code)
            if response is not None and error is ErrorCode.none:
                for t in response.topics:
                    for p in t.partitions:
                        sent = wanted.get((t.name, int(p.partition_index)))
                        if sent is not None:
                            code = ErrorCode(p.error_code)
                            out[sent.key] = PartitionStateResult(
                                sent.key, code, sent.state if code is ErrorCode.none else MirrorPartitionState.UNKNOWN,
                                sent.last_mirrored_epoch)
            for w in wanted.values():
                out.setdefault(w.key, PartitionStateResult(w.key, error if error is not ErrorCode.none
                                                           else ErrorCode.coordinator_not_available))
        return out

    @overload
    async def _call(self, node: int, request: rms.ReadMirrorStatesRequest) -> rms.ReadMirrorStatesResponse | None: ...

    @overload
    async def _call(self, node: int, request: wms.WriteMirrorStatesRequest) -> wms.WriteMirrorStatesResponse | None: ...

    async def _call(self, node: int, request: rms.ReadMirrorStatesRequest | wms.WriteMirrorStatesRequest
                    ) -> rms.ReadMirrorStatesResponse | wms.WriteMirrorStatesResponse | None:
        if self._send is None:
            return None
        try:
            return await self._send(node, request)
        except Exception as exc:  # unreachable coordinator: the caller retries
            log.warning("mirror coordinator request to broker %d failed: %s", node, exc)
            return None

async def topic_partition_states(
    service: MirrorCoordinatorService | None, mirror_name: str, topic_id: UUID, num_partitions: int
) -> list[MirrorPartitionState]:
    """Every partition's state of one topic in one mirror (UNKNOWN without a coordinator)."""
    if service is None:
        return [MirrorPartitionState.UNKNOWN] * num_partitions
    keys = [MirrorPartitionKey(mirror_name, topic_id, p) for p in range(num_partitions)]
    states = await service.read_states(keys)
    return [states[k] for k in keys]
