"""`kmirror acls` as a real process against a real node with a SASL_PLAINTEXT (PLAIN)
listener: it adds, lists and removes ACLs through `--command-config` over SASL, prints
kafka-acls.sh's output, and confluent-kafka (authenticated over SASL too) sees exactly the
bindings it made (and it lists theirs). kmirror stores, replicates and mirrors ACLs but does
not enforce them yet (no authorizer), so these tests check the bindings, not access."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from kmirror.testing.processes import LocalCluster, free_port_block, kmirror

pytestmark = pytest.mark.integration

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


@dataclass
class SaslNode:
    cluster: LocalCluster
    command_config: Path

    @property
    def sasl(self) -> str:
        return f"127.0.0.1:{self.cluster.port + 1}"

    def acls(self, *args: str, stdin: str | None = None, check: bool = True):  # type: ignore[no-untyped-def]
        """`kmirror acls` over SASL_PLAINTEXT, as user admin."""
        return kmirror("acls", "--bootstrap-server", self.sasl, "--command-config", str(self.command_config), *args,
                       input=stdin, check=check)

    @functools.cached_property
    def admin(self) -> AdminClient:
        """One confluent-kafka admin client (a handle dropped before its futures resolve
        fails them)."""
        return AdminClient({"bootstrap.servers": self.sasl, "security.protocol": "SASL_PLAINTEXT",
                            "sasl.mechanisms": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-secret"})

    def bindings(self, resource_type: ResourceType, name: str) -> set[tuple[str, str, str, str, str, str]]:
        """confluent-kafka's DescribeAcls of one resource name (any pattern type), as
        (pattern type, name, principal, host, operation, permission) tuples."""
        found = self.admin.describe_acls(AclBindingFilter(
            resource_type, name, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY)).result(30)
        return {(b.resource_pattern_type.name, b.name, b.principal, b.host, b.operation.name, b.permission_type.name)
                for b in found}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslNode]:
    base = tmp_path_factory.mktemp("acls")
    port = free_port_block(2)
    cluster = LocalCluster(base / "cluster", port, 1, {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{port + 1},"
                     f"CONTROLLER://127.0.0.1:{port + 100}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{port + 1}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f'{PLAIN_MODULE} required user_admin="admin-secret";',
    })
    config = base / "admin.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                      f'sasl.jaas.config={PLAIN_MODULE} required username="admin" password="admin-secret";\n')
    cluster.up()
    try:
        yield SaslNode(cluster, config)
    finally:
        cluster.down()


def test_add_list_and_a_real_client_sees_the_bindings(node: SaslNode) -> None:
    added = node.acls("--add", "--allow-principal", "User:alice", "--allow-principal", "User:bob",
                      "--operation", "Read", "--operation", "Describe", "--topic", "orders",
                      "--deny-principal", "User:mallory", "--deny-host", "10.0.0.9")
    assert added.stdout == (
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)\n"
        "\t(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:bob, host=*, operation=DESCRIBE, permissionType=ALLOW)\n"
        "\t(principal=User:mallory, host=10.0.0.9, operation=READ, permissionType=DENY)\n"
        "\t(principal=User:mallory, host=10.0.0.9, operation=DESCRIBE, permissionType=DENY)\n\n")
    assert node.bindings(ResourceType.TOPIC, "orders") == {
        ("LITERAL", "orders", "User:alice", "*", "READ", "ALLOW"),
        ("LITERAL", "orders", "User:alice", "*", "DESCRIBE", "ALLOW"),
        ("LITERAL", "orders", "User:bob", "*", "READ", "ALLOW"),
        ("LITERAL", "orders", "User:bob", "*", "DESCRIBE", "ALLOW"),
        ("LITERAL", "orders", "User:mallory", "10.0.0.9", "READ", "DENY"),
        ("LITERAL", "orders", "User:mallory", "10.0.0.9", "DESCRIBE", "DENY"),
    }
    again = node.acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders")
    assert again.stdout == (
        "Acl (pattern=ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL), entry=(principal="
        "User:alice, host=*, operation=READ, permissionType=ALLOW)) already exists.\n")

    # A binding made by a real client, on a prefix matching "orders": --list shows it, by
    # pattern type, and `match` finds the bindings that apply to the name "orders".
    theirs = AclBinding(ResourceType.TOPIC, "ord", ResourcePatternType.PREFIXED, "User:carol", "*",
                        AclOperation.WRITE, AclPermissionType.ALLOW)
    node.admin.create_acls([theirs])[theirs].result(30)
    prefixed = node.acls("--list", "--topic", "ord", "--resource-pattern-type", "prefixed")
    assert prefixed.stdout == (
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=ord, patternType=PREFIXED)`:\n"
        "\t(principal=User:carol, host=*, operation=WRITE, permissionType=ALLOW)\n\n")
    matching = node.acls("--list", "--topic", "orders", "--resource-pattern-type", "match", "--principal", "User:bob",
                         "--principal", "User:carol")
    assert matching.stdout == (
        "ACLs for principal `User:bob`\n"
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:\n"
        "\t(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:bob, host=*, operation=DESCRIBE, permissionType=ALLOW)\n\n"
        "ACLs for principal `User:carol`\n"
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=ord, patternType=PREFIXED)`:\n"
        "\t(principal=User:carol, host=*, operation=WRITE, permissionType=ALLOW)\n\n")


def test_producer_and_consumer_expand_as_kafkas(node: SaslNode) -> None:
    node.acls("--add", "--producer", "--idempotent", "--topic", "pay", "--transactional-id", "pay-tx",
              "--allow-principal", "User:writer")
    node.acls("--add", "--consumer", "--topic", "pay", "--group", "pay-readers", "--allow-principal", "User:reader")
    assert node.bindings(ResourceType.TOPIC, "pay") == {
        ("LITERAL", "pay", "User:writer", "*", op, "ALLOW") for op in ("WRITE", "DESCRIBE", "CREATE")
    } | {("LITERAL", "pay", "User:reader", "*", op, "ALLOW") for op in ("READ", "DESCRIBE")}
    assert node.bindings(ResourceType.TRANSACTIONAL_ID, "pay-tx") == {
        ("LITERAL", "pay-tx", "User:writer", "*", op, "ALLOW") for op in ("WRITE", "DESCRIBE")}
    assert node.bindings(ResourceType.GROUP, "pay-readers") == {
        ("LITERAL", "pay-readers", "User:reader", "*", "READ", "ALLOW")}
    cluster = node.acls("--list", "--cluster", "--principal", "User:writer")
    assert cluster.stdout == (
        "ACLs for principal `User:writer`\n"
        "Current ACLs for resource `ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL)`:\n"
        "\t(principal=User:writer, host=*, operation=IDEMPOTENT_WRITE, permissionType=ALLOW)\n\n")


def test_remove_asks_unless_forced_and_removes(node: SaslNode) -> None:
    node.acls("--add", "--allow-principal", "User:dan", "--operation", "Read", "--operation", "Describe",
              "--topic", "gone", "--group", "gone")
    question = node.acls("--remove", "--allow-principal", "User:dan", "--operation", "Describe", "--topic", "gone",
                         stdin="n\n")
    assert question.stdout == (
        "Are you sure you want to remove ACLs: \n"
        " \t(principal=User:dan, host=*, operation=DESCRIBE, permissionType=ALLOW)\n"
        " from resource filter `ResourcePattern(resourceType=TOPIC, name=gone, patternType=LITERAL)`? (y/n)\n")
    assert len(node.bindings(ResourceType.TOPIC, "gone")) == 2
    no_answer = node.acls("--remove", "--topic", "gone", stdin="", check=False)
    assert no_answer.returncode == 1
    assert no_answer.stderr == ("Error: no answer on standard input to confirm the removal; use --force to remove "
                                "without asking\n")
    assert len(node.bindings(ResourceType.TOPIC, "gone")) == 2
    node.acls("--remove", "--allow-principal", "User:dan", "--operation", "Describe", "--topic", "gone", stdin="y\n")
    assert node.bindings(ResourceType.TOPIC, "gone") == {("LITERAL", "gone", "User:dan", "*", "READ", "ALLOW")}
    forced = node.acls("--remove", "--topic", "gone", "--group", "gone", "--force")
    assert forced.stdout == ""
    assert node.bindings(ResourceType.TOPIC, "gone") == set()
    assert node.bindings(ResourceType.GROUP, "gone") == set()
    assert node.acls("--list", "--topic", "gone", "--group", "gone").stdout == ""


@pytest.mark.parametrize(("argv", "error"), [
    (("--add", "--topic", "bad", "--allow-principal", "User:a", "--operation", "Reed"),
     "Error: Unknown operation 'Reed'; valid operation names are: All, Read, Write, Create, Delete, Alter, "
     "Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens, "
     "TwoPhaseCommit\n"),
    (("--add", "--topic", "bad", "--operation", "Read"),
     "Error: You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.\n"),
    (("--add", "--allow-principal", "User:a", "--operation", "Read"),
     "Error: You must provide at least one resource: --topic <topic> or --cluster or --group <group> or "
     "--delegation-token <Delegation Token ID>\n"),
    (("--add", "--topic", "bad", "--allow-principal", "alice"),
     "Error: expected a string in format principalType:principalName but got alice\n"),
    (("--add", "--cluster", "--allow-principal", "User:a", "--operation", "Read"),
     "Error: ResourceType CLUSTER only supports operations [ALL, CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, "
     "DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE]\n"),
])
def test_bad_input_is_one_error_line_and_changes_nothing(node: SaslNode, argv: tuple[str, ...], error: str) -> None:
    refused = node.acls(*argv, check=False)
    assert (refused.returncode, refused.stdout, refused.stderr) == (1, "", error)
    assert node.bindings(ResourceType.TOPIC, "bad") == set()
