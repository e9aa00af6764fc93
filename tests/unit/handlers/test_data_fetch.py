import asyncio
import dataclasses
import datetime
from uuid import UUID, uuid4

import pytest
from kio.index import load_response_schema

from kmirror.broker.api import RequestContext
from kmirror.broker.handlers.fetch import handle
from kmirror.broker.purgatory import purgatory_for
from kmirror.metadata.image import PartitionRegistration
from kmirror.metrics.request_metrics import error_counts
from kmirror.protocol.codec import RequestHeaderView
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.records.batch import set_base_offset, set_partition_leader_epoch
from kmirror.records.builder import build_batch
from kmirror.testing.replication import (
    call_handler,
    data_services,
    image_with,
    request_type,
    single_node_image,
)
from kmirror.types import TopicPartition

T_ID = uuid4()
T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


def batch(value: bytes) -> bytes:
    return build_batch([(b"k", value, (), 1_700_000_000_000)])


def stored(value: bytes, offset: int, epoch: int) -> bytes:
    """The batch as the leader stores it: the producer's bytes with offset and epoch set."""
    buf = bytearray(batch(value))
    set_base_offset(buf, 0, offset)
    set_partition_leader_epoch(buf, 0, epoch)
    return bytes(buf)


def fetch_request(
    version: int,
    parts: dict[str | UUID, list[tuple[int, int]]],
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 1 << 20,
    partition_max_bytes: int = 1 << 20,
    isolation_level: int = 0,
    current_leader_epoch: int = -1,
    session_id: int = 0,
    session_epoch: int = -1,
) -> object:
    rt = request_type(1, version)
    FetchTopic = nested(rt, "FetchTopic")
    FetchPartition = nested(rt, "FetchPartition")
    topics = tuple(
        build(
            FetchTopic,
            topic=key if isinstance(key, str) else "",
            topic_id=key if isinstance(key, UUID) else UUID(int=0),
            partitions=tuple(
                build(
                    FetchPartition,
                    partition=i,
                    fetch_offset=off,
                    partition_max_bytes=partition_max_bytes,
                    current_leader_epoch=current_leader_epoch,
                )
                for i, off in ps
            ),
        )
        for key, ps in parts.items()
    )
    return build(
        rt,
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        session_id=session_id,
        session_epoch=session_epoch,
        topics=topics,
        forgotten_topics_data=(),
        rack_id="",
    )


def services_with_data():
    services = data_services(single_node_image(1, {"t": (T_ID, 2)}, leader_epoch=3))
    rm = services.replica_manager
    rm.append_records({T0: batch(b"one")}, 1)
    rm.append_records({T0: batch(b"two")}, 1)
    return services


def partitions_of(response) -> dict[int, object]:
    return {p.partition_index: p for t in response.responses for p in t.partitions}


@pytest.mark.parametrize("version", [4, 7, 11, 12, 15, 16, 17])
def test_fetch_returns_stored_bytes_with_offsets(version: int) -> None:
    services = services_with_data()
    key: str | UUID = T_ID if version >= 13 else "t"
    response = call_handler(handle, services, 1, version, fetch_request(version, {key: [(0, 0), (1, 0)]}))
    parts = partitions_of(response)
    p0 = parts[0]
    assert p0.error_code == ErrorCode.none
    assert bytes(p0.records) == stored(b"one", 0, 3) + stored(b"two", 1, 3)
    assert (p0.high_watermark, p0.last_stable_offset) == (2, 2)
    if version >= 5:
        assert p0.log_start_offset == 0
    assert parts[1].records == b"" and parts[1].high_watermark == 0
    if version >= 7:
        assert response.session_id == 0 and response.error_code == ErrorCode.none


def test_fetch_partition_max_bytes_returns_at_least_one_batch() -> None:
    services = services_with_data()
    response = call_handler(handle, services, 1, 12, fetch_request(12, {"t": [(0, 0)]}, partition_max_bytes=1))
    assert bytes(partitions_of(response)[0].records) == stored(b"one", 0, 3)


def test_fetch_errors() -> None:
    services = services_with_data()
    response = call_handler(handle, services, 1, 12, fetch_request(12, {"t": [(0, 9)], "nope": [(0, 0)]}))
    codes = {t.topic: t.partitions[0].error_code for t in response.responses}
    assert codes == {"t": ErrorCode.offset_out_of_range, "nope": ErrorCode.unknown_topic_or_partition}
    fenced = call_handler(handle, services, 1, 12, fetch_request(12, {"t": [(0, 0)]}, current_leader_epoch=2))
    p = partitions_of(fenced)[0]
    assert p.error_code == ErrorCode.fenced_leader_epoch
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (1, 3)
    unknown = call_handler(handle, services, 1, 12, fetch_request(12, {"t": [(0, 0)]}, current_leader_epoch=4))
    assert partitions_of(unknown)[0].error_code == ErrorCode.unknown_leader_epoch
    by_id = call_handler(handle, services, 1, 13, fetch_request(13, {uuid4(): [(0, 0)]}))
    assert partitions_of(by_id)[0].error_code == ErrorCode.unknown_topic_id


def test_consumer_fetch_from_a_follower_needs_client_metadata() -> None:
    image = image_with({"t": (T_ID, {0: PartitionRegistration((1, 2), (1, 2), 2, 1, 0)})})
    services = data_services(image)
    old = call_handler(handle, services, 1, 10, fetch_request(10, {"t": [(0, 0)]}))
    assert partitions_of(old)[0].error_code == ErrorCode.not_leader_or_follower
    # v11+ carries client metadata: a follower serves up to its HW (KIP-392)
    response = call_handler(handle, services, 1, 12, fetch_request(12, {"t": [(0, 0)]}))
    p = partitions_of(response)[0]
    assert p.error_code == ErrorCode.none and p.records == b"" and p.high_watermark == 0


def test_fetch_session_errors() -> None:
    services = services_with_data()
    incremental = call_handler(handle, services, 1, 12, fetch_request(12, {}, session_id=77, session_epoch=1))
    assert incremental.error_code == ErrorCode.fetch_session_id_not_found and incremental.responses == ()
    bad_epoch = call_handler(handle, services, 1, 12, fetch_request(12, {}, session_epoch=5))
    assert bad_epoch.error_code == ErrorCode.invalid_fetch_session_epoch


def test_incremental_fetch_session_answers_only_changed_partitions() -> None:
    services = services_with_data()
    rm = services.replica_manager
    opening = call_handler(handle, services, 1, 12, fetch_request(12, {"t": [(0, 0), (1, 0)]}, session_epoch=0))
    assert opening.session_id != 0
    assert sorted(partitions_of(opening)) == [0, 1]
    sid = opening.session_id
    # Client moved its position on t-0 only; nothing new anywhere: nothing to say.
    quiet = call_handler(handle, services, 1, 12, fetch_request(12, {"t": [(0, 2)]}, session_id=sid, session_epoch=1))
    assert quiet.error_code == ErrorCode.none and quiet.session_id == sid and quiet.responses == ()
    # New data on t-1 (still at offset 0 in the session): only t-1 is answered.
    rm.append_records({T1: batch(b"new")}, 1)
    changed = call_handler(handle, services, 1, 12, fetch_request(12, {}, session_id=sid, session_epoch=2))
    parts = partitions_of(changed)
    assert list(parts) == [1] and bytes(parts[1].records) == stored(b"new", 0, 3)
    # t-0 continues from offset 2 kept by the session.
    rm.append_records({T0: batch(b"three")}, 1)
    later = call_handler(handle, services, 1, 12, fetch_request(12, {"t": [(1, 1)]}, session_id=sid, session_epoch=3))
    assert {i: bytes(p.records) for i, p in partitions_of(later).items()} == {0: stored(b"three", 2, 3)}
    # A replayed epoch is refused; forgetting a partition drops it from the session.
    replay = call_handler(handle, services, 1, 12, fetch_request(12, {}, session_id=sid, session_epoch=3))
    assert replay.error_code == ErrorCode.invalid_fetch_session_epoch
    rt = request_type(1, 12)
    forget = dataclasses.replace(
        fetch_request(12, {}, session_id=sid, session_epoch=4),
        forgotten_topics_data=(nested(rt, "ForgottenTopic")(topic="t", partitions=(0,)),),
    )
    call_handler(handle, services, 1, 12, forget)
    rm.append_records({T0: batch(b"four")}, 1)
    after = call_handler(handle, services, 1, 12, fetch_request(12, {}, session_id=sid, session_epoch=5))
    assert after.responses == ()
    # Closing the session: a sessionless full answer.
    closing = call_handler(handle, services, 1, 12, fetch_request(12, {"t": [(0, 0)]}, session_id=sid, session_epoch=-1))
    assert closing.session_id == 0 and list(partitions_of(closing)) == [0]
    gone = call_handler(handle, services, 1, 12, fetch_request(12, {}, session_id=sid, session_epoch=6))
    assert gone.error_code == ErrorCode.fetch_session_id_not_found


def test_incremental_fetch_session_answers_offsets_that_moved_without_records() -> None:
    services = services_with_data()
    rm = services.replica_manager
    opening = call_handler(handle, services, 1, 12, fetch_request(12, {"t": [(0, 2), (1, 0)]}, session_epoch=0))
    sid = opening.session_id
    rm.delete_records({T0: 1})  # t-0's log start moves; no record to read anywhere
    moved = call_handler(handle, services, 1, 12, fetch_request(12, {}, session_id=sid, session_epoch=1))
    parts = partitions_of(moved)
    assert list(parts) == [0] and parts[0].records in (b"", None)
    assert (parts[0].log_start_offset, parts[0].high_watermark) == (1, 2)
    again = call_handler(handle, services, 1, 12, fetch_request(12, {}, session_id=sid, session_epoch=2))
    assert again.responses == ()


def test_incremental_fetch_session_by_topic_id() -> None:
    services = services_with_data()
    opening = call_handler(handle, services, 1, 16, fetch_request(16, {T_ID: [(0, 0)]}, session_epoch=0))
    sid = opening.session_id
    services.replica_manager.append_records({T0: batch(b"more")}, 1)
    changed = call_handler(handle, services, 1, 16, fetch_request(16, {T_ID: [(0, 2)]}, session_id=sid, session_epoch=1))
    (topic,) = changed.responses
    assert topic.topic_id == T_ID and bytes(topic.partitions[0].records) == stored(b"more", 2, 3)


def test_read_committed_answers_empty_aborted_transactions() -> None:
    services = services_with_data()
    response = call_handler(handle, services, 1, 11, fetch_request(11, {"t": [(0, 0)]}, isolation_level=1))
    assert partitions_of(response)[0].aborted_transactions == ()


@pytest.mark.parametrize("version", [5, 11, 12, 16])
@pytest.mark.parametrize("isolation_level", [0, 1])
def test_idle_partitions_of_a_sessionless_fetch_answer_as_an_empty_read(version: int, isolation_level: int) -> None:
    """A consumer's partition with nothing to read is answered from its offsets, written once
    (`IdleRead`, `Encoded`): the same fields as a read, and counted by the request metrics."""
    services = services_with_data()
    key: str | UUID = T_ID if version >= 13 else "t"
    request = fetch_request(version, {key: [(0, 0), (1, 0)]}, isolation_level=isolation_level)
    for _ in range(2):  # the second answer reuses the idle partition's bytes
        parts = partitions_of(call_handler(handle, services, 1, version, request))
        assert bytes(parts[0].records) == stored(b"one", 0, 3) + stored(b"two", 1, 3)
        idle = parts[1]
        assert (idle.error_code, idle.high_watermark, idle.last_stable_offset, idle.log_start_offset) == (
            ErrorCode.none, 0, 0, 0)
        assert not idle.records and getattr(idle, "preferred_read_replica", -1) == -1  # v11+
        assert idle.aborted_transactions == (() if isolation_level == 1 else None)
    rt = load_response_schema(1, version)
    ctx = RequestContext(RequestHeaderView(1, version, 1, "test"), rt, "127.0.0.1", 1)
    # both partitions, and the response's own error code from v7
    assert error_counts(asyncio.run(handle(services, ctx, request))) == {0: 3 if version >= 7 else 2}


def test_delayed_fetch_completes_when_data_arrives() -> None:
    services = data_services(single_node_image(1, {"t": (T_ID, 1)}))
    rm = services.replica_manager
    version = 12
    rt_response = load_response_schema(1, version)
    ctx = RequestContext(RequestHeaderView(1, version, 1, "test"), rt_response, "127.0.0.1", 1)
    request = fetch_request(version, {"t": [(0, 0)]}, max_wait_ms=60_000, min_bytes=1)

    async def scenario():
        task = asyncio.ensure_future(handle(services, ctx, request))
        while purgatory_for(rm).watched(T0) == 0:
            await asyncio.sleep(0)
        assert not task.done()
        rm.append_records({T0: batch(b"late")}, 1)
        return await asyncio.wait_for(task, 30)

    response = asyncio.run(scenario())
    assert bytes(partitions_of(response)[0].records) == stored(b"late", 0, 0)
    assert purgatory_for(rm).watched(T0) == 0


def test_delayed_fetch_expires_with_what_is_there() -> None:
    services = services_with_data()
    request = fetch_request(12, {"t": [(0, 2)]}, max_wait_ms=1, min_bytes=1)
    response = call_handler(handle, services, 1, 12, request)
    p = partitions_of(response)[0]
    assert p.error_code == ErrorCode.none and p.records == b"" and p.high_watermark == 2
