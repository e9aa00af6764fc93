"""`kmirror dump-log`: kafka-dump-log.sh for segment (.log), offset index (.index), time index
(.timeindex), transaction index (.txnindex), metadata snapshot (.checkpoint) and
`leader-epoch-checkpoint` files. A local tool: it reads the files directly.

Formatting is separate from reading (`dump_segment(name, data, ...)` -> lines) so it is tested
on bytes built with `kmirror.records.builder`.

Record decoders, as kafka-dump-log's (each implies `--print-data-log`): `--offsets-decoder`
for `__consumer_offsets`, `--transaction-log-decoder` for `__transaction_state`,
`--mirror-state-decoder` for KIP-1279's `__mirror_state` and `--cluster-metadata-decoder` for
`__cluster_metadata` segments and snapshots (`{"type":"TOPIC_RECORD","version":0,"data":{...}}`,
as Kafka's metadata parser prints them). They
print key and payload as Kafka's JSON converters do: `{"type":"2","data":{...}}` and
`{"version":"0","data":{...}}` with camelCase field names, a tombstone as `<DELETE>`, and
tagged fields left out at their default.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import json
import os
import re
import struct
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from kmirror.cli.common import kafka_uuid
from kmirror.cli.errors import CommandError
from kmirror.coordinator.consumer_group import records as consumer_group_records
from kmirror.coordinator.group.group import OffsetAndMetadata
from kmirror.coordinator.offsets import records as offsets_records
from kmirror.coordinator.transaction import records as transaction_records
from kmirror.kip1279 import state_records
from kmirror.log.transaction_index import ENTRY as TXN_ENTRY
from kmirror.metadata import records as metadata_records
from kmirror.records.batch import BatchHeader, CorruptRecordError, crc_ok, iter_batches
from kmirror.records.compression import CompressionType
from kmirror.records.control import parse_control_key, parse_end_txn_marker
from kmirror.records.mirror_pid_reset import decode_mirror_pid_reset
from kmirror.records.record import decode_records


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("dump-log", help="decode log segment and index files (kafka-dump-log.sh)")
    p.add_argument("--files", nargs="+", required=True, metavar="FILE")
    p.add_argument("--print-data-log", action="store_true", help="print keys and values (implies --deep-iteration)")
    p.add_argument("--deep-iteration", action="store_true", help="print every record, not only batches")
    decoders = p.add_mutually_exclusive_group()
    decoders.add_argument("--offsets-decoder", action="store_true",
                          help="decode records as __consumer_offsets keys and values")
    decoders.add_argument("--transaction-log-decoder", action="store_true",
                          help="decode records as __transaction_state keys and values")
    decoders.add_argument("--mirror-state-decoder", action="store_true",
                          help="decode records as __mirror_state keys and values (cluster mirroring)")
    decoders.add_argument("--cluster-metadata-decoder", action="store_true",
                          help="decode records as __cluster_metadata records (log segments and .checkpoint snapshots)")
    p.set_defaults(func=run)


# A record decoder: (key, value) -> (key text, payload text).
RecordDecoder = Callable[[bytes | None, bytes | None], tuple[str, str]]


def run(args: argparse.Namespace) -> int:
    decoder: RecordDecoder | None = None
    if args.offsets_decoder:
        decoder = decode_offsets_record
    elif args.transaction_log_decoder:
        decoder = decode_transaction_log_record
    elif args.mirror_state_decoder:
        decoder = decode_mirror_state_record
    elif args.cluster_metadata_decoder:
        decoder = decode_cluster_metadata_record
    print_data = args.print_data_log or decoder is not None
    for path in args.files:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from None
        for line in dump_file(path, data, args.deep_iteration or print_data, print_data, decoder):
            print(line)
    return 0


def base_offset_of(path: str) -> int:
    stem = os.path.basename(path).split(".", 1)[0]
    if not stem.isdigit():
        raise CommandError(f"{path}: segment file names are the base offset, e.g. 00000000000000000000.log")
    return int(stem)


def dump_file(
    path: str, data: bytes, deep: bool, print_data: bool, decoder: RecordDecoder | None = None
) -> Iterator[str]:
    yield f"Dumping {path}"
    name = os.path.basename(path)
    if name == "leader-epoch-checkpoint":
        yield from dump_epoch_checkpoint(data)
    elif name.endswith(".log"):
        yield f"Log starting offset: {base_offset_of(path)}"
        yield from dump_segment(data, deep, print_data, decoder)
    elif name.endswith(".checkpoint"):
        end_offset, _, epoch = name.removesuffix(".checkpoint").partition("-")
        if not (end_offset.isdigit() and epoch.isdigit()):
            raise CommandError(f"{path}: snapshot file names are <end offset>-<epoch>.checkpoint")
        yield f"Snapshot end offset: {int(end_offset)}, epoch: {int(epoch)}"
        yield from dump_segment(data, deep, print_data, decoder)
    elif name.endswith(".timeindex"):
        yield from dump_time_index(base_offset_of(path), data)
    elif name.endswith(".index"):
        yield from dump_offset_index(base_offset_of(path), data)
    elif name.endswith(".txnindex"):
        base_offset_of(path)
        yield from dump_txn_index(data)
    else:
        raise CommandError(
            f"{path}: not a .log, .index, .timeindex, .txnindex, .checkpoint or leader-epoch-checkpoint file")


def batch_line(pos: int, h: BatchHeader, valid: bool) -> str:
    kind = "LogAppendTime" if h.timestamp_type == 1 else "CreateTime"
    return (
        f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
        f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} producerId: {h.producer_id} "
        f"producerEpoch: {h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch} "
        f"isTransactional: {str(h.is_transactional).lower()} isControl: {str(h.is_control).lower()} "
        f"deleteHorizonMs: {_delete_horizon(h)} position: {pos} {kind}: {h.max_timestamp} size: {h.size} "
        f"magic: {h.magic} compresscodec: {_codec(h.compression)} crc: {h.crc & 0xFFFFFFFF} "
        f"isvalid: {str(valid).lower()}"
    )


def _delete_horizon(h: BatchHeader) -> str:
    return f"OptionalLong[{h.base_timestamp}]" if h.has_delete_horizon else "OptionalLong.empty"


def _codec(codec: int) -> str:
    try:
        return CompressionType(codec).kafka_name
    except ValueError:
        return f"unknown({codec})"


def dump_segment(data: bytes, deep: bool, print_data: bool, decoder: RecordDecoder | None = None) -> Iterator[str]:
    try:
        for pos, h in iter_batches(data, allow_truncated_tail=True):
            valid = crc_ok(data, pos, h)
            yield batch_line(pos, h, valid)
            if deep and valid:
                yield from _record_lines(data, pos, h, print_data, decoder)
    except CorruptRecordError as exc:
        yield f"Found invalid data: {exc}"


def _record_lines(
    data: bytes, pos: int, h: BatchHeader, print_data: bool, decoder: RecordDecoder | None
) -> Iterator[str]:
    kind = "LogAppendTime" if h.timestamp_type == 1 else "CreateTime"
    for r in decode_records(data, pos):
        sequence = -1 if h.base_sequence < 0 else h.base_sequence + (r.offset - h.base_offset)
        key_size = -1 if r.key is None else len(r.key)
        value_size = -1 if r.value is None else len(r.value)
        header_keys = ",".join(k for k, _ in r.headers)
        line = (
            f"| offset: {r.offset} {kind}: {r.timestamp} keySize: {key_size} valueSize: {value_size} "
            f"sequence: {sequence} headerKeys: [{header_keys}]"
        )
        if h.is_control:
            try:
                control = parse_control_key(r.key)
                line += f" {_control_text(control.name, r.value)}"
            except Exception:  # unknown control record: printed without decoding
                pass
        elif print_data and decoder is not None:
            key_text, payload_text = decoder(r.key, r.value)
            line += f" key: {key_text} payload: {payload_text}"
        elif print_data:
            line += f" key: {_text(r.key)} payload: {_text(r.value)}"
        yield line


def _control_text(name: str, value: bytes | None) -> str:
    if name in ("ABORT", "COMMIT"):
        return f"endTxnMarker: {name} coordinatorEpoch: {parse_end_txn_marker(value)}"
    if name == "MIRROR_PID_RESET":  # KIP-1279: the version and the source cluster id it was fenced for
        reset = decode_mirror_pid_reset(value)
        return f"controlType: {name} version: {reset.version} sourceClusterId: {reset.source_cluster_id}"
    return f"controlType: {name}"


def _text(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", errors="replace")


_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


def dump_offset_index(base_offset: int, data: bytes) -> Iterator[str]:
    """`offset: N position: P` per entry; a preallocated (zero) tail ends the index."""
    for i in range(len(data) // _OFFSET_ENTRY.size):
        relative, position = _OFFSET_ENTRY.unpack_from(data, i * _OFFSET_ENTRY.size)
        if i > 0 and relative == 0 and position == 0:
            break
        yield f"offset: {base_offset + relative} position: {position}"


def dump_time_index(base_offset: int, data: bytes) -> Iterator[str]:
    for i in range(len(data) // _TIME_ENTRY.size):
        timestamp, relative = _TIME_ENTRY.unpack_from(data, i * _TIME_ENTRY.size)
        if i > 0 and timestamp == 0 and relative == 0:
            break
        yield f"timestamp: {timestamp} offset: {base_offset + relative}"


def dump_txn_index(data: bytes) -> Iterator[str]:
    """One line per aborted transaction, as kafka-dump-log's `dumpTxnIndex`."""
    for i in range(len(data) // TXN_ENTRY.size):
        version, producer_id, first, last, lso = TXN_ENTRY.unpack_from(data, i * TXN_ENTRY.size)
        yield (f"version: {version} producerId: {producer_id} firstOffset: {first} "
               f"lastOffset: {last} lastStableOffset: {lso}")


def dump_epoch_checkpoint(data: bytes) -> Iterator[str]:
    """Kafka's checkpoint text: version line, count line, then `epoch start_offset` lines."""
    lines = data.decode("utf-8", errors="replace").splitlines()
    if len(lines) < 2:
        raise CommandError("leader-epoch-checkpoint: missing version or entry count")
    yield f"version: {lines[0].strip()}"
    for line in lines[2:]:
        parts = line.split()
        if len(parts) != 2:
            raise CommandError(f"leader-epoch-checkpoint: malformed entry '{line}'")
        yield f"epoch: {parts[0]} offset: {parts[1]}"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def entity_json(entity: Any) -> Any:
    """A dataclass (kio-style entity or record) as Kafka's JSON converters print it."""
    if dataclasses.is_dataclass(entity) and not isinstance(entity, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(entity):
            value = getattr(entity, f.name)
            if "tag" in f.metadata and value == f.default:
                continue
            out[_camel(f.name)] = entity_json(value)
        return out
    if isinstance(entity, tuple) and hasattr(entity, "_asdict"):  # a NamedTuple (a broker endpoint)
        return {_camel(k): entity_json(v) for k, v in entity._asdict().items()}
    if isinstance(entity, tuple | list):
        return [entity_json(v) for v in entity]
    if isinstance(entity, uuid.UUID):
        return kafka_uuid(entity)
    if isinstance(entity, bytes):
        return base64.b64encode(entity).decode()
    return entity


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _typed(kind: str, number: int, data: Any) -> str:
    return _json({kind: str(number), "data": entity_json(data)})


def _int16_prefix(data: bytes | None) -> int:
    return -1 if data is None or len(data) < 2 else int.from_bytes(data[:2], "big", signed=True)


def decode_mirror_state_record(key: bytes | None, value: bytes | None) -> tuple[str, str]:
    if key is None:
        return "null", "<unparseable: a __mirror_state record has no key>"
    try:
        decoded_key = state_records.decode_key(key)
        record_type = state_records.record_type(key)
        key_text = _typed("type", record_type, decoded_key)
    except state_records.MirrorStateRecordError as exc:
        return f"<unparseable: {exc}>", _text_or_delete(value)
    try:
        decoded_value = state_records.decode_value(record_type, value)
    except state_records.MirrorStateRecordError as exc:
        return key_text, f"<unparseable: {exc}>"
    if decoded_value is None:
        return key_text, "<DELETE>"
    data = entity_json(decoded_value)
    if isinstance(decoded_value, state_records.MirrorPartitionStateValue):
        data["state"] = _state_name(decoded_value.state)
    return key_text, _json({"version": str(_int16_prefix(value)), "data": data})


def _state_name(code: int) -> str:
    """The KIP's state name of a stored code; the number itself when no state has it."""
    try:
        return state_records.MirrorPartitionState(code).name
    except ValueError:
        return str(code)


def decode_cluster_metadata_record(key: bytes | None, value: bytes | None) -> tuple[str, str]:
    """A metadata record as Kafka's `MetadataRecordSerde` JSON: type name, version, data."""
    if value is None:
        return _text(key), "<DELETE>"
    try:
        record = metadata_records.decode(value)
    except metadata_records.CorruptMetadataRecordError as exc:
        return _text(key), f"<unparseable: {exc}>"
    type_name = re.sub(r"(?<!^)(?=[A-Z])", "_", type(record).__name__).upper()
    return _text(key), _json({"type": type_name, "version": record.VERSION, "data": entity_json(record)})


def decode_offsets_record(key: bytes | None, value: bytes | None) -> tuple[str, str]:
    if key is None:
        return "null", "<unparseable: a __consumer_offsets record has no key>"
    try:
        decoded_key = offsets_records.decode_key(key)
    except Exception as exc:  # the reader raises struct/index errors on corrupt bytes
        return f"<unparseable: {exc}>", _text_or_delete(value)
    record_type = _int16_prefix(key)
    if decoded_key is None:
        return _decode_consumer_group_record(record_type, key, value)
    key_text = _typed("type", record_type, decoded_key)
    if value is None:
        return key_text, "<DELETE>"
    try:
        decoded_value: Any
        if isinstance(decoded_key, offsets_records.OffsetCommitKey):
            decoded_value = offsets_records.decode_offset_commit_value(value)
        else:
            decoded_value = offsets_records.decode_group_metadata_value(value)
    except Exception as exc:
        return key_text, f"<unparseable: {exc}>"
    data = entity_json(decoded_value)
    if isinstance(decoded_value, OffsetAndMetadata) and decoded_value.expire_timestamp_ms is None:
        del data["expireTimestampMs"]  # only value v1 has one
    return key_text, _json({"version": str(_int16_prefix(value)), "data": data})


def decode_transaction_log_record(key: bytes | None, value: bytes | None) -> tuple[str, str]:
    """Kafka's TransactionLogKey/Value JSON: the value's tagged fields only when not default."""
    if key is None:
        return "null", "<unparseable: a __transaction_state record has no key>"
    try:
        transactional_id = transaction_records.parse_key(key)
    except Exception as exc:  # struct/unicode errors and unknown versions on corrupt bytes
        return f"<unparseable: {exc}>", _text_or_delete(value)
    key_text = _json({"type": str(_int16_prefix(key)), "data": {"transactionalId": transactional_id}})
    if value is None:
        return key_text, "<DELETE>"
    try:
        v = transaction_records.parse_value(value)
    except Exception as exc:
        return key_text, f"<unparseable: {exc}>"
    data: dict[str, Any] = {
        "producerId": v.producer_id, "producerEpoch": v.producer_epoch, "transactionTimeoutMs": v.transaction_timeout_ms,
        "transactionStatus": int(v.state),
        "transactionPartitions": [{"topic": t, "partitionIds": list(ids)} for t, ids in v.partitions],
        "transactionLastUpdateTimestampMs": v.last_update_timestamp_ms,
        "transactionStartTimestampMs": v.start_timestamp_ms,
    }
    for name, field_value, default in (("previousProducerId", v.previous_producer_id, -1),
                                       ("nextProducerId", v.next_producer_id, -1),
                                       ("clientTransactionVersion", v.client_transaction_version, 0)):
        if field_value != default:
            data[name] = field_value
    return key_text, _json({"version": str(_int16_prefix(value)), "data": data})


def _decode_consumer_group_record(record_type: int, key: bytes, value: bytes | None) -> tuple[str, str]:
    """KIP-848 consumer group records (types 3, 5, 6, 7, 8); other types are named unknown."""
    try:
        cg_key = consumer_group_records.decode_key(key)
    except Exception as exc:  # struct/unicode errors on corrupt bytes
        return f"<unparseable: {exc}>", _text_or_delete(value)
    if cg_key is None:
        return f"<unknown record type {record_type}>", _text_or_delete(value)
    key_data = {"groupId": cg_key.group_id}
    if cg_key.member_id is not None:
        key_data["memberId"] = cg_key.member_id
    key_text = _json({"type": str(record_type), "data": key_data})
    if value is None:
        return key_text, "<DELETE>"
    try:
        fields = consumer_group_records.value_fields(cg_key, value)
    except Exception as exc:
        return key_text, f"<unparseable: {exc}>"
    return key_text, _json({"version": str(_int16_prefix(value)), "data": _plain(fields)})


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return entity_json(value)


def _text_or_delete(value: bytes | None) -> str:
    return "<DELETE>" if value is None else f"<{len(value)} bytes>"
