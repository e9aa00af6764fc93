"""Consumer group offset and ACL sync (KIP-1279 MirrorMetadataManager): the planners, which
broker syncs a mirror, and the syncers over fake Admin clients."""

from __future__ import annotations

import asyncio
import dataclasses
from uuid import UUID

from kmirror.client.acls import AclBinding
from kmirror.client.admin import TopicDescription
from kmirror.client.errors import KafkaConnectionError, KafkaError
from kmirror.client.groups import ListedGroup, OffsetAndMetadata
from kmirror.config.mirror import MIRROR_STATE_TOPIC, parse_mirror_config
from kmirror.metadata.image import ConfigResource, PartitionRegistration
from kmirror.metadata.mirror_records import MIRROR_CONFIG_RESOURCE_TYPE
from kmirror.mirror.coordinator.partitioner import metadata_partition_for
from kmirror.mirror.metadata_sync.acls import AclSync, ManagedAclStore, acls_to_create, acls_to_delete
from kmirror.mirror.metadata_sync.admins import SyncAdmins
from kmirror.mirror.metadata_sync.auto_add import TopicAutoAdd, topics_to_add
from kmirror.mirror.metadata_sync.coordination import (
    active_topic_partitions,
    coordinated_mirrors,
    sync_coordinator,
)
from kmirror.mirror.metadata_sync.groups import (
    GroupOffsetSync,
    groups_to_sync,
    mirrored_offsets,
    offsets_to_commit,
)
from kmirror.mirror.sync_errors import MirrorSyncErrors
from kmirror.ports import ManualClock
from kmirror.protocol.errors import ErrorCode
from kmirror.testing.metadata import image_with_brokers
from kmirror.testing.replication import image_with
from kmirror.types import TopicPartition as TP

STATE_PARTITIONS = 5


def reg(leader: int) -> PartitionRegistration:
    return PartitionRegistration((leader,), (leader,), leader, 0, 0)


def image(mirror_configs: dict[str, dict[str, str]], topics: dict[str, tuple[str, int]], *,
          state_leaders: dict[int, int] | None = None, broker: int = 1):
    """`topics`: name -> (`mirror.name` value, partition count); `__mirror_state` partitions led
    by `state_leaders` (partition -> broker; default every one by `broker`)."""
    leaders = state_leaders or {p: broker for p in range(STATE_PARTITIONS)}
    spec = {name: (UUID(int=i + 1), {p: reg(broker) for p in range(n)}) for i, (name, (_, n)) in enumerate(topics.items())}
    spec[MIRROR_STATE_TOPIC] = (UUID(int=99), {p: reg(b) for p, b in leaders.items()})
    base = image_with(spec, configs={name: {"mirror.name": value} for name, (value, _) in topics.items() if value})
    configs = dict(base.configs)
    for name, values in mirror_configs.items():
        configs[ConfigResource(MIRROR_CONFIG_RESOURCE_TYPE, name)] = {"bootstrap.servers": "src:9092", **values}
    return dataclasses.replace(base, configs=configs, brokers=image_with_brokers(broker).brokers)


def om(offset: int, metadata: str = "", epoch: int = 0) -> OffsetAndMetadata:
    return OffsetAndMetadata(offset, epoch, metadata)


def config(**values: str):
    return parse_mirror_config({"bootstrap.servers": "src:9092", **values})


# planners

def test_groups_to_sync_full_matches_the_include_regexes_and_keeps_classic_consumer_groups():
    listed = [ListedGroup("app-1", "consumer", "Empty"), ListedGroup("app-2", "", ""),
              ListedGroup("xapp-1", "consumer", "Stable"), ListedGroup("app-c", "connect", "Stable"),
              ListedGroup("batch", "consumer", "Empty")]
    assert groups_to_sync(config(**{"mirror.groups.include": "app-.*,batch"}), listed) == ["app-1", "app-2", "batch"]
    assert groups_to_sync(config(), listed) == ["app-1", "app-2", "batch", "xapp-1"]


def test_mirrored_offsets_keep_active_topics_and_destination_partitions_only():
    source = {TP("t", 0): om(5), TP("t", 2): om(9), TP("paused", 0): om(1), TP("other", 0): om(3)}
    assert mirrored_offsets(source, {"t": 2}) == {TP("t", 0): om(5)}


def test_offsets_to_commit_skip_what_the_destination_has_and_carry_metadata_and_epoch():
    mirrored = {TP("t", 0): om(5, "m"), TP("t", 1): om(7, "m"), TP("t", 2): om(8, "m", 3), TP("t", 3): om(1)}
    destination = {TP("t", 0): om(5, "m"), TP("t", 1): om(7, "old"), TP("t", 2): om(8, "m", 2)}
    assert offsets_to_commit(mirrored, destination) == {TP("t", 1): om(7, "m"), TP("t", 2): om(8, "m", 3),
                                                         TP("t", 3): om(1)}


def test_acls_to_create_are_the_included_source_bindings_the_destination_lacks():
    def binding(principal: str, operation: int = 3, resource_type: int = 2, name: str = "t") -> AclBinding:
        return AclBinding(resource_type, name, 3, principal, "*", operation, 3)

    alice, bob, carol = binding("User:alice"), binding("User:bob", 4), binding("User:carol")
    group = binding("User:alice", resource_type=3, name="g")
    rules = config(**{"mirror.acl.include": "TOPIC;*;READ;ALLOW;User:(alice|carol)"})
    assert acls_to_create(rules, [alice, bob, carol, group, alice], {carol}) == [alice]
    assert acls_to_create(config(), [alice, bob, group], set()) == [alice, bob, group]


# which broker, which topics

def test_one_broker_per_mirror_syncs_it_the_leader_of_its_mirror_state_partition():
    names = ["m1", "m2", "dr", "west"]
    leaders = {p: 10 + p for p in range(STATE_PARTITIONS)}
    img = image({n: {} for n in names}, {}, state_leaders=leaders)
    for n in names:
        assert sync_coordinator(img, n) == 10 + metadata_partition_for(n, STATE_PARTITIONS)
    for broker in leaders.values():
        assert [m.name for m in coordinated_mirrors(img, broker)] == sorted(
            n for n in names if sync_coordinator(img, n) == broker)
    no_state = dataclasses.replace(img, topics={})
    assert sync_coordinator(no_state, "m1") is None and coordinated_mirrors(no_state, 10) == []
    leaderless = image({"m1": {}}, {}, state_leaders={p: -1 for p in range(STATE_PARTITIONS)})
    assert sync_coordinator(leaderless, "m1") is None


def test_only_active_member_topics_are_synced():
    img = image({"m": {}}, {"a": ("m", 2), "p": ("m.paused", 1), "r": ("m.removed", 1), "o": ("other", 3),
                            "plain": ("", 1)})
    assert active_topic_partitions(img, "m") == {"a": 2}


# syncers over fake Admin clients

class FakeAdmin:
    def __init__(self) -> None:
        self.groups: list[ListedGroup] = []
        self.offsets: dict[str, dict[TP, OffsetAndMetadata]] = {}
        self.commit_error: dict[str, int] = {}
        self.fetch_error: dict[str, int] = {}
        self.offset_fetches = 0
        self.commits: list[dict[TP, OffsetAndMetadata]] = []
        self.acls: list[AclBinding] = []
        self.created: list[AclBinding] = []
        self.deleted: list[AclBinding] = []
        self.acl_error = 0
        self.fail: Exception | None = None
        self.commit_fail: Exception | None = None
        self.closed = False
        self.topic_ids: dict[str, UUID | None] | None = None

    async def list_groups(self) -> list[ListedGroup]:
        if self.fail:
            raise self.fail
        return self.groups

    async def describe_topics(self) -> dict[str, TopicDescription]:
        """Every topic `topic_ids` names (a source without topic ids when it is None)."""
        names = self.topic_ids if self.topic_ids is not None else {
            tp.topic: None for offsets in self.offsets.values() for tp in offsets}
        return {n: TopicDescription(n, i, False, ()) for n, i in names.items()}

    async def list_consumer_groups_offsets(self, group_ids):
        self.offset_fetches += 1
        return {g: KafkaError(self.fetch_error[g]) if g in self.fetch_error else dict(self.offsets.get(g, {}))
                for g in group_ids}

    async def alter_consumer_groups_offsets(self, offsets):
        if self.commit_fail:
            raise self.commit_fail
        out = {}
        for group_id, group_offsets in offsets.items():
            code = self.commit_error.get(group_id, 0)
            self.commits.append(dict(group_offsets))
            if not code:
                self.offsets.setdefault(group_id, {}).update(group_offsets)
            out[group_id] = {tp: KafkaError(code) if code else None for tp in group_offsets}
        return out

    async def describe_acls(self) -> list[AclBinding]:
        if self.fail:
            raise self.fail
        return self.acls

    async def create_acls(self, bindings):
        if not self.acl_error:
            self.created.extend(bindings)
        return {b: KafkaError(self.acl_error) if self.acl_error else None for b in bindings}

    async def delete_acls(self, bindings):
        if not self.acl_error:
            self.deleted.extend(bindings)
        return {b: KafkaError(self.acl_error) if self.acl_error else None for b in bindings}

    async def close(self) -> None:
        self.closed = True


def admins_for(img_ref: dict, source: FakeAdmin, destination: FakeAdmin) -> tuple[SyncAdmins, list]:
    made: list = []

    def factory(bootstrap, client_id, cfg):
        made.append((bootstrap, client_id))
        return destination if cfg is None else source

    return SyncAdmins(1, lambda: img_ref["image"], None, "metadata-sync", factory), made


def test_group_offsets_are_committed_at_the_destination_for_active_topics_only():
    src, dst = FakeAdmin(), FakeAdmin()
    src.groups = [ListedGroup("app", "consumer", "Stable"), ListedGroup("skip", "consumer", "Empty")]
    src.offsets = {"app": {TP("a", 0): om(40, "x", 2), TP("a", 1): om(3), TP("p", 0): om(7)},
                   "skip": {TP("a", 0): om(1)}}
    ref = {"image": image({"m": {"mirror.groups.include": "app"}}, {"a": ("m", 2), "p": ("m.paused", 1)})}
    admins, made = admins_for(ref, src, dst)
    errors = MirrorSyncErrors()
    sync = GroupOffsetSync(1, lambda: ref["image"], admins, errors, clock=ManualClock())
    asyncio.run(sync.run_once())
    assert dst.offsets == {"app": {TP("a", 0): om(40, "x", 2), TP("a", 1): om(3)}}
    assert made == [("src:9092", "broker-1-mirror-m-metadata-sync"), ("host1:9092", "broker-1-metadata-sync")]
    assert errors.consumer_group_offset == 0

    # the topic leaves the mirror (failover): its offsets are the destination's now
    src.offsets["app"][TP("a", 0)] = om(50)
    ref["image"] = image({"m": {"mirror.groups.include": "app"}}, {"a": ("m.removed", 2)})
    asyncio.run(sync.run_once())
    assert dst.offsets["app"][TP("a", 0)] == om(40, "x", 2)
    asyncio.run(sync.close())
    assert src.closed and dst.closed


def test_unchanged_offsets_are_committed_again_before_the_destination_expires_them():
    src, dst = FakeAdmin(), FakeAdmin()
    src.groups = [ListedGroup("app", "consumer", "Stable")]
    src.offsets = {"app": {TP("a", 0): om(40)}}
    ref = {"image": image({"m": {}}, {"a": ("m", 1)})}
    commits = dst.commits
    clock = ManualClock()
    sync = GroupOffsetSync(1, lambda: ref["image"], admins_for(ref, src, dst)[0], MirrorSyncErrors(), clock=clock,
                           recommit_after_ms=1000)
    asyncio.run(sync.run_once())
    clock.advance(999)
    asyncio.run(sync.run_once())  # unchanged and recently committed: nothing to write
    assert commits == [{TP("a", 0): om(40)}]
    clock.advance(1)
    asyncio.run(sync.run_once())  # half the retention since the last commit: the same offsets again
    assert commits == [{TP("a", 0): om(40)}] * 2


def test_every_group_is_fetched_in_one_call_on_each_side_and_a_failed_group_leaves_the_others_synced():
    # the source is far away: a round trip per group would make the sync of thousands of
    # groups take minutes (the client batches a call per coordinator, KIP-709)
    src, dst = FakeAdmin(), FakeAdmin()
    src.groups = [ListedGroup(f"g{i}", "consumer", "Empty") for i in range(100)]
    src.offsets = {f"g{i}": {TP("a", 0): om(i)} for i in range(100)}
    src.fetch_error = {"g7": int(ErrorCode.group_authorization_failed)}
    dst.fetch_error = {"g8": int(ErrorCode.coordinator_not_available)}
    ref = {"image": image({"m": {}}, {"a": ("m", 1)})}
    errors = MirrorSyncErrors()
    asyncio.run(GroupOffsetSync(1, lambda: ref["image"], admins_for(ref, src, dst)[0], errors,
                                clock=ManualClock()).run_once())
    assert (src.offset_fetches, dst.offset_fetches) == (1, 1)
    assert dst.offsets == {f"g{i}": {TP("a", 0): om(i)} for i in range(100) if i not in (7, 8)}
    assert errors.consumer_group_offset == 2


def test_offsets_of_a_deleted_or_recreated_source_topic_are_not_synced():
    # `a` (UUID 1 at the destination) was re-created at the source (UUID 7), `b` (UUID 2)
    # deleted, `c` (UUID 3) is the mirrored topic: only `c` is synced.
    src, dst = FakeAdmin(), FakeAdmin()
    src.groups = [ListedGroup("app", "consumer", "Stable")]
    src.offsets = {"app": {TP("a", 0): om(2), TP("b", 0): om(3), TP("c", 0): om(4)}}
    src.topic_ids = {"a": UUID(int=7), "c": UUID(int=3)}
    ref = {"image": image({"m": {}}, {"a": ("m", 1), "b": ("m", 1), "c": ("m", 1)})}
    admins, _ = admins_for(ref, src, dst)
    asyncio.run(GroupOffsetSync(1, lambda: ref["image"], admins, MirrorSyncErrors(), clock=ManualClock()).run_once())
    assert dst.offsets == {"app": {TP("c", 0): om(4)}}


def test_a_group_with_members_at_the_destination_is_skipped_and_other_failures_count():
    src, dst = FakeAdmin(), FakeAdmin()
    src.groups = [ListedGroup("g", "consumer", "Empty")]
    src.offsets = {"g": {TP("a", 0): om(4)}}
    ref = {"image": image({"m": {}}, {"a": ("m", 1)})}
    admins, _ = admins_for(ref, src, dst)
    errors = MirrorSyncErrors()
    sync = GroupOffsetSync(1, lambda: ref["image"], admins, errors, clock=ManualClock())
    dst.commit_error["g"] = ErrorCode.unknown_member_id
    asyncio.run(sync.run_once())
    assert (dst.offsets, errors.consumer_group_offset) == ({}, 0)
    dst.commit_error["g"] = ErrorCode.unknown_topic_or_partition
    asyncio.run(sync.run_once())
    assert (dst.offsets, errors.consumer_group_offset) == ({}, 1)
    src.fail = KafkaConnectionError("refused")
    asyncio.run(sync.run_once())
    assert errors.consumer_group_offset == 2


def test_a_destination_lost_while_committing_counts_a_failure_and_the_next_pass_commits(caplog):
    """The commit goes to this cluster's group coordinators: one killed meanwhile is a warning
    and a counted failure, not a traceback, and the next pass commits."""
    src, dst = FakeAdmin(), FakeAdmin()
    src.groups = [ListedGroup("g", "consumer", "Empty")]
    src.offsets = {"g": {TP("a", 0): om(4)}}
    ref = {"image": image({"m": {}}, {"a": ("m", 1)})}
    errors = MirrorSyncErrors()
    sync = GroupOffsetSync(1, lambda: ref["image"], admins_for(ref, src, dst)[0], errors, clock=ManualClock())
    dst.commit_fail = KafkaConnectionError("connection to 127.0.0.1:9092 lost: Connection reset by peer")
    with caplog.at_level("WARNING"):
        asyncio.run(sync.run_once())
    assert (dst.offsets, errors.consumer_group_offset) == ({}, 1)
    assert [r.getMessage() for r in caplog.records] == [
        "mirror m: committing the consumer groups' offsets at this cluster failed: connection to 127.0.0.1:9092 "
        "lost: Connection reset by peer"]
    dst.commit_fail = None
    asyncio.run(sync.run_once())
    assert (dst.offsets, errors.consumer_group_offset) == ({"g": {TP("a", 0): om(4)}}, 1)


def test_a_source_without_list_groups_is_said_once_and_not_counted_each_pass(caplog):
    src, dst = FakeAdmin(), FakeAdmin()
    src.fail = KafkaError(ErrorCode.unsupported_version, "mock:9092 does not support ListGroups")
    ref = {"image": image({"m": {}}, {"a": ("m", 1)})}
    errors = MirrorSyncErrors()
    sync = GroupOffsetSync(1, lambda: ref["image"], admins_for(ref, src, dst)[0], errors, clock=ManualClock())
    with caplog.at_level("WARNING"):
        for _ in range(3):
            asyncio.run(sync.run_once())
    said = [r.getMessage() for r in caplog.records if "ListGroups" in r.getMessage()]
    assert said == ["mirror m: no consumer group offsets are synced: UNSUPPORTED_VERSION: mock:9092 does not "
                    "support ListGroups"]
    assert errors.consumer_group_offset == 0 and dst.offsets == {}


def test_nothing_is_synced_by_a_broker_that_does_not_coordinate_the_mirror():
    src, dst = FakeAdmin(), FakeAdmin()
    src.groups = [ListedGroup("g", "consumer", "Empty")]
    src.offsets = {"g": {TP("a", 0): om(4)}}
    src.acls = [AclBinding(2, "a", 3, "User:x", "*", 3, 3)]
    ref = {"image": image({"m": {}}, {"a": ("m", 1)}, state_leaders={p: 2 for p in range(STATE_PARTITIONS)})}
    admins, made = admins_for(ref, src, dst)
    asyncio.run(GroupOffsetSync(1, lambda: ref["image"], admins, MirrorSyncErrors(), clock=ManualClock()).run_once())
    asyncio.run(AclSync(1, lambda: ref["image"], admins, MirrorSyncErrors()).run_once())
    assert (dst.offsets, dst.created, made) == ({}, [], [])


def test_missing_acls_are_created_once_and_failures_count():
    src, dst = FakeAdmin(), FakeAdmin()
    alice, bob = AclBinding(2, "a", 3, "User:alice", "*", 3, 3), AclBinding(2, "a", 3, "User:bob", "*", 4, 3)
    src.acls = [alice, bob]
    ref = {"image": image({"m": {"mirror.acl.include": "*;*;*;*;User:alice"}}, {"a": ("m", 1)})}
    admins, _ = admins_for(ref, src, dst)
    errors = MirrorSyncErrors()
    sync = AclSync(1, lambda: ref["image"], admins, errors)
    asyncio.run(sync.run_once())
    assert (dst.created, errors.acl) == ([alice], 0)

    # once the destination's image holds it, it is not created again
    from kmirror.metadata.image import AclBinding as ImageAcl
    img = ref["image"]
    ref["image"] = dataclasses.replace(img, acls={UUID(int=5): ImageAcl(UUID(int=5), 2, "a", 3, "User:alice", "*", 3, 3)})
    dst.created.clear()
    asyncio.run(sync.run_once())
    assert dst.created == []

    ref["image"] = img
    dst.acl_error = ErrorCode.cluster_authorization_failed
    asyncio.run(sync.run_once())
    assert (dst.created, errors.acl) == ([], 1)
    src.fail = KafkaConnectionError("refused")
    asyncio.run(sync.run_once())
    assert errors.acl == 2


def test_a_mirror_whose_source_cluster_id_mismatches_is_not_synced():
    src, dst = FakeAdmin(), FakeAdmin()
    src.groups = [ListedGroup("g", "consumer", "Empty")]
    src.offsets = {"g": {TP("a", 0): om(4)}}
    src.acls = [AclBinding(2, "a", 3, "User:x", "*", 3, 3)]
    ref = {"image": image({"m": {}}, {"a": ("m", 1)})}
    admins, made = admins_for(ref, src, dst)
    halted = {"m"}
    groups = GroupOffsetSync(1, lambda: ref["image"], admins, MirrorSyncErrors(), lambda name: name in halted,
                             clock=ManualClock())
    acls = AclSync(1, lambda: ref["image"], admins, MirrorSyncErrors(), lambda name: name in halted)
    asyncio.run(groups.run_once())
    asyncio.run(acls.run_once())
    assert (dst.offsets, dst.created, made) == ({}, [], [])
    halted.clear()
    asyncio.run(groups.run_once())
    asyncio.run(acls.run_once())
    assert (dst.offsets, dst.created) == ({"g": {TP("a", 0): om(4)}}, src.acls)


def with_acls(img, bindings):
    from kmirror.metadata.image import AclBinding as ImageAcl
    return dataclasses.replace(img, acls={UUID(int=100 + i): ImageAcl(UUID(int=100 + i), *dataclasses.astuple(b))
                                          for i, b in enumerate(bindings)})


def test_acls_to_delete_are_managed_bindings_the_source_dropped_within_the_include_rules():
    alice, bob, carol = (AclBinding(2, "t", 3, f"User:{n}", "*", 3, 3) for n in ("alice", "bob", "carol"))
    everything = config()
    assert acls_to_delete(everything, [alice], {alice, bob, carol}, None, set()) == []  # first refresh: learn only
    assert acls_to_delete(everything, [alice], {alice, bob, carol}, {alice, bob}, set()) == [bob]  # carol: never seen
    assert acls_to_delete(everything, [alice], {alice, bob}, {alice, bob}, {bob}) == []  # another mirror copies bob
    only_alice = config(**{"mirror.acl.include": "*;*;*;*;User:alice"})
    assert acls_to_delete(only_alice, [], {alice, bob}, {alice, bob}, set()) == [alice]


def test_acls_dropped_at_the_source_are_deleted_at_the_destination_and_local_ones_kept():
    src, dst = FakeAdmin(), FakeAdmin()
    alice, bob = AclBinding(2, "a", 3, "User:alice", "*", 3, 3), AclBinding(2, "a", 3, "User:bob", "*", 4, 3)
    local = AclBinding(2, "a", 3, "User:dr-reader", "*", 3, 3)
    src.acls = [alice, bob]
    base = image({"m": {}}, {"a": ("m", 1)})
    ref = {"image": with_acls(base, [local])}
    admins, _ = admins_for(ref, src, dst)
    errors = MirrorSyncErrors()
    sync = AclSync(1, lambda: ref["image"], admins, errors)
    asyncio.run(sync.run_once())
    assert (dst.created, dst.deleted) == ([alice, bob], [])
    ref["image"] = with_acls(base, [local, alice, bob])

    src.acls = [alice]
    dst.acl_error = ErrorCode.cluster_authorization_failed
    asyncio.run(sync.run_once())
    assert (dst.deleted, errors.acl) == ([], 1)  # refused: retried next refresh
    dst.acl_error = 0
    asyncio.run(sync.run_once())
    assert (dst.deleted, errors.acl) == ([bob], 1)
    ref["image"] = with_acls(base, [local, alice])
    asyncio.run(sync.run_once())
    assert dst.deleted == [bob]  # nothing more: the destination's own binding stays

    # a restarted or new coordinator reads the persisted managed set: a binding the source
    # dropped while no coordinator watched is deleted at its first refresh
    src.acls = []
    restarted = AclSync(1, lambda: ref["image"], admins, MirrorSyncErrors(), store=sync.store)
    asyncio.run(restarted.run_once())
    assert dst.deleted == [bob, alice]
    # with nothing persisted (a mirror's very first refresh) the syncer learns first
    first = AclSync(1, lambda: ref["image"], admins, MirrorSyncErrors())
    asyncio.run(first.run_once())
    assert dst.deleted == [bob, alice]
    src.acls = [local]
    asyncio.run(first.run_once())
    src.acls = []
    asyncio.run(first.run_once())
    assert dst.deleted == [bob, alice, local]


def test_acl_sync_waits_while_the_managed_set_is_not_readable():
    src, dst = FakeAdmin(), FakeAdmin()
    alice = AclBinding(2, "a", 3, "User:alice", "*", 3, 3)
    src.acls = [alice]
    ref = {"image": image({"m": {}}, {"a": ("m", 1)})}
    admins, _ = admins_for(ref, src, dst)

    class Loading(ManagedAclStore):
        def load(self, mirror_name: str) -> ErrorCode:
            return ErrorCode.coordinator_load_in_progress

    sync = AclSync(1, lambda: ref["image"], admins, MirrorSyncErrors(), store=Loading())
    asyncio.run(sync.run_once())
    assert (dst.created, sync.managed) == ([], {})


def test_topics_to_add_are_included_non_internal_source_topics_the_destination_lacks():
    rules = config(**{"mirror.topics.include": "orders.*,audit"})
    source = ["orders.eu", "orders.us", "audit", "audit2", "__consumer_offsets", "other", "orders.old"]
    assert topics_to_add(rules, source, {"orders.old": None}) == ["audit", "orders.eu", "orders.us"]
    assert topics_to_add(config(), source, set()) == []  # no pattern: nothing joins by itself
    assert topics_to_add(config(**{"mirror.topics.include": ".*"}), ["__mirror_state", "t"], set()) == ["t"]


def test_invalid_topics_include_regex_is_an_invalid_config():
    assert "mirror.topics.include" in config(**{"mirror.topics.include": "a,(b"}).message


def test_matching_source_topics_are_added_once_and_refusals_count():
    src, dst = FakeAdmin(), FakeAdmin()
    src.topic_ids = {"orders.eu": None, "orders.us": None, "a": None, "x": None}
    added: list[tuple[str, list[str]]] = []
    refuse: dict[str, int] = {}

    async def list_topics() -> list[str]:
        return sorted(src.topic_ids or {})

    async def add_topics_to_mirror(name, topics):
        added.append((name, list(topics)))
        return {t: KafkaError(refuse[t]) if t in refuse else None for t in topics}

    src.list_topics = list_topics  # type: ignore[attr-defined]
    dst.add_topics_to_mirror = add_topics_to_mirror  # type: ignore[attr-defined]
    ref = {"image": image({"m": {"mirror.topics.include": "orders\\..*|a"}}, {"a": ("m", 1)})}
    admins, _ = admins_for(ref, src, dst)
    errors = MirrorSyncErrors()
    sync = TopicAutoAdd(1, lambda: ref["image"], admins, errors)
    refuse["orders.us"] = ErrorCode.invalid_replication_factor
    asyncio.run(sync.run_once())
    assert added == [("m", ["orders.eu", "orders.us"])] and errors.topic_config == 1
    ref["image"] = image({"m": {"mirror.topics.include": "orders\\..*|a"}}, {"a": ("m", 1), "orders.eu": ("m", 1)})
    asyncio.run(sync.run_once())
    assert added[-1] == ("m", ["orders.us"]) and errors.topic_config == 2
    # a coordinator of another broker adds nothing
    other = TopicAutoAdd(2, lambda: ref["image"], admins, MirrorSyncErrors())
    asyncio.run(other.run_once())
    assert len(added) == 2
