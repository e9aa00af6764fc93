"""`kmirror mirrors`: option rules, topic resolution, KIP tables, results, against fakes."""

import asyncio
from pathlib import Path
from typing import Any

import pytest

from kmirror.cli import command_config
from kmirror.cli import mirrors as cli
from kmirror.cli.errors import CommandError
from kmirror.cli.main import build_parser, main
from kmirror.client.errors import KafkaError
from kmirror.client.mirrors import ListedMirror, MirrorPartitionDescription


def parse(*argv: str) -> Any:
    return build_parser().parse_args(["mirrors", "--bootstrap-server", ":9094", *argv])


def test_kip_command_lines_parse_and_validate() -> None:
    cases = {
        ("--create", "--mirror", "my-mirror", "--mirror-config", "/tmp/m.properties"): "create",
        ("--add", "--topic", "my-topic", "--mirror", "my-mirror"): "add",
        ("--add", "--topic", ".*", "--mirror", "m", "--replication-factor", "3"): "add",
        ("--remove", "--topic", ".*"): "remove",
        ("--remove", "--topic", "my-topic", "--mirror", "my-mirror"): "remove",
        ("--pause", "--topic", "my-topic", "--mirror", "my-mirror"): "pause",
        ("--resume", "--topic", "my-topic", "--mirror", "my-mirror"): "resume",
        ("--delete", "--mirror", "my-mirror"): "delete",
        ("--list",): "list",
        ("--describe",): "describe",
        ("--describe", "--mirror", "m", "--topic", "f.*"): "describe",
        ("--describe", "--state", "failed,Paused"): "describe",
        ("--alter", "--mirror", "m", "--mirror-config", "f"): "alter",
    }
    for argv, action in cases.items():
        assert cli.validate(parse(*argv)) == action, argv


@pytest.mark.parametrize("argv,message", [
    (("--create", "--mirror", "m"), "--create requires --mirror-config"),
    (("--add", "--topic", "t"), "--add requires --mirror"),
    (("--remove",), "--remove requires --topic"),
    (("--delete",), "--delete requires --mirror"),
    (("--list", "--topic", "t"), "--topic does not apply to --list"),
    (("--describe", "--replication-factor", "2"), "--replication-factor applies to --add only"),
    (("--add", "--mirror", "m", "--topic", "t", "--replication-factor", "0"), "at least 1"),
    (("--add", "--mirror", "m", "--topic", "t", "--mirror-config", "f"), "--mirror-config applies to"),
    (("--remove", "--topic", "a[("), "not a valid regex"),
    (("--describe", "--state", "MIRRORING,RUNNING"), "'MIRRORING,RUNNING': not a partition state"),
    (("--describe", "--state", ","), "not a partition state"),
    (("--list", "--state", "FAILED"), "--state applies to --describe only"),
])
def test_invalid_combinations(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        cli.validate(parse(*argv))


def test_two_actions_are_rejected_by_the_parser() -> None:
    with pytest.raises(SystemExit):
        parse("--list", "--describe")


def test_topic_resolution() -> None:
    topics = ["my.topic", "myXtopic", "test-1", "test-2", "other"]
    assert cli.resolve_topics("test-.*", topics) == ["test-1", "test-2"]
    assert cli.resolve_topics(".*", topics) == sorted(topics)
    assert cli.resolve_topics("my.topic", topics) == ["my.topic"]  # a name, not a wildcard
    assert cli.resolve_topics("my.topik", topics) == ["my.topik"]  # unknown name: the broker answers
    assert cli.resolve_topics("nothing-.*", topics) == []
    assert cli.resolve_topics("test", topics) == ["test"]  # full match, not search


def test_member_topic_selection_by_state() -> None:
    membership = {
        "m": {"a": {"MIRRORING"}, "b": {"STOPPED"}, "c": {"PAUSED", "PAUSING"}, "d": {"MIRRORING", "STOPPING"}},
        "n": {"x": {"PREPARING"}},
    }
    assert cli.select_member_topics("remove", ".*", None, membership) == {"m": ["a", "c", "d"], "n": ["x"]}
    assert cli.select_member_topics("remove", ".*", "m", membership) == {"m": ["a", "c", "d"]}
    assert cli.select_member_topics("pause", ".*", None, membership) == {"m": ["a", "d"], "n": ["x"]}
    assert cli.select_member_topics("resume", ".*", None, membership) == {"m": ["c"]}
    # a literal name goes to the mirrors holding it, or to the named mirror regardless of state
    assert cli.select_member_topics("remove", "b", None, membership) == {"m": ["b"]}
    assert cli.select_member_topics("pause", "zz", "m", membership) == {"m": ["zz"]}
    assert cli.select_member_topics("pause", "zz", None, membership) == {}


def test_list_table_is_the_kips() -> None:
    lines = cli.format_list([
        ListedMirror("my-mirror", "localhost:9091,localhost:9092", "lBq12jYZRp-9wF3M9MPopg", 2),
        ListedMirror("new-mirror", "localhost:9091,localhost:9092", "lBq12jYZRp-9wF3M9MPopg", 1),
        ListedMirror("empty", "s:1", "", 0),
    ])
    assert lines == [
        "MIRROR     TOPICS CLUSTER-ID             BOOTSTRAP-SERVER",
        "my-mirror  2      lBq12jYZRp-9wF3M9MPopg localhost:9091,localhost:9092",
        "new-mirror 1      lBq12jYZRp-9wF3M9MPopg localhost:9091,localhost:9092",
        "empty      0      -                      s:1",
    ]


def test_describe_table_is_the_kips() -> None:
    D = MirrorPartitionDescription
    lines = cli.format_describe([
        D("my-mirror", "bar", 0, 2324, 2324, 0, "MIRRORING", 3),
        D("my-mirror", "foo", 1, 94, 84, 10, "MIRRORING", 3),
        D("new-mirror", "baz", 0, -1, 0, -1, "PREPARING", -1),
    ])
    assert lines == [
        "MIRROR     TOPIC PARTITION SOURCE-OFFSET DESTINATION-OFFSET LAG STATE",
        "my-mirror  bar   0         2324          2324               0   MIRRORING",
        "my-mirror  foo   1         94            84                 10  MIRRORING",
        "new-mirror baz   0         -             0                  -   PREPARING",
    ]
    assert cli.format_describe([]) == ["MIRROR TOPIC PARTITION SOURCE-OFFSET DESTINATION-OFFSET LAG STATE"]


def test_command_config_properties(tmp_path: Path) -> None:
    f = tmp_path / "client.properties"
    f.write_text("# admin\nclient.id=ops\nrequest.timeout.ms=5000\nsecurity.protocol=PLAINTEXT\nretries=3\n")
    props = command_config.read_properties(str(f), "--command-config")
    options = command_config.client_options(props, 30_000)
    assert options == {"client_id": "ops", "request_timeout_ms": 5000, "security": options["security"]}
    assert options["security"].is_plaintext
    with pytest.raises(CommandError, match="'sasl.jaas.config' is required"):
        command_config.client_options({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, 1)
    with pytest.raises(CommandError, match="'sasl.mechanism': supported: GSSAPI, OAUTHBEARER, PLAIN"):
        command_config.client_options({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "AWS_MSK_IAM"}, 1)
    options = command_config.client_options({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                                  "ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca.pem",
                                  "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                                                      'required username="u" password="p";'}, 1)
    security = options["security"]
    assert (security.protocol, security.sasl.username, security.sasl.password) == ("SASL_SSL", "u", "p")
    assert security.tls.ca_location == "/ca.pem" and security.tls.check_hostname
    with pytest.raises(CommandError, match="unknown or unsupported client property foo"):
        command_config.client_options({"foo": "1"}, 1)
    with pytest.raises(CommandError, match="cannot read"):
        command_config.read_properties(str(tmp_path / "missing"), "--mirror-config")


def test_report_topic_results(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.report_topic_results("add", "my-mirror", {"my-topic": None}) == 0
    assert capsys.readouterr().out == "Added 1 topic(s) to mirror my-mirror: [my-topic]\n"
    code = cli.report_topic_results("pause", "m", {"a": None, "b": None, "c": KafkaError(140, "already", "c")})
    out = capsys.readouterr()
    assert code == 1
    assert out.out == "Paused mirroring for 2 topic(s) in mirror m: [a, b]\n"
    assert out.err == "Error: pause of topic c in mirror m failed: MIRROR_TOPIC_ALREADY_PAUSED: already\n"


class FakeAdmin:
    def __init__(self, partitions: list[MirrorPartitionDescription]) -> None:
        self.partitions = partitions
        self.calls: list[tuple[str, str, list[str]]] = []

    async def describe_mirrors(self, names: Any = None, topics: Any = None) -> list[MirrorPartitionDescription]:
        return [p for p in self.partitions if not names or p.mirror_name in names]

    async def remove_topics_from_mirror(self, name: str, topics: list[str]) -> dict[str, KafkaError | None]:
        self.calls.append(("remove", name, list(topics)))
        return {t: None for t in topics}


def test_failover_of_every_topic_of_every_mirror(capsys: pytest.CaptureFixture[str]) -> None:
    D = MirrorPartitionDescription
    admin = FakeAdmin([D("m", "a", 0, 1, 1, 0, "MIRRORING", 1), D("m", "a", 1, 1, 1, 0, "MIRRORING", 1),
                       D("m", "old", 0, 1, 1, 0, "STOPPED", 1), D("n", "b", 0, 1, 1, 0, "PAUSED", 1)])
    code = asyncio.run(cli.member_topics_action(admin, "remove", None, ".*"))  # type: ignore[arg-type]
    assert code == 0
    assert admin.calls == [("remove", "m", ["a"]), ("remove", "n", ["b"])]
    assert capsys.readouterr().out == ("Removed 1 topic(s) from mirror m: [a]\n"
                                       "Removed 1 topic(s) from mirror n: [b]\n")
    with pytest.raises(CommandError, match="no topic of mirror m matches 'zz.*'"):
        asyncio.run(cli.member_topics_action(admin, "remove", "m", "zz.*"))  # type: ignore[arg-type]


def test_unreachable_cluster_is_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mirrors", "--bootstrap-server", "127.0.0.1:1", "--list"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and err.count("\n") == 1


def test_configs_entity_type_mirrors() -> None:
    from kmirror.cli.configs import format_describe, resource
    from kmirror.client.admin import ConfigEntry, ConfigResourceType

    args = build_parser().parse_args(["configs", "--bootstrap-server", ":9094", "--entity-type", "mirrors",
                                      "--entity-name", "my-mirror", "--alter", "--add-config",
                                      "bootstrap.servers=localhost:9092"])
    assert resource(args) == (ConfigResourceType.MIRROR, "my-mirror")
    assert int(ConfigResourceType.MIRROR) == 64
    entries = [ConfigEntry("bootstrap.servers", "localhost:9092", 0, False, False),
               ConfigEntry("sasl.jaas.config", "secret", 0, False, True)]
    assert format_describe(ConfigResourceType.MIRROR, "my-mirror", entries, False) == [
        "Dynamic configs for mirror my-mirror are:",
        "  bootstrap.servers=localhost:9092 sensitive=false synonyms={}",
        "  sasl.jaas.config=null sensitive=true synonyms={}",
    ]


def test_state_filter_names() -> None:
    assert cli.parse_states("failed, Paused") == frozenset({"FAILED", "PAUSED"})
