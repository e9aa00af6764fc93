import argparse
import datetime

import pytest

from kmirror.cli import consumer_groups_output as out
from kmirror.cli.consumer_groups import is_consumer_group, parse_states, parse_types, validate
from kmirror.cli.consumer_groups_output import PartitionAssignmentState
from kmirror.cli.errors import CommandError
from kmirror.cli.group_offsets_reset import clamp, parse_datetime, parse_duration, parse_topic_partitions
from kmirror.cli.main import build_parser
from kmirror.client.groups import ConsumerGroupDescription, ListedGroup, MemberDescription
from kmirror.client.metadata import BrokerMetadata
from kmirror.types import TopicPartition

TP = TopicPartition
COORDINATOR = BrokerMetadata(1, "127.0.0.1", 9092)


def parse(*argv: str) -> argparse.Namespace:
    return build_parser("consumer-groups").parse_args(["consumer-groups", "--bootstrap-server", "h:1", *argv])


# --topic T:P,... (Kafka's parseTopicsWithPartitions)

def test_a_topic_with_partitions_names_those_partitions() -> None:
    assert parse_topic_partitions("orders:0,2") == [TP("orders", 0), TP("orders", 2)]


@pytest.mark.parametrize(("arg", "message"), [
    ("orders:", "Invalid partition '' specified in topic arg 'orders:'"),
    ("orders:0,x", "Invalid partition 'x' specified in topic arg 'orders:0,x'"),
    ("a:0:1", "Invalid topic arg 'a:0:1', expected topic name and partitions"),
    (":0", "Invalid topic arg ':0', expected topic name and partitions"),
])
def test_a_malformed_topic_arg_is_an_error(arg: str, message: str) -> None:
    with pytest.raises(CommandError, match=f"^{message}$"):
        parse_topic_partitions(arg)


# --by-duration (Java's Duration.parse)

@pytest.mark.parametrize(("text", "expected"), [
    ("PT1H", datetime.timedelta(hours=1)),
    ("P1DT2H30M", datetime.timedelta(days=1, hours=2, minutes=30)),
    ("pt15m", datetime.timedelta(minutes=15)),
    ("P2D", datetime.timedelta(days=2)),
    ("PT0.5S", datetime.timedelta(milliseconds=500)),
    ("PT-1.5S", datetime.timedelta(seconds=-1.5)),
    ("-PT6H", datetime.timedelta(hours=-6)),
    ("PT1H-10M", datetime.timedelta(minutes=50)),
])
def test_durations_are_read_as_java_reads_them(text: str, expected: datetime.timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["P", "PT", "1H", "P1H", "PT1D", "P1DT", "PTH", "one hour"])
def test_a_text_that_is_no_duration_is_an_error(text: str) -> None:
    with pytest.raises(CommandError, match="Text cannot be parsed to a Duration"):
        parse_duration(text)


# --to-datetime (Kafka's Utils.getDateTime)

def test_a_datetime_without_a_zone_is_utc() -> None:
    assert parse_datetime("2024-03-01T12:00:00.250") == 1709294400250
    assert parse_datetime("2024-03-01T12:00:00Z") == 1709294400000


def test_a_datetime_with_an_offset_is_read_in_it() -> None:
    assert parse_datetime("2024-03-01T14:00:00.000+02:00") == 1709294400000


def test_a_datetime_without_t_is_an_error() -> None:
    with pytest.raises(CommandError, match="does not contain a 'T'"):
        parse_datetime("2024-03-01 12:00:00")


def test_an_unparseable_datetime_is_an_error() -> None:
    with pytest.raises(CommandError, match="Unparseable date"):
        parse_datetime("2024-13-01T12:00:00")


# offsets outside the log (Kafka's checkOffsetsRange)

def test_offsets_outside_the_log_move_to_its_start_or_end_with_a_warning() -> None:
    warnings: list[str] = []
    got = clamp({TP("t", 0): 50, TP("t", 1): 1, TP("t", 2): 4, TP("t", 3): 7},
                {TP("t", 0): 0, TP("t", 1): 3, TP("t", 2): 3, TP("t", 3): None},
                {TP("t", 0): 10, TP("t", 1): 10, TP("t", 2): 10, TP("t", 3): None}, warnings.append)
    assert got == {TP("t", 0): 10, TP("t", 1): 3, TP("t", 2): 4, TP("t", 3): 7}
    assert warnings == [
        "New offset (50) is higher than latest offset for topic partition t-0. Value will be set to 10.",
        "New offset (1) is lower than earliest offset for topic partition t-1. Value will be set to 3.",
    ]


# tables

def test_the_offsets_table_has_kafkas_columns_and_dashes_for_what_is_unknown() -> None:
    rows = [
        PartitionAssignmentState("g", "orders", 0, 4, 10, "consumer-1-0123456789abcdef", "/127.0.0.1", "c1", 3),
        PartitionAssignmentState("g", "orders", 1, None, 10),
        PartitionAssignmentState("g", "gone", 0, 5, None),
    ]
    assert out.offsets_table(rows) == [
        "",
        "GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             "
        "CONSUMER-ID                 HOST            CLIENT-ID",
        "g               orders          0          4               10              6               "
        "consumer-1-0123456789abcdef /127.0.0.1      c1",
        "g               orders          1          -               10              -               "
        "-                           -               -",
        "g               gone            0          5               -               -               "
        "-                           -               -",
    ]
    verbose = out.offsets_table(rows[:1], verbose=True)
    assert verbose[1].split() == ["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "CURRENT-OFFSET", "LOG-END-OFFSET",
                                  "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    assert verbose[2].split()[3] == "3"


def test_an_assignment_string_sorts_topics_and_partitions() -> None:
    assert out.assignment_string([TP("b", 2), TP("a", 1), TP("b", 0)]) == "a:1;b:0,2"
    assert out.assignment_string([]) == "-"


def _member(member_id: str, assignment: set[TopicPartition], **kw: object) -> MemberDescription:
    return MemberDescription(member_id, kw.pop("instance", None), "client", "/10.0.0.1", frozenset(assignment),
                             **kw)  # type: ignore[arg-type]


def test_the_members_table_of_a_classic_group() -> None:
    d = ConsumerGroupDescription("g", False, (_member("m1", {TP("t", 0), TP("t", 1)}),), "range", "classic", "Stable",
                                 COORDINATOR)
    assert out.members_table(d) == [
        "",
        "GROUP           CONSUMER-ID     HOST            CLIENT-ID       #PARTITIONS",
        "g               m1              /10.0.0.1       client          2",
    ]
    verbose = out.members_table(d, verbose=True)
    assert verbose[1].split()[-4:] == ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
    assert verbose[2].split()[-4:] == ["-", "t:0,1", "-", "-"]


def test_the_members_table_shows_instance_ids_and_upgraded_while_a_group_migrates() -> None:
    members = (
        _member("m1", {TP("t", 0)}, instance="i-1", target_assignment=frozenset({TP("t", 0)}), member_epoch=4,
                upgraded=True),
        _member("m2", {TP("t", 1)}, target_assignment=frozenset({TP("t", 1), TP("t", 2)}), member_epoch=3,
                upgraded=False),
    )
    d = ConsumerGroupDescription("g", False, members, "uniform", "consumer", "Reconciling", COORDINATOR, 5, 5)
    lines = out.members_table(d, verbose=True)
    assert lines[1].split() == ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
                                "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT", "UPGRADED"]
    assert lines[2].split() == ["g", "m1", "i-1", "/10.0.0.1", "client", "1", "4", "t:0", "5", "t:0", "true"]
    assert lines[3].split() == ["g", "m2", "/10.0.0.1", "client", "1", "3", "t:1", "5", "t:1,2", "false"]
    assert lines[3].index("/10.0.0.1") == lines[2].index("/10.0.0.1")  # an empty instance id keeps its column


def test_the_state_table() -> None:
    d = ConsumerGroupDescription("g", False, (), "", "classic", "Empty", COORDINATOR)
    assert out.state_table(d) == [
        "",
        "GROUP           COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE                #MEMBERS",
        "g               127.0.0.1:9092  (1)       -                    Empty                0",
    ]
    verbose = out.state_table(ConsumerGroupDescription("g", False, (), "uniform", "consumer", "Stable", COORDINATOR,
                                                       7, 6), verbose=True)
    assert verbose[2].split() == ["g", "127.0.0.1:9092", "(1)", "uniform", "Stable", "7", "6", "0"]


def test_the_list_table_pads_the_group_column_ten_past_the_longest_id() -> None:
    groups = [ListedGroup("a-rather-long-group-id", "consumer", "Stable", "consumer"), ListedGroup("b", "", "Empty")]
    # 22 characters + 10 = 32, then a space; TYPE and STATE 20 wide
    assert out.list_table(groups, include_type=True, include_state=True) == [
        "GROUP" + " " * 28 + "TYPE" + " " * 17 + "STATE",
        "a-rather-long-group-id" + " " * 11 + "Consumer" + " " * 13 + "Stable",
        "b" + " " * 32 + "Unknown" + " " * 14 + "Empty",
    ]
    assert out.list_table(groups[1:], include_type=False, include_state=True)[1] == "b                         Empty"


def test_the_reset_table_is_sorted() -> None:
    assert out.reset_table({"g": {TP("t", 1): 7, TP("t", 0): 3}}) == [
        "",
        "GROUP           TOPIC           PARTITION  NEW-OFFSET",
        "g               t               0          3",
        "g               t               1          7",
    ]


def test_the_delete_offsets_table_shows_a_topic_that_was_not_found_with_a_dash() -> None:
    assert out.delete_offsets_table({TP("t", 0): None, TP("x", -1): "UNKNOWN_TOPIC_OR_PARTITION"}) == [
        "",
        "TOPIC           PARTITION  STATUS",
        "t               0          Successful",
        "x               -          Error: UNKNOWN_TOPIC_OR_PARTITION",
    ]


@pytest.mark.parametrize(("state", "rows", "expected"), [
    ("Dead", 0, ("Consumer group 'g' does not exist.", None, False)),
    ("Empty", 2, (None, "Consumer group 'g' has no active members.", True)),
    ("Empty", 0, (None, "Consumer group 'g' has no active members.", False)),
    ("PreparingRebalance", 1, (None, "Warning: Consumer group 'g' is rebalancing.", True)),
    ("Reconciling", 1, (None, "Warning: Consumer group 'g' is rebalancing.", True)),
    ("Stable", 3, (None, None, True)),
])
def test_kafkas_messages_for_a_groups_state(state: str, rows: int, expected: tuple[object, ...]) -> None:
    assert out.group_state_message("g", state, rows) == expected


# options (Kafka's ConsumerGroupCommandOptions.checkArgs)

@pytest.mark.parametrize(("argv", "message"), [
    (("--describe",), "Option --describe takes one of these options: --all-groups, --group"),
    (("--describe", "--group", "g", "--members", "--state"), "takes at most one of these options"),
    (("--describe", "--group", "g", "--state", "stable"), "Option --describe does not take a value for --state"),
    (("--describe", "--group", "g", "--all-groups"), "\"--group\" can't be used with option \"--all-groups\""),
    (("--list", "--members"), "may only be used with --describe"),
    (("--delete", "--group", "g", "--topic", "t"), "does not support topic-specific offset deletion"),
    (("--delete-offsets", "--group", "g"), "Option --delete-offsets takes the following options"),
    (("--reset-offsets", "--group", "g", "--topic", "t"), "requires one of the following scenarios"),
    (("--reset-offsets", "--group", "g", "--to-earliest"), "One of the reset scopes should be defined"),
    (("--list", "--to-earliest"), "may only be used with --reset-offsets"),
])
def test_invalid_option_combinations_are_refused(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        validate(parse(*argv))


def test_a_reset_takes_one_scenario_and_one_mode() -> None:
    with pytest.raises(SystemExit):
        parse("--reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--to-latest")
    with pytest.raises(SystemExit):
        parse("--reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--dry-run", "--execute")
    validate(parse("--reset-offsets", "--group", "g", "--group", "h", "--topic", "t:0", "--shift-by", "-2"))


def test_list_filters_are_kafkas_states_and_types() -> None:
    assert parse_states("stable,EMPTY, preparingrebalance") == ["Stable", "Empty", "PreparingRebalance"]
    with pytest.raises(CommandError, match="Invalid state list 'stable,busy'. Valid states are: PreparingRebalance"):
        parse_states("stable,busy")
    assert parse_types("Classic,consumer") == ["classic", "consumer"]
    with pytest.raises(CommandError, match="Invalid types list 'share'"):
        parse_types("share")


def test_only_consumer_groups_are_listed() -> None:
    assert is_consumer_group(ListedGroup("a", "consumer", "Stable", "classic"))
    assert is_consumer_group(ListedGroup("b", "", "Empty", "classic"))
    assert is_consumer_group(ListedGroup("c", "consumer", "Stable", "consumer"))
    assert not is_consumer_group(ListedGroup("d", "connect", "Stable", "classic"))
    assert not is_consumer_group(ListedGroup("e", "share", "Stable", "share"))
