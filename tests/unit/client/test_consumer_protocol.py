import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kmirror.client.errors import KafkaProtocolError
from kmirror.client.groups import assigned_partitions
from kmirror.protocol.consumer_protocol import encode_assignment
from kmirror.types import TopicPartition


def test_an_assignment_with_user_data_of_a_newer_version_is_read_as_the_highest_known() -> None:
    data = (struct.pack(">hi", 7, 2) + struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 0, 3)
            + struct.pack(">h", 2) + b"bb" + struct.pack(">ii", 1, 1) + struct.pack(">i", 3) + b"xyz")
    assert assigned_partitions(data) == {TopicPartition("a", 0), TopicPartition("a", 3), TopicPartition("bb", 1)}


def test_an_empty_assignment_has_no_partitions() -> None:
    assert assigned_partitions(b"") == frozenset()


@pytest.mark.parametrize("data", [b"\x00", struct.pack(">hi", 0, 1), struct.pack(">hi", 0, 9999),
                                  struct.pack(">hi", -1, 0), struct.pack(">hih", 0, 1, 5) + b"ab"])
def test_bytes_that_are_not_an_assignment_are_a_protocol_error(data: bytes) -> None:
    with pytest.raises(KafkaProtocolError):
        assigned_partitions(data)


@given(st.dictionaries(st.text(min_size=1, max_size=8), st.sets(st.integers(0, 1000), max_size=5), max_size=4),
       st.integers(0, 3))
def test_what_the_coordinator_encodes_is_read_back(partitions: dict[str, set[int]], version: int) -> None:
    expected = {TopicPartition(t, p) for t, ps in partitions.items() for p in ps}
    assert assigned_partitions(encode_assignment(partitions, version)) == expected
