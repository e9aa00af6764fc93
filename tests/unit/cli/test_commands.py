import argparse
import uuid

import pytest

from kmirror.cli.common import kafka_uuid, parse_key_values
from kmirror.cli.configs import alter_ops, format_describe
from kmirror.cli.console_consumer import RecordFormatter, start_offsets
from kmirror.cli.console_producer import LineParser, chunks
from kmirror.cli.errors import CommandError
from kmirror.cli.main import COMMANDS, build_parser, main
from kmirror.cli.topics import format_description, validate
from kmirror.client.admin import AlterConfigOp, ConfigEntry, ConfigResourceType, TopicDescription
from kmirror.client.consumer import ConsumerRecord
from kmirror.client.metadata import PartitionMetadata
from kmirror.records.record import Record
from kmirror.types import TopicPartition


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def test_topics_create_arguments_follow_kafka_topics() -> None:
    args = parse("topics", "--bootstrap-server", "h:9092", "--create", "--topic", "t", "--partitions", "3",
                 "--replication-factor", "1", "--config", "cleanup.policy=compact", "--config", "retention.ms=5",
                 "--if-not-exists")
    assert (args.topic, args.partitions, args.replication_factor, args.if_not_exists) == ("t", 3, 1, True)
    assert parse_key_values(args.config, "--config") == {"cleanup.policy": "compact", "retention.ms": "5"}


def test_topics_needs_exactly_one_action() -> None:
    with pytest.raises(SystemExit):
        parse("topics", "--bootstrap-server", "h:1", "--list", "--delete")


@pytest.mark.parametrize(
    "argv",
    [
        ("--create",),
        ("--alter", "--topic", "t"),
        ("--create", "--topic", "t", "--partitions", "0"),
    ],
)
def test_topics_validation_errors(argv: tuple[str, ...]) -> None:
    with pytest.raises(CommandError):
        validate(parse("topics", "--bootstrap-server", "h:1", *argv))


def test_validation_error_is_one_line_on_stderr_and_exit_1(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["topics", "--bootstrap-server", "h:1", "--create"]) == 1
    err = capsys.readouterr().err
    assert err == "Error: --topic is required with --create, --alter and --delete\n"


def test_unreachable_broker_is_one_line_error(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["topics", "--bootstrap-server", "127.0.0.1:1", "--list"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: cannot connect to 127.0.0.1:1") and err.count("\n") == 1


def test_describe_output_matches_kafka_topics() -> None:
    tid = uuid.UUID("12345678-1234-5678-1234-567812345678")
    desc = TopicDescription("t", tid, False, (
        PartitionMetadata(0, 1, 0, (1, 2), (1, 2), ()),
        PartitionMetadata(1, -1, 0, (2, 1), (1,), ()),
    ))
    lines = format_description(desc, {"retention.ms": "5"}, {1, 2})
    assert lines == [
        f"Topic: t\tTopicId: {kafka_uuid(tid)}\tPartitionCount: 2\tReplicationFactor: 2\tConfigs: retention.ms=5",
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2",
        "\tTopic: t\tPartition: 1\tLeader: none\tReplicas: 2,1\tIsr: 1",
    ]
    assert format_description(desc, {}, {1, 2}, under_replicated_only=True) == [lines[2]]
    assert format_description(desc, {}, {1, 2}, unavailable_only=True) == [lines[2]]


def test_kafka_uuid_is_url_safe_base64_without_padding() -> None:
    assert kafka_uuid(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert len(kafka_uuid(uuid.uuid4())) == 22


def test_configs_alter_ops() -> None:
    args = parse("configs", "--bootstrap-server", "h:1", "--entity-type", "topics", "--entity-name", "t", "--alter",
                 "--add-config", "a=1,b=2", "--delete-config", "c")
    assert alter_ops(args) == [("a", AlterConfigOp.SET, "1"), ("b", AlterConfigOp.SET, "2"),
                               ("c", AlterConfigOp.DELETE, None)]
    bad = parse("configs", "--bootstrap-server", "h:1", "--entity-type", "topics", "--entity-name", "t", "--alter")
    with pytest.raises(CommandError):
        alter_ops(bad)


def test_configs_describe_format_shows_dynamic_only_unless_all() -> None:
    entries = [
        ConfigEntry("retention.ms", "5", 1, False, False, (("retention.ms", "5", 1), ("log.retention.ms", None, 5))),
        ConfigEntry("cleanup.policy", "delete", 5, False, False),
    ]
    assert format_describe(ConfigResourceType.TOPIC, "t", entries, False) == [
        "Dynamic configs for topic t are:",
        "  retention.ms=5 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=5, "
        "DEFAULT_CONFIG:log.retention.ms=null}",
    ]
    assert len(format_describe(ConfigResourceType.TOPIC, "t", entries, True)) == 3


def test_console_producer_line_parsing() -> None:
    plain = LineParser({})
    assert (plain.parse("a:b").key, plain.parse("a:b").value) == (None, b"a:b")
    keyed = LineParser({"parse.key": "true", "key.separator": ":"})
    assert (keyed.parse("a:b:c").key, keyed.parse("a:b:c").value) == (b"a", b"b:c")
    with pytest.raises(CommandError):
        keyed.parse("nokey")
    nulls = LineParser({"parse.key": "true", "key.separator": ":", "null.marker": "NULL"})
    assert (nulls.parse("NULL:v").key, nulls.parse("k:NULL").value) == (None, None)
    assert list(chunks(["1\n", "2\r\n", "3"], 2)) == [["1", "2"], ["3"]]


def test_console_consumer_formatting() -> None:
    cr = ConsumerRecord(TopicPartition("t", 2), Record(5, 1000, b"k", b"v"), 0)
    assert RecordFormatter({}).format(cr) == "v"
    full = RecordFormatter({"print.key": "true", "print.offset": "true", "print.partition": "true",
                            "print.timestamp": "true"})
    assert full.format(cr) == "CreateTime:1000\tPartition:2\tOffset:5\tk\tv"
    assert RecordFormatter({"print.key": "true"}).format(
        ConsumerRecord(TopicPartition("t", 0), Record(0, 1, None, None), 1)) == "null\tnull"


def test_console_consumer_start_offsets() -> None:
    base = ("console-consumer", "--bootstrap-server", "h:1", "--topic", "t")
    assert start_offsets(parse(*base), [0, 1]) == {TopicPartition("t", 0): "latest", TopicPartition("t", 1): "latest"}
    assert start_offsets(parse(*base, "--from-beginning"), [0]) == {TopicPartition("t", 0): "earliest"}
    assert start_offsets(parse(*base, "--partition", "1", "--offset", "7"), [0, 1]) == {TopicPartition("t", 1): 7}
    with pytest.raises(CommandError):
        start_offsets(parse(*base, "--offset", "7"), [0])
    with pytest.raises(CommandError):
        start_offsets(parse(*base, "--partition", "3"), [0])
    with pytest.raises(CommandError):
        start_offsets(parse(*base, "--partition", "0", "--offset", "x"), [0])


def _commands(parser: argparse.ArgumentParser) -> set[str]:
    return {name for action in parser._subparsers._group_actions for name in action.choices}  # type: ignore[union-attr]


def test_each_command_is_defined_by_the_module_the_table_names() -> None:
    assert _commands(build_parser()) == set(COMMANDS)
    for command, module in COMMANDS.items():
        assert command in _commands(build_parser(command)), (command, module)
    assert _commands(build_parser("topics")) == {"topics"}
    assert _commands(build_parser("--help")) == set(COMMANDS)


@pytest.mark.parametrize("argv", [["--version"], ["mirrors", "--version"], ["topics", "--version"]])
def test_every_tool_displays_the_version_as_kafkas_do(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("kmirror ")
