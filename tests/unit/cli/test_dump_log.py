import struct

import pytest

from kmirror.cli.dump_log import dump_file
from kmirror.cli.errors import CommandError
from kmirror.cli.main import main
from kmirror.records.builder import SimpleRecord, build_batch
from kmirror.records.control import ControlType, build_control_batch
from kmirror.records.mirror_pid_reset import encode_mirror_pid_reset

T0 = 1_700_000_000_000


def segment() -> bytes:
    first = build_batch([SimpleRecord(b"k", b"v", (), T0), SimpleRecord(None, b"vv", (("h", b"1"),), T0 + 1)],
                        base_offset=0, partition_leader_epoch=0)
    second = build_batch([SimpleRecord(b"a", b"b", (), T0 + 5)], base_offset=2, partition_leader_epoch=1,
                         compression=1, producer_id=7, producer_epoch=0, base_sequence=3)
    return first + second


def test_batches_are_printed_like_kafka_dump_log() -> None:
    data = segment()
    lines = list(dump_file("/d/00000000000000000000.log", data, deep=False, print_data=False))
    assert lines[0] == "Dumping /d/00000000000000000000.log"
    assert lines[1] == "Log starting offset: 0"
    assert lines[2].startswith(
        "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 "
        "producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
        f"deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: {T0 + 1} size: "
    )
    assert "magic: 2 compresscodec: none crc: " in lines[2] and lines[2].endswith("isvalid: true")
    first_size = int(lines[2].split(" size: ")[1].split()[0])
    assert f"position: {first_size} " in lines[3]
    assert "producerId: 7" in lines[3] and "baseSequence: 3 lastSequence: 3" in lines[3]
    assert "compresscodec: gzip" in lines[3]
    assert len(lines) == 4


def test_print_data_log_adds_one_line_per_record() -> None:
    lines = list(dump_file("00000000000000000000.log", segment(), deep=True, print_data=True))
    records = [line for line in lines if line.startswith("| ")]
    assert records == [
        f"| offset: 0 CreateTime: {T0} keySize: 1 valueSize: 1 sequence: -1 headerKeys: [] key: k payload: v",
        f"| offset: 1 CreateTime: {T0 + 1} keySize: -1 valueSize: 2 sequence: -1 headerKeys: [h] key: null payload: vv",
        f"| offset: 2 CreateTime: {T0 + 5} keySize: 1 valueSize: 1 sequence: 3 headerKeys: [] key: a payload: b",
    ]


def test_deep_iteration_without_data_omits_key_and_payload() -> None:
    lines = list(dump_file("00000000000000000000.log", segment(), deep=True, print_data=False))
    assert all("payload" not in line for line in lines)
    assert sum(line.startswith("| offset:") for line in lines) == 3


def test_a_mirror_pid_reset_prints_its_version_and_source_cluster_id() -> None:
    # KIP-1279's control record type 7, written at failover; an undecodable one does not stop the dump.
    data = (build_control_batch(ControlType.MIRROR_PID_RESET, -1, -1, 1_700_000_000_000, base_offset=40,
                                value=encode_mirror_pid_reset("lBq12jYZRp-9wF3M9MPopg"))
            + build_control_batch(ControlType.MIRROR_PID_RESET, -1, -1, 1_700_000_000_000, base_offset=41, value=b"\xff"))
    lines = list(dump_file("00000000000000000040.log", data, deep=True, print_data=False))
    records = [line for line in lines if line.startswith("| offset: ")]
    assert records[0].endswith(" controlType: MIRROR_PID_RESET version: 0 sourceClusterId: lBq12jYZRp-9wF3M9MPopg")
    assert records[1].startswith("| offset: 41 ") and "controlType" not in records[1]


def test_corrupted_batch_is_reported_invalid() -> None:
    data = bytearray(segment())
    data[-1] ^= 0xFF
    lines = list(dump_file("00000000000000000000.log", bytes(data), deep=True, print_data=True))
    batches = [line for line in lines if line.startswith("baseOffset")]
    assert batches[0].endswith("isvalid: true") and batches[1].endswith("isvalid: false")
    assert not any(line.startswith("| offset: 2") for line in lines)  # records of a bad batch are not decoded


def test_offset_and_time_index_stop_at_preallocated_tail() -> None:
    index = struct.pack(">ii", 0, 0) + struct.pack(">ii", 5, 4096) + bytes(16)
    assert list(dump_file("00000000000000000100.index", index, False, False))[1:] == [
        "offset: 100 position: 0",
        "offset: 105 position: 4096",
    ]
    timeindex = struct.pack(">qi", T0, 3) + bytes(12)
    assert list(dump_file("00000000000000000100.timeindex", timeindex, False, False))[1:] == [
        f"timestamp: {T0} offset: 103",
    ]


def test_txn_index_prints_each_aborted_transaction() -> None:
    txnindex = struct.pack(">hqqqq", 0, 4001, 100, 104, 103) + struct.pack(">hqqqq", 0, 4002, 105, 107, 108)
    assert list(dump_file("/x/00000000000000000100.txnindex", txnindex, False, False))[1:] == [
        "version: 0 producerId: 4001 firstOffset: 100 lastOffset: 104 lastStableOffset: 103",
        "version: 0 producerId: 4002 firstOffset: 105 lastOffset: 107 lastStableOffset: 108",
    ]


def test_leader_epoch_checkpoint() -> None:
    lines = list(dump_file("/x/leader-epoch-checkpoint", b"0\n2\n0 0\n3 120\n", False, False))
    assert lines[1:] == ["version: 0", "epoch: 0 offset: 0", "epoch: 3 offset: 120"]


def test_unknown_file_kind_is_an_error() -> None:
    with pytest.raises(CommandError):
        list(dump_file("notes.txt", b"", False, False))


def test_cli_reads_files_and_missing_file_is_one_line_error(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(segment())
    assert main(["dump-log", "--files", str(path), "--print-data-log"]) == 0
    out = capsys.readouterr().out
    assert "key: k payload: v" in out
    assert main(["dump-log", "--files", str(tmp_path / "missing.log")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: cannot read") and err.count("\n") == 1
