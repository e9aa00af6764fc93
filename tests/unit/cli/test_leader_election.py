import argparse
from pathlib import Path

import pytest

from kmirror.cli.errors import CommandError
from kmirror.cli.leader_election import format_results, parse_partitions_json, partitions_from_args
from kmirror.cli.main import build_parser, main
from kmirror.client.admin import ElectionType
from kmirror.client.errors import KafkaError
from kmirror.types import TopicPartition


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["leader-election", "--bootstrap-server", "h:1", *argv])


def test_election_type_is_case_insensitive_and_validated() -> None:
    assert parse("--election-type", "preferred", "--all-topic-partitions").election_type is ElectionType.PREFERRED
    assert parse("--election-type", "UNCLEAN", "--all-topic-partitions").election_type is ElectionType.UNCLEAN
    with pytest.raises(SystemExit):
        parse("--election-type", "dirty", "--all-topic-partitions")


def test_topic_and_partition() -> None:
    args = parse("--election-type", "PREFERRED", "--topic", "t", "--partition", "3")
    assert partitions_from_args(args) == [TopicPartition("t", 3)]
    assert partitions_from_args(parse("--election-type", "PREFERRED", "--all-topic-partitions")) is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ((), "exactly one of"),
        (("--topic", "t", "--partition", "0", "--all-topic-partitions"), "exactly one of"),
        (("--topic", "t"), "--partition is required with --topic"),
        (("--partition", "1", "--all-topic-partitions"), "--partition requires --topic"),
        (("--path-to-json-file", "/nonexistent/election.json"), "cannot read /nonexistent/election.json"),
    ],
)
def test_invalid_argument_combinations(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        partitions_from_args(parse("--election-type", "PREFERRED", *argv))


def test_json_file(tmp_path: Path) -> None:
    f = tmp_path / "e.json"
    f.write_text('{"partitions": [{"topic": "b", "partition": 1}, {"topic": "a", "partition": 0}]}')
    args = parse("--election-type", "PREFERRED", "--path-to-json-file", str(f))
    assert partitions_from_args(args) == [TopicPartition("b", 1), TopicPartition("a", 0)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"partitions": [{"topic": "a", "partition": 0}, {"topic": "a", "partition": 0}]}',
         "Replica election data contains duplicate partitions: a-0"),
        ('{"partitions": []}', "lists no partitions"),
        ('{"topics": []}', "invalid election JSON"),
        ("not json", "invalid election JSON"),
        ('{"partitions": [{"topic": "a"}]}', "invalid election JSON"),
    ],
)
def test_bad_json(text: str, message: str) -> None:
    with pytest.raises(CommandError, match=message):
        parse_partitions_json(text)


def test_output_follows_kafka_leader_election() -> None:
    results = {
        TopicPartition("t", 1): None,
        TopicPartition("t", 0): None,
        TopicPartition("u", 0): KafkaError(84, "Leader election not needed for topic partition", "u-0"),
        TopicPartition("v", 2): KafkaError(80, "The preferred leader was not available.", "v-2"),
    }
    assert format_results(ElectionType.PREFERRED, results) == [
        "Successfully completed leader election (PREFERRED) for partitions t-0, t-1",
        "Valid replica already elected for partitions u-0",
        "Error completing leader election (PREFERRED) for partition: v-2: "
        "PREFERRED_LEADER_NOT_AVAILABLE: The preferred leader was not available.",
    ]
    assert format_results(ElectionType.UNCLEAN, {TopicPartition("t", 0): None}) == [
        "Successfully completed leader election (UNCLEAN) for partitions t-0"
    ]
    assert format_results(ElectionType.UNCLEAN, {}) == []


def test_argument_error_is_one_line_and_exit_1(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["leader-election", "--bootstrap-server", "h:1", "--election-type", "PREFERRED"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: exactly one of") and err.count("\n") == 1
