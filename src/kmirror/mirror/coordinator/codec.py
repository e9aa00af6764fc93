"""`__mirror_state` bytes <-> the coordinator's record values, over the wire schemas of
`kmirror.kip1279.state_records` (MirrorPartitionState records with the LME tag).

MirrorManagedAcls records (type 3, kmirror's) carry the ACL bindings a mirror's ACL sync
manages, keyed by mirror name.

LastMirrorEpochs records (type 1, keyed by mirror name only) are not written by this
coordinator: the LME travels in each partition's state value. Reading one while loading
yields nothing (it carries topic names, not the topic ids the state keys use).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from kio.static.primitive import i8, i32

from kmirror.kip1279 import state_records as wire
from kmirror.kip1279.state import MirrorPartitionState
from kmirror.mirror.coordinator.records import (
    ManagedAclsKey,
    ManagedAclsValue,
    MirrorPartitionKey,
    MirrorPartitionStateValue,
    StateRecord,
)


def encode_record(record: StateRecord) -> tuple[bytes, bytes | None]:
    key, value = record
    if isinstance(key, ManagedAclsKey):
        acls_key = wire.encode_key(wire.MirrorManagedAclsKey(mirror_name=key.mirror_name))
        if value is None:
            return acls_key, None
        assert isinstance(value, ManagedAclsValue)
        return acls_key, wire.encode_value(wire.MirrorManagedAclsValue(acls=tuple(
            wire.ManagedAcl(resource_type=i8(a[0]), resource_name=a[1], pattern_type=i8(a[2]), principal=a[3],
                            host=a[4], operation=i8(a[5]), permission_type=i8(a[6])) for a in sorted(value.acls))))
    assert isinstance(value, MirrorPartitionStateValue | None)
    wire_key = wire.MirrorPartitionStateKey(mirror_name=key.mirror_name, topic_id=key.topic_id,
                                            partition=i32(key.partition))
    if value is None:
        return wire.encode_key(wire_key), None
    wire_value = wire.MirrorPartitionStateValue(topic_name=value.topic_name, partition=i32(key.partition),
                                                state=i8(int(value.state)),
                                                last_mirror_epoch=i32(value.last_mirrored_epoch))
    return wire.encode_key(wire_key), wire.encode_value(wire_value)


def encode_records(records: Iterable[StateRecord]) -> list[tuple[bytes, bytes | None]]:
    return [encode_record(r) for r in records]


def decode_records(records: Iterable[tuple[bytes, bytes | None]]) -> Iterator[StateRecord]:
    """The state records of a `__mirror_state` partition, in order; raises
    `MirrorStateRecordError` on an undecodable record (a corrupt coordinator log)."""
    for raw_key, raw_value in records:
        key, value = wire.decode(raw_key, raw_value)
        if isinstance(key, wire.MirrorManagedAclsKey):
            if value is None:
                yield ManagedAclsKey(key.mirror_name), None
            else:
                assert isinstance(value, wire.MirrorManagedAclsValue)
                yield ManagedAclsKey(key.mirror_name), ManagedAclsValue(frozenset(
                    (int(a.resource_type), a.resource_name, int(a.pattern_type), a.principal, a.host,
                     int(a.operation), int(a.permission_type)) for a in value.acls))
            continue
        if not isinstance(key, wire.MirrorPartitionStateKey):
            continue
        ours = MirrorPartitionKey(key.mirror_name, key.topic_id, int(key.partition))
        if value is None:
            yield ours, None
        else:
            assert isinstance(value, wire.MirrorPartitionStateValue)
            yield ours, MirrorPartitionStateValue(value.topic_name, MirrorPartitionState.from_code(int(value.state)),
                                                  int(value.last_mirror_epoch))
