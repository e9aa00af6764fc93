"""`kmirror acls`: kafka-acls.sh's options expanded into bindings, its checks and messages, and
its printed forms (Kafka's AclCommand)."""

from __future__ import annotations

import argparse
import io

import pytest

from kmirror.cli import acls as cli
from kmirror.cli.acl_bindings import (
    AccessControlEntry,
    AclOptions,
    ResourcePatternFilter,
    binding_str,
    format_adding,
    format_current,
    format_remove_question,
    group_by_resource,
    parse_operation,
    pascal_name,
    resource_filter_to_acls,
    resource_filters,
    resource_to_acls,
)
from kmirror.cli.errors import CommandError
from kmirror.cli.main import build_parser, main
from kmirror.client.acls import AclBinding, AclBindingFilter
from kmirror.metadata.controller.acls import AclOperation as Op
from kmirror.metadata.controller.acls import AclPermissionType as Perm
from kmirror.metadata.controller.acls import PatternType, ResourceType

LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Perm.ALLOW, Perm.DENY


def topic(name: str, pattern: PatternType = LIT) -> ResourcePatternFilter:
    return ResourcePatternFilter(ResourceType.TOPIC, name, pattern)


def group(name: str, pattern: PatternType = LIT) -> ResourcePatternFilter:
    return ResourcePatternFilter(ResourceType.GROUP, name, pattern)


def txn(name: str) -> ResourcePatternFilter:
    return ResourcePatternFilter(ResourceType.TRANSACTIONAL_ID, name, LIT)


CLUSTER = ResourcePatternFilter(ResourceType.CLUSTER, "kafka-cluster", LIT)


def ace(principal: str, op: Op, perm: Perm = ALLOW, host: str = "*") -> AccessControlEntry:
    return AccessControlEntry(principal, host, op, perm)


def parse(*argv: str) -> argparse.Namespace:
    return build_parser("acls").parse_args(["acls", "--bootstrap-server", "h:1", *argv])


def test_every_principal_host_and_operation_allow_and_deny() -> None:
    o = AclOptions(topics=("t",), operations=("Read", "write"), allow_principals=("User:a", "User:b"),
                   deny_principals=("User:c",), deny_hosts=("10.0.0.1", "10.0.0.2"))
    assert resource_filter_to_acls(o) == {topic("t"): {
        ace("User:a", Op.READ), ace("User:a", Op.WRITE), ace("User:b", Op.READ), ace("User:b", Op.WRITE),
        ace("User:c", Op.READ, DENY, "10.0.0.1"), ace("User:c", Op.WRITE, DENY, "10.0.0.1"),
        ace("User:c", Op.READ, DENY, "10.0.0.2"), ace("User:c", Op.WRITE, DENY, "10.0.0.2"),
    }}


def test_operation_defaults_to_all_and_every_resource_gets_the_same_entries() -> None:
    o = AclOptions(topics=("t",), groups=("g",), cluster=True, transactional_ids=("x",),
                   allow_principals=("User:a",))
    expected = {ace("User:a", Op.ALL)}
    assert resource_to_acls(o) == {topic("t"): expected, group("g"): expected, CLUSTER: expected, txn("x"): expected}


def test_a_cluster_mirror_takes_the_kip_1279_operations() -> None:
    args = parse("--add", "--cluster-mirror", "my-mirror", "--operation", "Create", "--operation", "AlterConfigs",
                 "--allow-principal", "User:mirror-admin")
    mirror = ResourcePatternFilter(ResourceType.CLUSTER_MIRROR, "my-mirror", LIT)
    assert resource_to_acls(cli.acl_options(args)) == {
        mirror: {ace("User:mirror-admin", Op.CREATE), ace("User:mirror-admin", Op.ALTER_CONFIGS)}}
    with pytest.raises(CommandError, match="only supports operations"):
        resource_to_acls(cli.acl_options(parse("--add", "--cluster-mirror", "m", "--operation", "Read",
                                               "--allow-principal", "User:x")))
    bindings = [AclBinding(8, "my-mirror", 3, "User:mirror-admin", "*", 7, 3)]
    assert format_current(group_by_resource(bindings)).startswith(
        "Current ACLs for resource `ResourcePattern(resourceType=CLUSTER_MIRROR, name=my-mirror, "
        "patternType=LITERAL)`:\n\t(principal=User:mirror-admin, host=*, operation=ALTER, permissionType=ALLOW)")


def test_cluster_is_a_resource_only_with_the_literal_pattern_type() -> None:
    assert resource_filters(AclOptions(cluster=True), required=False) == [CLUSTER]
    assert resource_filters(AclOptions(cluster=True, pattern_type=PatternType.MATCH), required=False) == []
    with pytest.raises(CommandError, match="^You must provide at least one resource: --topic <topic> or --cluster"):
        resource_filters(AclOptions(cluster=True, pattern_type=PRE), required=True)


def test_producer_expands_to_write_describe_create_on_topics_and_write_describe_on_transactional_ids() -> None:
    o = AclOptions(topics=("t", "u"), transactional_ids=("x",), groups=("ignored",), producer=True,
                   allow_principals=("User:p",))
    on_topic = {ace("User:p", Op.WRITE), ace("User:p", Op.DESCRIBE), ace("User:p", Op.CREATE)}
    assert resource_to_acls(o) == {topic("t"): on_topic, topic("u"): on_topic,
                                   txn("x"): {ace("User:p", Op.WRITE), ace("User:p", Op.DESCRIBE)}}


def test_producer_idempotent_adds_idempotent_write_on_the_cluster() -> None:
    o = AclOptions(topics=("t",), producer=True, idempotent=True, allow_principals=("User:p",),
                   pattern_type=PRE)
    acls = resource_to_acls(o)
    assert acls[CLUSTER] == {ace("User:p", Op.IDEMPOTENT_WRITE)}
    assert set(acls) == {topic("t", PRE), CLUSTER}


def test_consumer_expands_to_read_describe_on_topics_and_read_on_groups() -> None:
    o = AclOptions(topics=("t",), groups=("g",), consumer=True, allow_principals=("User:c",))
    assert resource_to_acls(o) == {topic("t"): {ace("User:c", Op.READ), ace("User:c", Op.DESCRIBE)},
                                   group("g"): {ace("User:c", Op.READ)}}


def test_producer_and_consumer_together_merge_their_topic_entries() -> None:
    o = AclOptions(topics=("t",), groups=("g",), producer=True, consumer=True, allow_principals=("User:x",))
    acls = resource_to_acls(o)
    assert {e.operation for e in acls[topic("t")]} == {Op.WRITE, Op.DESCRIBE, Op.CREATE, Op.READ}
    assert acls[group("g")] == {ace("User:x", Op.READ)}


def test_remove_without_principals_means_every_entry_of_the_resource() -> None:
    o = AclOptions(topics=("t",), pattern_type=PatternType.MATCH)
    assert resource_filter_to_acls(o) == {topic("t", PatternType.MATCH): set()}


@pytest.mark.parametrize(("options", "message"), [
    (AclOptions(topics=("t",), operations=("Frobnicate",), allow_principals=("User:a",)),
     "Unknown operation 'Frobnicate'; valid operation names are: All, Read, Write, Create, Delete, Alter, Describe, "
     "ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens, TwoPhaseCommit"),
    (AclOptions(groups=("g",), operations=("Write",), allow_principals=("User:a",)),
     "ResourceType GROUP only supports operations [ALL, READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS]"),
    (AclOptions(topics=("t",)), "You must specify one of: --allow-principal, --deny-principal when trying to add ACLs."),
    (AclOptions(allow_principals=("User:a",)), "You must provide at least one resource: --topic <topic> or --cluster "
                                               "or --group <group> or --delegation-token <Delegation Token ID>"),
    (AclOptions(topics=("t",), allow_principals=("alice",)),
     "expected a string in format principalType:principalName but got alice"),
    (AclOptions(topics=("t",), allow_principals=("User:a",), pattern_type=PatternType.ANY),
     "A '--resource-pattern-type' value of 'ANY' is not valid when adding acls."),
])
def test_add_refuses_bad_input_with_kafkas_message(options: AclOptions, message: str) -> None:
    with pytest.raises(CommandError) as refused:
        resource_to_acls(options)
    assert str(refused.value) == message


def test_operation_names_are_kafkas_and_case_insensitive() -> None:
    assert pascal_name(Op.IDEMPOTENT_WRITE) == "IdempotentWrite"
    assert parse_operation("IdempotentWrite") == Op.IDEMPOTENT_WRITE
    assert parse_operation("idempotentwrite") == Op.IDEMPOTENT_WRITE
    assert parse_operation(" DESCRIBECONFIGS ") == Op.DESCRIBE_CONFIGS
    with pytest.raises(CommandError):
        parse_operation("Any")


def test_list_output_is_kafkas() -> None:
    bindings = [AclBinding(2, "t", 3, "User:bob", "*", 4, 3), AclBinding(2, "t", 3, "User:alice", "*", 3, 3),
                AclBinding(3, "g", 4, "User:alice", "h1", 3, 2)]
    assert format_current(group_by_resource(bindings)) == (
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`:\n"
        "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:bob, host=*, operation=WRITE, permissionType=ALLOW)\n"
        "\n"
        "Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=g, patternType=PREFIXED)`:\n"
        "\t(principal=User:alice, host=h1, operation=READ, permissionType=DENY)\n"
        "\n")


def test_add_and_remove_messages_are_kafkas() -> None:
    entries = [ace("User:a", Op.READ), ace("User:a", Op.ALL, DENY)]
    assert format_adding(topic("t"), entries) == (
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`: \n"
        " \t(principal=User:a, host=*, operation=ALL, permissionType=DENY)\n"
        "\t(principal=User:a, host=*, operation=READ, permissionType=ALLOW)\n\n")
    assert binding_str(topic("t"), entries[0]) == (
        "(pattern=ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL), "
        "entry=(principal=User:a, host=*, operation=READ, permissionType=ALLOW))")
    assert format_remove_question(topic("t", PatternType.MATCH), set()) == (
        "Are you sure you want to delete all ACLs for resource filter "
        "`ResourcePattern(resourceType=TOPIC, name=t, patternType=MATCH)`? (y/n)")
    assert format_remove_question(topic("t"), {entries[0]}) == (
        "Are you sure you want to remove ACLs: \n \t(principal=User:a, host=*, operation=READ, permissionType=ALLOW)\n"
        " from resource filter `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`? (y/n)")


@pytest.mark.parametrize(("argv", "message"), [
    (("--topic", "t"), "Command must include exactly one action: --list, --add, --remove."),
    (("--add", "--list", "--topic", "t"), "Command must include exactly one action: --list, --add, --remove."),
    (("--list", "--allow-principal", "User:a"), 'Option "--list" can\'t be used with option "--allow-principal"'),
    (("--add", "--producer", "--topic", "t", "--operation", "Read"),
     'Option "--producer" can\'t be used with option "--operation"'),
    (("--add", "--consumer", "--topic", "t", "--group", "g", "--deny-principal", "User:a"),
     'Option "--consumer" can\'t be used with option "--deny-principal"'),
    (("--add", "--topic", "t", "--principal", "User:a"), "The --principal option is only available if --list is set"),
    (("--add", "--producer", "--group", "g"), "With --producer you must specify a --topic"),
    (("--add", "--idempotent", "--topic", "t"), "The --idempotent option is only available if --producer is set"),
    (("--add", "--consumer", "--topic", "t"), "With --consumer you must specify a --topic and a --group and no "
                                              "--cluster or --transactional-id option should be specified."),
    (("--add", "--consumer", "--topic", "t", "--group", "g", "--cluster"), "With --consumer you must specify"),
])
def test_argument_checks_follow_kafka_acls(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(CommandError) as refused:
        cli.validate(parse(*argv))
    assert str(refused.value).startswith(message)


def test_producer_with_consumer_may_name_a_transactional_id() -> None:
    args = parse("--add", "--producer", "--consumer", "--topic", "t", "--group", "g", "--transactional-id", "x",
                 "--allow-principal", "User:a")
    assert cli.validate(args) == "add"
    assert set(resource_to_acls(cli.acl_options(args))) == {topic("t"), group("g"), txn("x")}


def test_remove_asks_per_resource_and_reads_the_answer_from_stdin(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    acls = {topic("t"): {ace("User:a", Op.READ)}, group("g"): set()}
    monkeypatch.setattr("sys.stdin", io.StringIO("y\nn\n"))
    assert cli.removal_filters(acls, force=False) == [
        AclBindingFilter(ResourceType.TOPIC, "t", LIT, "User:a", "*", Op.READ, ALLOW)]
    out = capsys.readouterr().out
    assert out.index("from resource filter `ResourcePattern(resourceType=TOPIC") < out.index(
        "delete all ACLs for resource filter `ResourcePattern(resourceType=GROUP")
    assert cli.removal_filters(acls, force=True) == [
        AclBindingFilter(ResourceType.TOPIC, "t", LIT, "User:a", "*", Op.READ, ALLOW),
        AclBindingFilter(ResourceType.GROUP, "g", LIT)]
    assert capsys.readouterr().out == ""
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    with pytest.raises(CommandError, match="no answer on standard input"):
        cli.removal_filters(acls, force=False)


def test_bad_input_is_one_error_line_before_any_connection(capsys) -> None:  # type: ignore[no-untyped-def]
    # Port 1 refuses connections: the input check must come first for this message to appear.
    assert main(["acls", "--bootstrap-server", "127.0.0.1:1", "--add", "--topic", "t", "--allow-principal",
                 "User:a", "--operation", "Reed"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: Unknown operation 'Reed'") and err.count("\n") == 1
