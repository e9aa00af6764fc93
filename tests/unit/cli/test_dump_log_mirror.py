"""`kmirror dump-log --mirror-state-decoder` / `--offsets-decoder` / `--transaction-log-decoder` /
`--cluster-metadata-decoder` on batches built in memory or by the metadata log store."""

import uuid
from pathlib import Path

import pytest

from kmirror.cli.common import kafka_uuid
from kmirror.cli.dump_log import (
    decode_mirror_state_record,
    decode_offsets_record,
    decode_transaction_log_record,
    dump_file,
)
from kmirror.cli.main import main
from kmirror.coordinator.group.group import OffsetAndMetadata
from kmirror.coordinator.offsets import records as offsets
from kmirror.coordinator.transaction import records as txn
from kmirror.coordinator.transaction.state import TransactionState
from kmirror.kip1279 import state_records as sr
from kmirror.metadata.image import EMPTY_IMAGE
from kmirror.metadata.records import (
    BrokerEndpoint,
    ClusterIdRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    encode,
)
from kmirror.metadata.snapshot import snapshot_records
from kmirror.records.builder import SimpleRecord, build_batch
from kmirror.runtime.metadata_log import FileMetadataLogStore

T0 = 1_771_239_071_191
TOPIC_ID = uuid.UUID("94dd1c7e-1d4d-4a5c-8a60-5f4b1f0f7a01")


def state_record(state: int, lme: int = -1) -> tuple[bytes, bytes | None]:
    key = sr.encode_key(sr.MirrorPartitionStateKey(mirror_name="my-mirror", topic_id=TOPIC_ID, partition=0))  # type: ignore[arg-type]
    value = sr.encode_value(sr.MirrorPartitionStateValue(topic_name="my-topic", partition=0, state=state,  # type: ignore[arg-type]
                                                         last_mirror_epoch=lme))  # type: ignore[arg-type]
    return key, value


def mirror_state_segment() -> bytes:
    batches = b""
    lme_key = sr.encode_key(sr.LastMirrorEpochsKey(mirror_name="my-mirror"))
    lme_value = sr.encode_value(sr.LastMirrorEpochsValue(topics=(sr.LastMirrorEpochsTopic(
        name="my-topic", partitions=(sr.LastMirrorEpochsPartition(partition_index=0, last_mirror_epoch=4),)),)))  # type: ignore[arg-type]
    records = [state_record(0), state_record(1, lme=4), (lme_key, lme_value), (state_record(0)[0], None)]
    for offset, (key, value) in enumerate(records):
        batches += build_batch([SimpleRecord(key, value, (), T0 + offset)], base_offset=offset, partition_leader_epoch=0)
    return batches


def test_mirror_state_records_print_as_kafka_json() -> None:
    lines = list(dump_file("/d/__mirror_state-0/00000000000000000000.log", mirror_state_segment(), deep=True,
                           print_data=True, decoder=decode_mirror_state_record))
    records = [line for line in lines if line.startswith("| ")]
    key = ('{"type":"2","data":{"mirrorName":"my-mirror","topicId":"' + kafka_uuid(TOPIC_ID)
           + '","partition":0}}')
    assert records[0].endswith(
        f"key: {key} payload: " + '{"version":"0","data":{"topicName":"my-topic","partition":0,"state":"PREPARING"}}')
    assert records[0].startswith(f"| offset: 0 CreateTime: {T0} keySize: ")
    assert records[1].endswith(
        'payload: {"version":"0","data":{"topicName":"my-topic","partition":0,"state":"MIRRORING","lastMirrorEpoch":4}}')
    assert records[2].endswith(
        'key: {"type":"1","data":{"mirrorName":"my-mirror"}} payload: {"version":"0","data":{"topics":'
        '[{"name":"my-topic","partitions":[{"partitionIndex":0,"lastMirrorEpoch":4}]}]}}')
    assert records[3].endswith(f"key: {key} payload: <DELETE>")


def test_undecodable_mirror_state_records_do_not_stop_the_dump() -> None:
    assert decode_mirror_state_record(b"\x00\x09abc", b"x") == (
        "<unparseable: unknown __mirror_state record type 9>", "<1 bytes>")
    key, _ = state_record(0)
    key_text, payload = decode_mirror_state_record(key, b"\x00\x07zz")
    assert key_text.startswith('{"type":"2"') and payload.startswith("<unparseable: unsupported")
    assert decode_mirror_state_record(None, b"")[0] == "null"


def test_offsets_decoder() -> None:
    key = offsets.encode_offset_commit_key(offsets.OffsetCommitKey("g", "t", 3))
    value = offsets.encode_offset_commit_value(OffsetAndMetadata(42, 5, "", T0))
    assert decode_offsets_record(key, value) == (
        '{"type":"1","data":{"group":"g","topic":"t","partition":3}}',
        '{"version":"3","data":{"offset":42,"leaderEpoch":5,"metadata":"","commitTimestampMs":' + str(T0) + "}}",
    )
    value = offsets.encode_offset_commit_value(OffsetAndMetadata(42, -1, "", T0, T0 + 5000))
    assert decode_offsets_record(key, value)[1] == (
        '{"version":"1","data":{"offset":42,"leaderEpoch":-1,"metadata":"","commitTimestampMs":' + str(T0)
        + ',"expireTimestampMs":' + str(T0 + 5000) + "}}")
    group_key = offsets.encode_group_metadata_key(offsets.GroupMetadataKey("g"))
    assert decode_offsets_record(group_key, None) == ('{"type":"2","data":{"group":"g"}}', "<DELETE>")
    assert decode_offsets_record(b"\x00\x0b", b"") == ("<unknown record type 11>", "<0 bytes>")


def test_transaction_log_decoder() -> None:
    key = txn.key_bytes("tx-1")
    value = txn.value_bytes(txn.TransactionLogValue(7, 2, 60_000, TransactionState.ONGOING, (("t", (0, 3)),),
                                                    T0 + 10, T0))
    assert decode_transaction_log_record(key, value) == (
        '{"type":"0","data":{"transactionalId":"tx-1"}}',
        '{"version":"0","data":{"producerId":7,"producerEpoch":2,"transactionTimeoutMs":60000,'
        '"transactionStatus":1,"transactionPartitions":[{"topic":"t","partitionIds":[0,3]}],'
        f'"transactionLastUpdateTimestampMs":{T0 + 10},"transactionStartTimestampMs":{T0}}}}}')
    assert decode_transaction_log_record(key, None) == ('{"type":"0","data":{"transactionalId":"tx-1"}}', "<DELETE>")
    assert decode_transaction_log_record(b"\x00\x05zz", b"x")[0].startswith("<unparseable: ")


def test_command_line_decoder_implies_print_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(mirror_state_segment())
    assert main(["dump-log", "--mirror-state-decoder", "--files", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == [f"Dumping {path}", "Log starting offset: 0"]
    assert sum(line.startswith("baseOffset: ") for line in out) == 4
    assert sum('"mirrorName":"my-mirror"' in line for line in out) == 4
    with pytest.raises(SystemExit):
        main(["dump-log", "--mirror-state-decoder", "--offsets-decoder", "--files", str(path)])


def test_cluster_metadata_decoder_prints_a_snapshot_and_the_log_after_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = FileMetadataLogStore(tmp_path, now_ms=lambda: T0)
    store.load()
    image = EMPTY_IMAGE.apply([ClusterIdRecord("c1"), TopicRecord("orders", TOPIC_ID),
                               PartitionRecord(0, TOPIC_ID, (1, 2), (1, 2), 1, 3, 5)], 2)
    store.append([encode(r) for r in snapshot_records(image)])
    store.write_snapshot(3, [encode(r) for r in snapshot_records(image)])
    store.append([encode(RegisterBrokerRecord(1, TOPIC_ID, 7, (BrokerEndpoint("PLAINTEXT", "h", 9092),)))])
    directory = tmp_path / "__cluster_metadata-0"
    assert main(["dump-log", "--cluster-metadata-decoder", "--files", str(directory / "00000000000000000003-0000000000.checkpoint"),
                 str(directory / "00000000000000000003.log")]) == 0
    out = capsys.readouterr().out
    assert "Snapshot end offset: 3, epoch: 0" in out and "Log starting offset: 3" in out
    assert (f'payload: {{"type":"PARTITION_RECORD","version":2,"data":{{"partitionId":0,"topicId":"{kafka_uuid(TOPIC_ID)}",'
            '"replicas":[1,2],"isr":[1,2],"leader":1,"leaderEpoch":3,"partitionEpoch":5,"removingReplicas":[],'
            '"addingReplicas":[],"directories":[]}}') in out
    assert '"type":"CLUSTER_ID_RECORD"' in out
    assert ('"type":"REGISTER_BROKER_RECORD","version":4,"data":{"brokerId":1,' in out
            and '"endpoints":[{"name":"PLAINTEXT","host":"h","port":9092,"securityProtocol":0}]' in out)
