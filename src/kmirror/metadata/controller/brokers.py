"""Broker registration, heartbeats, fencing and controlled shutdown (Kafka's
`ClusterControlManager` + `BrokerHeartbeatManager`), single active controller.

- A broker registers fenced; its broker epoch is the offset its registration lands at.
- A heartbeat from a fenced broker whose metadata offset has reached its registration unfences it
  and elects it leader of offline partitions where it is an eligible candidate.
- A broker that has not heartbeaten for `broker.session.timeout.ms` is fenced: it leaves every
  ISR (never the last member) and its leaderships move (`partition_change`).
- Controlled shutdown: a heartbeat with `want_shut_down` puts the broker in controlled shutdown
  (not eligible), moves its leaderships and ISR memberships, and is answered `should_shut_down`
  once it leads nothing; the broker is then fenced.

Session times are controller memory, not metadata (as in Kafka): a restarted controller gives
every registered broker a fresh session. Entering controlled shutdown is also written to the log
(`BrokerRegistrationChangeRecord`, as Kafka since 3.3), so every leader stops proposing that
broker for its ISRs and a new controller keeps it ineligible.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from kmirror.metadata.controller.log_dirs import directories_offline
from kmirror.metadata.controller.partition_change import (
    elect_offline_partitions,
    eligible_brokers,
    partitions_of_broker,
    remove_broker_from_isrs,
)
from kmirror.metadata.controller.result import ApiError, ControllerResult
from kmirror.metadata.image import BrokerRegistration, MetadataImage
from kmirror.metadata.records import (
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    FenceBrokerRecord,
    Record,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)


@dataclass(frozen=True, slots=True)
class HeartbeatReply:
    error: ApiError
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False


@dataclass
class BrokerHeartbeatManager:
    """Last contact per broker (monotonic ms) and who is in controlled shutdown."""

    session_timeout_ms: int = 9000
    last_contact_ms: dict[int, int] = field(default_factory=dict)
    shutting_down: set[int] = field(default_factory=set)
    unclean_warnings: list[tuple[str, int, int]] = field(default_factory=list)

    def touch(self, broker_id: int, now_ms: int) -> None:
        self.last_contact_ms[broker_id] = now_ms

    def controlled_shutdowns_pending(self, image: MetadataImage, asked: bool) -> list[int]:
        """Brokers whose controlled shutdown has begun and is not granted yet (a broker told to
        shut down is fenced): those `image` shows, and with `asked` (on the active controller)
        those whose first request is not committed yet."""
        begun = {b for b, reg in image.brokers.items() if reg.in_controlled_shutdown}
        if asked:
            begun |= self.shutting_down
        return sorted(b for b in begun if b in image.brokers and not image.brokers[b].fenced)

    def expired(self, image: MetadataImage, now_ms: int) -> list[int]:
        """Unfenced brokers whose session has timed out (unknown contact counts from now)."""
        out = []
        for b in image.live_brokers():
            last = self.last_contact_ms.setdefault(b.broker_id, now_ms)
            if now_ms - last > self.session_timeout_ms:
                out.append(b.broker_id)
        return out


def register_broker(
    image: MetadataImage,
    broker_id: int,
    incarnation_id: uuid.UUID,
    endpoints: Sequence[BrokerEndpoint],
    rack: str | None,
    heartbeats: BrokerHeartbeatManager | None = None,
    log_dirs: Sequence[uuid.UUID] = (),
    broker_unclean_default: bool = False,
) -> ControllerResult[int]:
    """Records registering `broker_id` fenced; the response is its new broker epoch.
    Re-registering the same incarnation and endpoints returns the existing epoch. A new
    incarnation ends a controlled shutdown of the previous one; it keeps the cordoned log
    directories of the previous registration it still has (the broker reports its own once it
    has caught up), so that a restarting cordoned broker is not given new partitions meanwhile.
    A replica of the broker whose log directory is not among the new registration's (the disk
    failed at start, or was replaced) leaves its ISR and leadership at once (KIP-858): a broker
    restarted before its session expired would otherwise lead again with a log it no longer
    has, and its followers would truncate to it."""
    current = image.brokers.get(broker_id)
    if (
        current is not None
        and current.incarnation_id == incarnation_id
        and tuple(current.endpoints) == tuple(endpoints)
        and current.rack == rack
        and current.log_dirs == tuple(log_dirs)
    ):
        return ControllerResult([], current.broker_epoch)
    if heartbeats is not None:
        heartbeats.shutting_down.discard(broker_id)
    epoch = image.offset + 1
    cordoned = None
    if current is not None and current.cordoned_log_dirs is not None:
        cordoned = tuple(d for d in current.cordoned_log_dirs if d in log_dirs)
    records: list[Record] = [RegisterBrokerRecord(broker_id, incarnation_id, epoch, tuple(endpoints), rack, True,
                                                  tuple(log_dirs), cordoned)]
    if current is not None:
        after = image.apply(records, image.offset)
        eligible = eligible_brokers(after, heartbeats.shutting_down if heartbeats is not None else ()) - {broker_id}
        moves, unclean = remove_broker_from_isrs(after, broker_id, eligible, broker_unclean_default,
                                                 only=lambda reg: broker_id in after.offline_replicas(reg))
        if heartbeats is not None:
            heartbeats.unclean_warnings.extend(unclean)
        records.extend(moves)
    return ControllerResult(records, epoch)


def fence_broker(
    image: MetadataImage, broker_id: int, heartbeats: BrokerHeartbeatManager, broker_unclean_default: bool
) -> ControllerResult[None]:
    """Fence `broker_id` and move its leaderships and ISR memberships."""
    b = image.brokers.get(broker_id)
    if b is None or b.fenced:
        return ControllerResult([], None)
    eligible = eligible_brokers(image, heartbeats.shutting_down) - {broker_id}
    changes, unclean = remove_broker_from_isrs(image, broker_id, eligible, broker_unclean_default)
    heartbeats.unclean_warnings.extend(unclean)
    records: list[Record] = [FenceBrokerRecord(broker_id, b.broker_epoch), *changes]
    return ControllerResult(records, None)


def unregister_broker(
    image: MetadataImage, broker_id: int, heartbeats: BrokerHeartbeatManager, broker_unclean_default: bool
) -> ControllerResult[ApiError]:
    """UnregisterBroker (Kafka's `ReplicationControlManager.unregisterBroker`): move the
    broker's leaderships and ISR memberships away, then remove its registration. Its replicas
    stay in the partitions' replica lists until they are reassigned; the broker registers
    anew if it starts again. Unlike Kafka, a broker still unfenced (running, with a live
    session) is refused: it would re-register at its next heartbeat, after its partitions
    lost it for nothing (docs/design/controller.md)."""
    b = image.brokers.get(broker_id)
    if b is None:
        return ControllerResult(
            [], ApiError(ErrorCode.broker_id_not_registered, f"Broker ID {broker_id} is not currently registered"))
    if not b.fenced:
        return ControllerResult([], ApiError(
            ErrorCode.invalid_request,
            f"Broker {broker_id} is unfenced (running): stop it, and unregister it once it is fenced"))
    eligible = eligible_brokers(image, heartbeats.shutting_down) - {broker_id}
    changes, unclean = remove_broker_from_isrs(image, broker_id, eligible, broker_unclean_default)
    heartbeats.unclean_warnings.extend(unclean)
    heartbeats.last_contact_ms.pop(broker_id, None)
    heartbeats.shutting_down.discard(broker_id)
    return ControllerResult([*changes, UnregisterBrokerRecord(broker_id, b.broker_epoch)], ApiError(ErrorCode.none))


def broker_heartbeat(
    image: MetadataImage,
    broker_id: int,
    broker_epoch: int,
    current_metadata_offset: int,
    want_fence: bool,
    want_shut_down: bool,
    heartbeats: BrokerHeartbeatManager,
    now_ms: int,
    broker_unclean_default: bool,
    cordoned_log_dirs: Sequence[uuid.UUID] | None = None,
    offline_log_dirs: Sequence[uuid.UUID] = (),
) -> ControllerResult[HeartbeatReply]:
    """`cordoned_log_dirs`: the directories the broker holds cordoned (KIP-1066; None: not
    reported), stored on its registration when they changed, as Kafka's
    ReplicationControlManager.handleDirectoriesCordoned does. `offline_log_dirs`: those that
    failed (KIP-858, `log_dirs.directories_offline`); their changes come first, and the rest of
    the heartbeat is decided on the image after them."""
    b = image.brokers.get(broker_id)
    if b is None:
        return ControllerResult([], HeartbeatReply(ApiError(ErrorCode.broker_id_not_registered)))
    if b.broker_epoch != broker_epoch:
        return ControllerResult([], HeartbeatReply(ApiError(ErrorCode.stale_broker_epoch)))
    heartbeats.touch(broker_id, now_ms)
    first: list[Record] = []
    if cordoned_log_dirs is not None and (
            b.cordoned_log_dirs is None or set(b.cordoned_log_dirs) != set(cordoned_log_dirs)):
        first.append(BrokerRegistrationChangeRecord(broker_id, b.broker_epoch, cordoned_log_dirs=tuple(cordoned_log_dirs)))
    if offline_log_dirs:
        offline, unclean = directories_offline(image, broker_id, offline_log_dirs,
                                               eligible_brokers(image, heartbeats.shutting_down), broker_unclean_default)
        heartbeats.unclean_warnings.extend(unclean)
        first.extend(offline)
    if first:
        image = image.apply(first, image.offset)
        b = image.brokers[broker_id]
    result = _heartbeat(image, b, current_metadata_offset, want_fence, want_shut_down, heartbeats,
                        broker_unclean_default)
    return ControllerResult([*first, *result.records], result.response)


def _heartbeat(
    image: MetadataImage,
    b: BrokerRegistration,
    current_metadata_offset: int,
    want_fence: bool,
    want_shut_down: bool,
    heartbeats: BrokerHeartbeatManager,
    broker_unclean_default: bool,
) -> ControllerResult[HeartbeatReply]:
    broker_id, broker_epoch = b.broker_id, b.broker_epoch
    caught_up = current_metadata_offset >= b.broker_epoch
    ok = ApiError(ErrorCode.none)
    if want_shut_down:
        heartbeats.shutting_down.add(broker_id)
        eligible = eligible_brokers(image, heartbeats.shutting_down)
        moves, unclean = remove_broker_from_isrs(image, broker_id, eligible, broker_unclean_default)
        heartbeats.unclean_warnings.extend(unclean)
        still_leads = any(reg.leader == broker_id for _, _, reg in partitions_of_broker(image, broker_id))
        records: list[Record] = list(moves)
        if not b.in_controlled_shutdown:
            records.insert(0, BrokerRegistrationChangeRecord(broker_id, b.broker_epoch, in_controlled_shutdown=1))
        done = not moves and not still_leads and b.in_controlled_shutdown
        if done and not b.fenced:
            records.append(FenceBrokerRecord(broker_id, b.broker_epoch))
        return ControllerResult(records, HeartbeatReply(ok, caught_up, b.fenced or done, should_shut_down=done))
    if want_fence:
        result = fence_broker(image, broker_id, heartbeats, broker_unclean_default)
        return ControllerResult(result.records, HeartbeatReply(ok, caught_up, True))
    if b.fenced and caught_up and broker_id not in heartbeats.shutting_down:
        eligible = eligible_brokers(image, heartbeats.shutting_down) | {broker_id}
        elections, unclean = elect_offline_partitions(image, eligible, broker_unclean_default, only_broker=broker_id)
        heartbeats.unclean_warnings.extend(unclean)
        return ControllerResult(
            [UnfenceBrokerRecord(broker_id, broker_epoch), *elections], HeartbeatReply(ok, True, False)
        )
    return ControllerResult([], HeartbeatReply(ok, caught_up, b.fenced))
