"""Hypothesis fuzzing of the decoders a hostile client reaches: request frames of every
served API key and version (the KIP-1279 RPCs and Fetch v19 included), record batches, and
produce validation. Each must answer with its documented failure (MalformedRequest,
CorruptRecordError/InvalidRecordError, InvalidRecords) and nothing else, in bounded memory."""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kmirror.broker.api import build_registry
from kmirror.protocol.codec import DecodedRequest, MalformedRequest, UnsupportedRequest, decode_request
from kmirror.protocol.mirror.registry import MIRROR_APIS
from kmirror.records.batch import CorruptRecordError, iter_batches
from kmirror.records.builder import build_batch
from kmirror.records.record import InvalidRecordError, decode_records
from kmirror.records.validation import InvalidRecords, ValidatedRecords, validate_for_append
from kmirror.testing.fuzz import Mutator, seed_corpus

REGISTRIES = {plane: build_registry(plane=plane) for plane in ("broker", "controller")}
CORPUS = {plane: sorted(seed_corpus(r).items()) for plane, r in REGISTRIES.items()}
KIP_KEYS = sorted(k for k in MIRROR_APIS if k in REGISTRIES["broker"])
FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _decode(plane: str, frame: bytes) -> None:
    try:
        result = decode_request(REGISTRIES[plane], frame)
    except MalformedRequest:
        return
    assert isinstance(result, DecodedRequest | UnsupportedRequest)


@FUZZ
@given(plane=st.sampled_from(sorted(REGISTRIES)), index=st.integers(min_value=0), seed=st.integers(0, 2**32))
def test_mutated_seed_requests_decode_or_are_malformed(plane: str, index: int, seed: int) -> None:
    corpus = CORPUS[plane]
    _, payload = corpus[index % len(corpus)]
    frame = Mutator(seed).mutate(payload)[4:]
    _decode(plane, frame)


@FUZZ
@given(key=st.sampled_from(KIP_KEYS), body=st.binary(max_size=512))
def test_kip_rpcs_with_random_bodies(key: int, body: bytes) -> None:
    # request header v2: key, version 0, correlation id, client id "f", no tagged fields
    _decode("broker", struct.pack(">hhih", key, 0, 1, 1) + b"f" + b"\x00" + body)


@FUZZ
@given(version=st.sampled_from([12, 16, 17, 18, 19]), body=st.binary(max_size=512))
def test_fetch_with_random_bodies(version: int, body: bytes) -> None:
    flexible = version >= 12
    header = struct.pack(">hhih", 1, version, 1, 1) + b"f" + (b"\x00" if flexible else b"")
    _decode("broker", header + body)


GOOD = build_batch([(b"k", b"v" * 100, (), 1_700_000_000_000)] * 3, compression=4)


@FUZZ
@given(data=st.one_of(st.binary(max_size=2048), st.builds(lambda s: Mutator(s).mutate(GOOD)[4:],
                                                           st.integers(0, 2**32))))
def test_record_decoders_fail_only_as_documented(data: bytes) -> None:
    try:
        for _ in iter_batches(data, allow_truncated_tail=True):
            pass
    except CorruptRecordError:
        pass
    try:
        decode_records(data)
    except (CorruptRecordError, InvalidRecordError):
        pass
    outcome = validate_for_append(data, max_message_bytes=1_048_588, now_ms=1_700_000_000_000,
                                  compacted=True, timestamp_before_max_ms=10**12)
    assert isinstance(outcome, InvalidRecords | ValidatedRecords)
