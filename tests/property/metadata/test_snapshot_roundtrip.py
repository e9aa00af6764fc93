"""A snapshot of any image rebuilds that image, and the log after it replays onto both alike."""

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kmirror.metadata import records as r
from kmirror.metadata.image import EMPTY_IMAGE, MetadataImage
from kmirror.metadata.snapshot import snapshot_records

names = st.text(alphabet="abcxyz-._", min_size=1, max_size=6)
small = st.integers(0, 5)
replica_lists = st.lists(st.integers(0, 5), max_size=4, unique=True).map(tuple)
keys = st.sampled_from(["retention.ms", "cleanup.policy", "mirror.name", "min.insync.replicas"])


@st.composite
def record_logs(draw: st.DrawFn) -> list[list[r.Record]]:
    """Batches of records that apply: each step picks an operation valid on the state so far."""
    topics: dict[uuid.UUID, tuple[str, set[int]]] = {}
    brokers: dict[int, int] = {}
    acls: set[uuid.UUID] = set()
    scram: set[tuple[str, int]] = set()
    next_pid = 0
    batches: list[list[r.Record]] = [[r.ClusterIdRecord(draw(names))]]
    for _ in range(draw(st.integers(0, 40))):
        batch: list[r.Record] = []
        op = draw(st.integers(0, 14))
        if op == 0:
            name = draw(names)
            if name not in {n for n, _ in topics.values()}:
                topic_id = uuid.UUID(int=draw(st.integers(1, 2**64)))
                if topic_id not in topics:
                    topics[topic_id] = (name, set())
                    batch.append(r.TopicRecord(name, topic_id))
        elif op == 1 and topics:
            topic_id = draw(st.sampled_from(sorted(topics)))
            part = draw(small)
            topics[topic_id][1].add(part)
            batch.append(r.PartitionRecord(part, topic_id, draw(replica_lists), draw(replica_lists), draw(small),
                                           draw(small), draw(small), draw(replica_lists), draw(replica_lists)))
        elif op == 2 and any(parts for _, parts in topics.values()):
            topic_id = draw(st.sampled_from(sorted(t for t, (_, parts) in topics.items() if parts)))
            part = draw(st.sampled_from(sorted(topics[topic_id][1])))
            batch.append(r.PartitionChangeRecord(part, topic_id, draw(st.none() | replica_lists),
                                                 draw(st.integers(-2, 5)), draw(st.none() | replica_lists),
                                                 draw(st.none() | replica_lists), draw(st.none() | replica_lists)))
        elif op == 3 and topics:
            topic_id = draw(st.sampled_from(sorted(topics)))
            del topics[topic_id]
            batch.append(r.RemoveTopicRecord(topic_id))
        elif op == 4:
            resource_type = draw(st.sampled_from([2, 4, 16, 32]))
            resource = draw(st.sampled_from([n for n, _ in topics.values()])) if resource_type == 2 and topics \
                else draw(names)
            batch.append(r.ConfigRecord(resource_type, resource, draw(keys), draw(st.none() | names)))
        elif op == 5:
            batch.append(r.FeatureLevelRecord(draw(st.sampled_from(["metadata.version", "mirror.version"])),
                                              draw(st.integers(0, 3))))
        elif op == 6:
            broker = draw(small)
            brokers[broker] = epoch = draw(st.integers(0, 100))
            batch.append(r.RegisterBrokerRecord(broker, uuid.UUID(int=epoch + 7), epoch,
                                                (r.BrokerEndpoint("PLAINTEXT", "h", 9000 + broker),),
                                                draw(st.none() | names), draw(st.booleans())))
        elif op == 7 and brokers:
            broker = draw(st.sampled_from(sorted(brokers)))
            cls = draw(st.sampled_from([r.FenceBrokerRecord, r.UnfenceBrokerRecord]))
            batch.append(cls(broker, brokers[broker]))
        elif op == 8 and brokers:
            broker = draw(st.sampled_from(sorted(brokers)))
            batch.append(r.BrokerRegistrationChangeRecord(broker, brokers[broker], draw(st.integers(0, 1))))
        elif op == 9 and brokers:
            broker = draw(st.sampled_from(sorted(brokers)))
            batch.append(r.UnregisterBrokerRecord(broker, brokers.pop(broker)))
        elif op == 10:
            acl_id = uuid.UUID(int=draw(st.integers(1, 2**64)))
            acls.add(acl_id)
            batch.append(r.AccessControlEntryRecord(acl_id, draw(st.integers(2, 7)), draw(names), 3,
                                                    "User:" + draw(names), "*", draw(st.integers(2, 14)), 3))
        elif op == 11 and acls:
            acl_id = draw(st.sampled_from(sorted(acls)))
            acls.discard(acl_id)
            batch.append(r.RemoveAccessControlEntryRecord(acl_id))
        elif op == 12:
            key = (draw(names), draw(st.integers(1, 2)))
            if key in scram and draw(st.booleans()):
                scram.discard(key)
                batch.append(r.RemoveUserScramCredentialRecord(*key))
            else:
                scram.add(key)
                batch.append(r.UserScramCredentialRecord(*key, draw(st.binary(max_size=8)), b"s", b"k", 4096))
        elif op == 13:
            entity = tuple(sorted(draw(st.dictionaries(st.sampled_from(["user", "client-id"]), st.none() | names,
                                                       min_size=1)).items()))
            batch.append(r.ClientQuotaRecord(entity, draw(st.sampled_from(["producer_byte_rate",
                                                                           "consumer_byte_rate"])),
                                             float(draw(st.integers(1, 10**6))), draw(st.booleans())))
        elif op == 14:
            next_pid += draw(st.integers(0, 2000))
            batch.append(r.ProducerIdsRecord(draw(st.sampled_from([-1, 0, 1])), 1, next_pid))
        if batch:
            batches.append(batch)
    return batches


def replay(batches: list[list[r.Record]], image: MetadataImage = EMPTY_IMAGE) -> MetadataImage:
    for batch in batches:
        image = image.apply(batch, image.offset + len(batch))
    return image


@settings(max_examples=300, deadline=None)
@given(record_logs(), st.integers(0, 40))
def test_a_snapshot_rebuilds_its_image_and_the_log_after_it_replays_alike(batches: list[list[r.Record]],
                                                                           cut: int) -> None:
    before, after = batches[:cut], batches[cut:]
    image = replay(before)
    records = [r.decode(r.encode(record)) for record in snapshot_records(image)]
    rebuilt = EMPTY_IMAGE.apply(records, image.offset)
    assert rebuilt == image
    assert replay(after, rebuilt) == replay(after, image)


def test_an_empty_image_has_an_empty_snapshot() -> None:
    assert snapshot_records(EMPTY_IMAGE) == []
