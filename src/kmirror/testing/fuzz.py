"""A seeded frame fuzzer for a live node: a decodable seed request for every API key and
version a registry serves, and a mutator that corrupts them the ways hostile clients do
(flipped bits, boundary integers over lengths and counts, truncation, splices, lying size
prefixes). A failing run prints its seed; the same seed replays the same frames.

`FrameFuzzer.run` drives a node over several connections: each sends a burst of mutated
frames, reads whatever answers come within a short deadline, then closes (a mutated Fetch
may legitimately wait `max_wait_ms`), so the node sees a constant stream of hostile frames,
disconnects included.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime
import io
import json
import random
import socket
import struct
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.serial._introspect import EntityField, EntityTupleField, classify_field, is_optional

from kmirror.broker.api import build_registry
from kmirror.protocol.registry import ApiRegistry

_INTERESTING_32 = (0, 1, -1, 2, 127, 128, 255, 256, 32767, -32768, 65535, 2**31 - 1, -(2**31), 2**30, 0x7FFFFFFE)
_INTERESTING_16 = (0, 1, -1, 127, 255, 32767, -32768, 0x7FFE)
_INTERESTING_8 = (0, 1, 0x7F, 0x80, 0xFF, 0xFE)
_PRIMITIVES: dict[str, Any] = {
    "int8": 0, "int16": 0, "int32": 0, "int64": 0, "bool": False, "uuid": uuid.UUID(int=0),
    "timedelta_i32": datetime.timedelta(milliseconds=100), "timedelta_i64": datetime.timedelta(milliseconds=100),
    "float64": 0.0,
}


def seed_entity(entity_type: type) -> Any:
    """An instance with every field filled: strings "fuzz", one element per entity array."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(entity_type):
        kind = classify_field(f)
        kafka_type = f.metadata.get("kafka_type")
        if isinstance(kind, EntityTupleField):
            values[f.name] = (seed_entity(kind.type_),)
        elif isinstance(kind, EntityField):
            values[f.name] = seed_entity(kind.type_)
        elif kind.is_array:
            values[f.name] = (_primitive(kafka_type),)
        elif kafka_type == "string":
            values[f.name] = "fuzz"
        elif kafka_type in ("bytes", "records"):
            values[f.name] = None if is_optional(f) else b""
        else:
            values[f.name] = _primitive(kafka_type)
    return entity_type(**values)


def _primitive(kafka_type: str | None) -> Any:
    if kafka_type == "error_code":
        return ErrorCode.none
    if kafka_type == "datetime_i64":
        return datetime.datetime.fromtimestamp(0, datetime.UTC)
    if kafka_type == "string":
        return "fuzz"
    if kafka_type == "bytes":
        return b""
    return _PRIMITIVES.get(kafka_type or "int32", 0)


def seed_frame(request_type: Any, api_key: int, version: int, correlation_id: int = 1) -> bytes:
    """The request payload (header and body, no size prefix) of a seed request."""
    header_type = request_type.__header_schema__
    names = {f.name for f in dataclasses.fields(header_type)}
    header: dict[str, Any] = {"request_api_key": api_key, "request_api_version": version,
                              "correlation_id": correlation_id}
    if "client_id" in names:
        header["client_id"] = "fuzz"
    buf = io.BytesIO()
    entity_writer(header_type)(buf, header_type(**header))
    entity_writer(request_type)(buf, seed_entity(request_type))
    return buf.getvalue()


def seed_corpus(registry: ApiRegistry, advertised: set[int] | None = None) -> dict[tuple[int, int], bytes]:
    """(api key, version) -> seed payload for every version of every served (or `advertised`) key."""
    corpus: dict[tuple[int, int], bytes] = {}
    for spec in registry:
        if advertised is not None and spec.api_key not in advertised:
            continue
        for version in range(spec.min_version, spec.max_version + 1):
            corpus[(spec.api_key, version)] = seed_frame(spec.request_type(version), spec.api_key, version)
    return corpus


def _field_values(entity_type: type, rng: random.Random, kafka_type: str | None) -> Any:
    if kafka_type == "string":
        return rng.choice(("", "fuzz", "__consumer_offsets", "a" * 300, "é", "..", "fuzz-2"))
    if kafka_type in ("int8",):
        return rng.choice((0, 1, -1, 127, -128))
    if kafka_type == "int16":
        return rng.choice(_INTERESTING_16)
    if kafka_type == "int32":
        return rng.choice(_INTERESTING_32)
    if kafka_type == "int64":
        return rng.choice((0, -1, -2, 2**63 - 1, -(2**63), 2**31))
    if kafka_type in ("timedelta_i32",):
        return datetime.timedelta(milliseconds=rng.choice((0, 1, 100, -1, 30_000)))
    if kafka_type in ("timedelta_i64",):
        return datetime.timedelta(milliseconds=rng.choice((0, 1, -1, 2**40)))
    if kafka_type == "bool":
        return rng.random() < 0.5
    return None


def mutate_entity(entity: Any, rng: random.Random, rate: float = 0.3) -> Any:
    """A copy of `entity` with some fields set to boundary values, arrays emptied or
    repeated (still encodable: the node's decoder accepts it, its handler must cope)."""
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        kind = classify_field(f)
        if isinstance(kind, EntityTupleField) and value:
            if rng.random() < rate / 3:
                changes[f.name] = () if rng.random() < 0.5 else tuple(value) * rng.randint(2, 20)
            else:
                changes[f.name] = tuple(mutate_entity(v, rng, rate) for v in value)
        elif isinstance(kind, EntityField) and value is not None:
            changes[f.name] = mutate_entity(value, rng, rate)
        elif not kind.is_array and rng.random() < rate:
            new = _field_values(type(entity), rng, f.metadata.get("kafka_type"))
            if new is not None:
                changes[f.name] = new
    return dataclasses.replace(entity, **changes) if changes else entity


class Mutator:
    """Seeded mutations of a payload; the header's api key and version survive most of them,
    so every API's decoder and handler is reached."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def mutate_request(self, request_type: Any, api_key: int, version: int) -> bytes:
        """A structurally valid request with hostile values, size-prefixed."""
        header_type = request_type.__header_schema__
        names = {f.name for f in dataclasses.fields(header_type)}
        header: dict[str, Any] = {"request_api_key": api_key, "request_api_version": version,
                                  "correlation_id": self.rng.randrange(2**31)}
        if "client_id" in names:
            header["client_id"] = "fuzz"
        buf = io.BytesIO()
        entity_writer(header_type)(buf, header_type(**header))
        try:
            entity_writer(request_type)(buf, mutate_entity(seed_entity(request_type), self.rng))
        except (ValueError, TypeError, OverflowError):  # a value the field's type cannot encode
            return b""
        return struct.pack(">i", buf.tell()) + buf.getvalue()

    def mutate(self, payload: bytes) -> bytes:
        rng = self.rng
        data = bytearray(payload)
        for _ in range(rng.choice((1, 1, 1, 2, 3, 5))):
            data = self._one(data)
        size = len(data)
        if rng.random() < 0.02:  # a size prefix that lies
            size = rng.choice((size + rng.randint(1, 64), max(0, size - rng.randint(1, 8))))
        return struct.pack(">i", size) + bytes(data)

    def _one(self, data: bytearray) -> bytearray:
        rng = self.rng
        start = 8 if len(data) > 8 and rng.random() < 0.9 else 0  # keep api key, version, correlation id
        if len(data) <= start:
            return data + bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        pos = rng.randrange(start, len(data))
        op = rng.randrange(8)
        if op == 0:
            data[pos] ^= 1 << rng.randrange(8)
        elif op == 1:
            data[pos] = rng.choice(_INTERESTING_8)
        elif op == 2 and pos + 2 <= len(data):
            struct.pack_into(">h", data, pos, rng.choice(_INTERESTING_16))
        elif op == 3 and pos + 4 <= len(data):
            struct.pack_into(">i", data, pos, rng.choice(_INTERESTING_32))
        elif op == 4:
            del data[pos:]
        elif op == 5:
            end = min(len(data), pos + rng.randint(1, 16))
            data[pos:pos] = data[pos:end] * rng.randint(1, 4)
        elif op == 6:
            data[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        else:
            del data[pos:pos + rng.randint(1, 8)]
        return data


@dataclass
class FuzzStats:
    frames: int = 0
    answered: int = 0
    connections: int = 0
    refused: bool = False  # the node stopped accepting connections (it died): the run ended
    api_keys: set[int] = field(default_factory=set)
    key_versions: set[tuple[int, int]] = field(default_factory=set)


class FrameFuzzer:
    """Half the frames are byte-level mutations of the seeds (decoder paths), half are
    structurally valid requests with hostile values (handler paths)."""

    def __init__(self, corpus: dict[tuple[int, int], bytes], seed: int, registry: ApiRegistry) -> None:
        self.corpus = sorted(corpus.items())
        self.seed = seed
        self.registry = registry
        self.stats = FuzzStats()

    async def run(self, host: str, port: int, frames: int, connections: int = 8, burst: int = 8,
                  answer_timeout_s: float = 0.5) -> FuzzStats:
        per_task = frames // connections
        progress = asyncio.get_running_loop().create_task(self._progress())
        try:
            await asyncio.gather(*(self._connection_loop(host, port, per_task, burst, answer_timeout_s,
                                                         Mutator(self.seed * 1000 + i))
                                   for i in range(connections)))
        finally:
            progress.cancel()
        return self.stats

    async def _progress(self, every_s: float = 60) -> None:
        while True:
            await asyncio.sleep(every_s)
            print(f"fuzz: {self.stats.frames} frames, {self.stats.answered} answered", flush=True)

    async def _connection_loop(self, host: str, port: int, frames: int, burst: int, answer_timeout_s: float,
                               mutator: Mutator) -> None:
        sent = 0
        while sent < frames and not self.stats.refused:
            n = min(burst, frames - sent)
            batch = []
            for _ in range(n):
                (api_key, version), payload = mutator.rng.choice(self.corpus)
                self.stats.api_keys.add(api_key)
                self.stats.key_versions.add((api_key, version))
                frame = b""
                if mutator.rng.random() < 0.5:
                    spec = self.registry.get(api_key)
                    assert spec is not None
                    frame = mutator.mutate_request(spec.request_type(version), api_key, version)
                batch.append(frame or mutator.mutate(payload))
            await self._burst(host, port, batch, answer_timeout_s)
            sent += n
            self.stats.frames += n

    async def _burst(self, host: str, port: int, batch: list[bytes], answer_timeout_s: float) -> None:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except ConnectionRefusedError:
            self.stats.refused = True
            return
        self.stats.connections += 1
        try:
            writer.write(b"".join(batch))
            try:
                await writer.drain()
                while True:
                    head = await asyncio.wait_for(reader.readexactly(4), answer_timeout_s)
                    (size,) = struct.unpack(">i", head)
                    await asyncio.wait_for(reader.readexactly(size), answer_timeout_s)
                    self.stats.answered += 1
            except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
                pass
        finally:
            writer.close()
            try:
                await writer.wait_closed()
            except ConnectionError:
                pass


def advertised_api_keys(host: str, port: int) -> set[int]:
    """The API keys a node advertises in ApiVersions v0."""
    request = struct.pack(">hhih", 18, 0, 1, -1)
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        head = sock.recv(4, socket.MSG_WAITALL)
        (size,) = struct.unpack(">i", head)
        body = sock.recv(size, socket.MSG_WAITALL)
    (_, error, count) = struct.unpack_from(">ihi", body, 0)
    assert error == 0
    return {struct.unpack_from(">hhh", body, 10 + 6 * i)[0] for i in range(count)}


def fuzz_in_process(host: str, port: int, frames: int, seed: int, plane: str = "broker") -> FuzzStats:
    """Run a `FrameFuzzer` over every API key and version `host:port` advertises; run it in a
    process of its own (`python -m kmirror.testing.fuzz`) so that its CPU does not weigh on the
    clients measuring the node beside it."""
    registry = build_registry(plane=plane)
    corpus = seed_corpus(registry, advertised_api_keys(host, port))
    return asyncio.run(FrameFuzzer(corpus, seed, registry).run(host, port, frames))


def main() -> None:
    parser = argparse.ArgumentParser(description="Seeded frame fuzzing of a live node; prints its stats as JSON.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--frames", type=int, default=20_000)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--plane", choices=("broker", "controller"), default="broker",
                        help="the listener's APIs: a broker's or a controller's")
    args = parser.parse_args()
    started = time.monotonic()
    stats = fuzz_in_process(args.host, args.port, args.frames, args.seed, args.plane)
    print(json.dumps({"frames": stats.frames, "answered": stats.answered, "connections": stats.connections,
                      "refused": stats.refused, "api_keys": sorted(stats.api_keys),
                      "key_versions": sorted(stats.key_versions), "seconds": round(time.monotonic() - started, 1)}))


if __name__ == "__main__":
    main()
