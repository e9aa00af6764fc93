"""kafka-reassign-partitions.sh's JSON formats, throttle lists and status lines."""

import json

import pytest

from kmirror.cli.errors import CommandError
from kmirror.cli.reassign_partitions import (
    format_assignment,
    list_lines,
    log_dir_lines,
    parse_reassignment,
    parse_reassignment_and_log_dirs,
    parse_topics_to_move,
    throttled_replicas,
    verify_lines,
)
from kmirror.cli.topics import format_description
from kmirror.client.admin import TopicDescription
from kmirror.client.metadata import PartitionMetadata
from kmirror.client.reassignments import PartitionReassignment
from kmirror.types import TopicPartition as TP


def test_reassignment_json_round_trips_in_kafkas_format() -> None:
    text = ('{"version":1,"partitions":[{"topic":"t","partition":1,"replicas":[3,4],"log_dirs":["any","any"]},'
            '{"topic":"t","partition":0,"replicas":[4,3]}]}')
    parsed = parse_reassignment(text)
    assert parsed == {TP("t", 1): (3, 4), TP("t", 0): (4, 3)}
    out = json.loads(format_assignment(parsed))
    assert out["version"] == 1 and out["partitions"][0] == {
        "topic": "t", "partition": 0, "replicas": [4, 3], "log_dirs": ["any", "any"]}


@pytest.mark.parametrize("text", [
    '{"partitions": []}',
    '{"partitions": [{"topic": "t", "partition": 0, "replicas": []}]}',
    '{"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]}',
    '{"partitions": [{"topic": "t", "partition": 0, "replicas": [1]}, {"topic": "t", "partition": 0, "replicas": [2]}]}',
    '{"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["/d"]}]}',
    'not json',
])
def test_bad_reassignment_json_is_refused(text: str) -> None:
    with pytest.raises(CommandError):
        parse_reassignment(text)


def test_topics_to_move() -> None:
    assert parse_topics_to_move('{"topics": [{"topic": "a"}, {"topic": "b"}], "version": 1}') == ["a", "b"]
    with pytest.raises(CommandError):
        parse_topics_to_move('{"topics": [{"topic": "a"}, {"topic": "a"}]}')


def test_throttles_name_current_replicas_as_leaders_and_moving_ones_as_followers() -> None:
    current = {TP("t", 0): (1, 2), TP("t", 1): (2, 3), TP("u", 0): (1,)}
    target = {TP("t", 0): (3, 4), TP("t", 1): (2, 4), TP("u", 0): (1,)}
    assert throttled_replicas(current, target) == {"t": ("0:1,0:2,1:2,1:3", "0:3,0:4,1:4")}


def test_verify_and_list_lines() -> None:
    target = {TP("t", 0): (3, 4), TP("t", 1): (2, 4), TP("t", 2): (1, 2)}
    current = {TP("t", 0): (3, 4), TP("t", 1): (2, 4, 3), TP("t", 2): (1, 3)}
    ongoing = {TP("t", 1): PartitionReassignment((2, 4, 3), (4,), (3,))}
    lines, done = verify_lines(target, current, ongoing)
    assert not done and lines[1:] == [
        "Reassignment of partition t-0 is completed.",
        "Reassignment of partition t-1 is still in progress.",
        "There is no active reassignment of partition t-2, but replica set is 1,3 rather than 1,2.",
    ]
    assert list_lines(ongoing) == ["Current partition reassignments:", "t-1: replicas: 2,4,3. adding: 4. removing: 3."]
    assert list_lines({}) == ["No partition reassignments found."]
    assert verify_lines({TP("t", 0): (3, 4)}, current, {})[1]


def test_topics_describe_shows_a_partition_being_reassigned() -> None:
    desc = TopicDescription("t", None, False, (PartitionMetadata(0, 1, 0, (3, 4, 1, 2), (1, 2, 3), ()),
                                               PartitionMetadata(1, 2, 0, (2, 1), (2, 1), ())))
    moving = {0: PartitionReassignment((3, 4, 1, 2), (3, 4), (1, 2))}
    lines = format_description(desc, {}, {1, 2, 3, 4}, reassignments=moving)
    assert "ReplicationFactor: 2" in lines[0]
    assert lines[1].endswith("Replicas: 3,4,1,2\tIsr: 1,2,3\tAdding Replicas: 3,4\tRemoving Replicas: 1,2")
    assert lines[2].endswith("Replicas: 2,1\tIsr: 2,1")
    # not under-replicated: the ISR covers the target's two replicas
    assert format_description(desc, {}, {1, 2, 3, 4}, under_replicated_only=True, reassignments=moving) == []


def test_log_dirs_of_the_reassignment_and_their_verify_lines() -> None:
    target, log_dirs = parse_reassignment_and_log_dirs(
        '{"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["/d2", "any"]},'
        '{"topic": "t", "partition": 1, "replicas": [2, 3], "log_dirs": ["/d1", "/d2"]}]}')
    assert target == {TP("t", 0): (1, 2), TP("t", 1): (2, 3)}
    assert log_dirs == {(TP("t", 0), 1): "/d2", (TP("t", 1), 2): "/d1", (TP("t", 1), 3): "/d2"}
    where = {(TP("t", 0), 1): ("/d2", None), (TP("t", 1), 2): ("/d2", "/d1"), (TP("t", 1), 3): ("/d1", None)}
    lines, done = log_dir_lines(log_dirs, where)
    assert not done and lines[1:] == [
        "Reassignment of replica t-0-1 completed successfully.",
        "Reassignment of replica t-1-2 is still in progress.",
        "Partition t-1 on broker 3 is not being moved from log dir /d1 to /d2.",
    ]
    assert log_dir_lines({(TP("t", 0), 1): "/d2"}, where)[1]
