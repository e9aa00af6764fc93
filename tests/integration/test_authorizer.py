"""The StandardAuthorizer on a real node: a PLAINTEXT inter-broker listener (unrestricted, the
cluster's own), a SASL_PLAINTEXT/PLAIN listener for clients (checked), `super.users=User:admin`.
confluent-kafka clients as `User:alice` are refused (TOPIC_AUTHORIZATION_FAILED) until the
admin grants ACLs with AdminClient.create_acls, then served; a DENY binding wins over an ALLOW;
`kmirror mirrors` as a principal without Describe on a ClusterMirror lists nothing and gets
MIRROR_AUTHORIZATION_FAILED, and sees exactly the mirror it is granted. A refused produce and
fetch are written to the node's log as Kafka's `kafka.authorizer.logger` INFO lines (a listing
that leaves topics out is not), and the metrics endpoint reports the authorizer's decision
rates and its ACL count. A share consumer needs READ on its group, then on its topic. A mirror between two such clusters works with the KIP's source
permissions for its principal, and cannot add a topic before they are granted."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType

from kmirror.client.connection import BrokerConnection
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.testing.kafka_clients import consume_values, produce_values, watermarks
from kmirror.testing.metrics_scrape import scrape
from kmirror.testing.mirror_clusters import wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror
from kmirror.testing.replication import request_type
from kmirror.testing.segments import log_batches
from kmirror.testing.share_consumers import earliest

pytestmark = pytest.mark.integration

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
JAAS = f"{PLAIN_MODULE} required " + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";"


@dataclass
class AuthorizedNode:
    cluster: LocalCluster

    @property
    def plaintext(self) -> str:
        return f"127.0.0.1:{self.cluster.port}"

    @property
    def sasl(self) -> str:
        return f"127.0.0.1:{self.cluster.port + 1}"

    def client(self, user: str) -> dict[str, str]:
        return {"bootstrap.servers": self.sasl, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                "sasl.username": user, "sasl.password": USERS[user]}

    def command_config(self, directory: Path, user: str) -> Path:
        path = directory / f"{user}.properties"
        path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                        f'sasl.jaas.config={PLAIN_MODULE} required username="{user}" password="{USERS[user]}";\n')
        return path

    @property
    def metrics_port(self) -> int:
        return int(self.cluster.overrides["metrics.port"])

    def grant(self, *bindings: AclBinding) -> None:
        admin = AdminClient(self.client("admin"))
        for future in admin.create_acls(list(bindings), request_timeout=30).values():
            future.result()


def authorized_node(directory: Path, **overrides: str) -> AuthorizedNode:
    port = free_port_block(2)
    cluster = LocalCluster(directory, port, 1, {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{port + 1},"
                     f"CONTROLLER://127.0.0.1:{port + 100}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{port + 1}",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "metrics.port": str(free_port_block()),
        **overrides,
    })
    cluster.up()
    return AuthorizedNode(cluster)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthorizedNode]:
    n = authorized_node(tmp_path_factory.mktemp("authorizer"))
    try:
        yield n
    finally:
        n.cluster.down()


def topic_acl(topic: str, principal: str, operation: AclOperation,
              permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*", operation, permission)


def create_topic(node: AuthorizedNode, topic: str) -> None:
    admin = AdminClient(node.client("admin"))
    admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=30)[topic].result()


def produce_error(config: dict[str, str], topic: str) -> KafkaError | None:
    """The delivery error of one record (None: delivered)."""
    reports: list[KafkaError | None] = []
    producer = Producer({**config, "message.timeout.ms": 20000})
    producer.produce(topic, b"v", on_delivery=lambda err, msg: reports.append(err))
    deadline = time.monotonic() + 30
    while not reports and time.monotonic() < deadline:
        producer.poll(0.2)
    assert reports, "no delivery report"
    return reports[0]


def first_error(consumer: Consumer, ignore: tuple[int, ...] = ()) -> KafkaError | None:
    """The error of the first message `consumer` polls (None for a record), errors of codes in
    `ignore` passed over; the consumer is closed."""
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error: KafkaError | None = msg.error()
            if error is None or error.code() not in ignore:
                return error
        raise AssertionError("neither a record nor an error")
    finally:
        consumer.close()


def consume_error(config: dict[str, str], topic: str, group: str) -> KafkaError | None:
    consumer = Consumer({**config, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    return first_error(consumer)


def test_alice_is_refused_until_the_admin_grants_acls(node: AuthorizedNode) -> None:
    create_topic(node, "orders")
    refused = produce_error(node.client("alice"), "orders")
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # listing the topics shows alice nothing yet; the admin sees the topic
    assert "orders" not in AdminClient(node.client("alice")).list_topics(timeout=30).topics
    assert "orders" in AdminClient(node.client("admin")).list_topics(timeout=30).topics
    # alice may not grant herself anything
    alice_admin = AdminClient(node.client("alice"))
    with pytest.raises(KafkaException) as denied:
        for future in alice_admin.create_acls([topic_acl("orders", "User:alice", AclOperation.WRITE)],
                                              request_timeout=30).values():
            future.result()
    assert denied.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED

    node.grant(topic_acl("orders", "User:alice", AclOperation.WRITE),
               topic_acl("orders", "User:alice", AclOperation.READ),
               AclBinding(ResourceType.GROUP, "g-alice", ResourcePatternType.LITERAL, "User:alice", "*",
                          AclOperation.READ, AclPermissionType.ALLOW))
    values = [f"alice {i}".encode() for i in range(10)]
    produce_values(node.client("alice"), "orders", values)
    assert consume_values(node.client("alice"), "orders", len(values), "g-alice") == values
    # another group is still refused
    error = consume_error(node.client("alice"), "orders", "g-other")
    assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_a_deny_acl_wins_over_an_allow(node: AuthorizedNode) -> None:
    create_topic(node, "shared")
    node.grant(topic_acl("shared", "User:*", AclOperation.ALL),
               topic_acl("shared", "User:bob", AclOperation.WRITE, AclPermissionType.DENY))
    assert produce_error(node.client("alice"), "shared") is None
    refused = produce_error(node.client("bob"), "shared")
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_the_acl_apis_answer_version_1(node: AuthorizedNode) -> None:
    """CreateAcls, DescribeAcls and DeleteAcls v1 (non-flexible), which Kafka 4 still serves and
    older clients (Sarama, Kafka 2.x's) send. Raw requests on the cluster's own listener."""
    from kio.static.primitive import i8

    topic, principal = "acl-v1", "User:carol"
    TOPIC, LITERAL, ANY, READ, ALLOW = i8(2), i8(3), i8(1), i8(3), i8(3)

    async def run() -> tuple[Any, Any, Any, Any]:
        conn = BrokerConnection("127.0.0.1", node.cluster.port, client_id="acls-v1")
        await conn.connect()
        try:
            C, D, X = request_type(30, 1), request_type(29, 1), request_type(31, 1)
            created = await conn.send(build(C, creations=(nested(C, "AclCreation")(
                resource_type=TOPIC, resource_name=topic, resource_pattern_type=LITERAL, principal=principal,
                host="*", operation=READ, permission_type=ALLOW),)))
            describe = build(D, resource_type_filter=TOPIC, resource_name_filter=topic, pattern_type_filter=LITERAL,
                             principal_filter=None, host_filter=None, operation=ANY, permission_type=ANY)
            described = await conn.send(describe)
            deleted = await conn.send(build(X, filters=(nested(X, "DeleteAclsFilter")(
                resource_type_filter=TOPIC, resource_name_filter=topic, pattern_type_filter=LITERAL,
                principal_filter=principal, host_filter=None, operation=ANY, permission_type=ANY),)))
            return created, described, deleted, await conn.send(describe)
        finally:
            await conn.close()

    created, described, deleted, after = asyncio.run(run())
    assert [r.error_code for r in created.results] == [ErrorCode.none]
    assert described.error_code == ErrorCode.none
    assert [(r.resource_name, [(a.principal, int(a.operation)) for a in r.acls]) for r in described.resources] == [
        (topic, [(principal, READ)])]
    assert [[m.principal for m in f.matching_acls] for f in deleted.filter_results] == [[principal]]
    assert after.resources == ()


def test_the_inter_broker_listener_is_the_clusters_own(node: AuthorizedNode) -> None:
    """ANONYMOUS on the inter-broker listener is unrestricted: the cluster's own connections."""
    assert produce_error({"bootstrap.servers": node.plaintext}, "orders") is None


def test_mirrors_are_listed_only_to_principals_with_describe(node: AuthorizedNode, tmp_path: Path) -> None:
    kmirror("features", "--bootstrap-server", node.plaintext, "upgrade", "--feature", "mirror.version=1")
    mirror_config = tmp_path / "mirror.properties"
    mirror_config.write_text("bootstrap.servers=127.0.0.1:1\n")
    admin = node.command_config(tmp_path, "admin")
    alice = node.command_config(tmp_path, "alice")

    def mirrors(config: Path, *args: str) -> tuple[int, str]:
        out = kmirror("mirrors", "--bootstrap-server", node.sasl, "--command-config", str(config), *args,
                      check=False)
        return out.returncode, out.stdout + out.stderr

    for name in ("dr-east", "dr-west"):
        code, text = mirrors(admin, "--create", "--mirror", name, "--mirror-config", str(mirror_config))
        assert code == 0, text
    code, text = mirrors(alice, "--create", "--mirror", "mine", "--mirror-config", str(mirror_config))
    assert code != 0 and "MIRROR_AUTHORIZATION_FAILED" in text

    code, text = mirrors(alice, "--list")
    assert code == 0 and "dr-east" not in text and "dr-west" not in text
    code, text = mirrors(alice, "--describe", "--mirror", "dr-east")
    assert "MIRROR_AUTHORIZATION_FAILED" in text
    code, text = mirrors(admin, "--list")
    assert code == 0 and "dr-east" in text and "dr-west" in text

    # the KIP's kafka-acls.sh example: read-only monitoring access to one mirror
    granted = kmirror("acls", "--bootstrap-server", node.sasl, "--command-config", str(admin), "--add",
                      "--cluster-mirror", "dr-east", "--operation", "Describe", "--allow-principal", "User:alice")
    assert "ResourcePattern(resourceType=CLUSTER_MIRROR, name=dr-east, patternType=LITERAL)" in granted.stdout
    code, text = mirrors(alice, "--list")
    assert code == 0 and "dr-east" in text and "dr-west" not in text


def fetch_error(config: dict[str, str], topic: str) -> KafkaError | None:
    """The error of a Fetch from offset 0 of partition 0, assigned (the group is not used:
    librdkafka's lookup of its coordinator may fail beside)."""
    consumer = Consumer({**config, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    return first_error(consumer, ignore=(KafkaError.GROUP_AUTHORIZATION_FAILED,))


AUTHORIZER_METRICS = '{config="authorizer.class.name",class="StandardAuthorizer",role="broker"}'


def authorizer_metrics(node: AuthorizedNode) -> dict[str, float]:
    """The authorizer's metrics of one scrape, by Kafka name (`acls-total-count`...)."""
    prefix, suffix = "kafka_server_plugins_", AUTHORIZER_METRICS
    return {k[len(prefix):-len(suffix)].replace("_", "-"): v for k, v in scrape(node.metrics_port).items()
            if k.startswith(prefix) and k.endswith(suffix)}


def test_refusals_are_audit_logged_and_decisions_counted(node: AuthorizedNode, tmp_path: Path) -> None:
    create_topic(node, "audited")
    acls_before = authorizer_metrics(node)["acls-total-count"]
    # bob may see the topic (Metadata) but neither write nor read it
    kmirror("acls", "--bootstrap-server", node.sasl, "--command-config", str(node.command_config(tmp_path, "admin")),
            "--add", "--topic", "audited", "--operation", "Describe", "--allow-principal", "User:bob")
    wait_until(lambda: authorizer_metrics(node)["acls-total-count"] == acls_before + 1, "the ACL count to grow by one")
    logged = len(node.cluster.log_text())

    refused = produce_error(node.client("bob"), "audited")
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    refused = fetch_error(node.client("bob"), "audited")
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # listing every topic leaves out those bob may not describe: no refusal
    topics = AdminClient(node.client("bob")).list_topics(timeout=30).topics
    assert "audited" in topics and "orders" not in topics

    log = node.cluster.log_text()[logged:]
    for operation, request in (("WRITE", "Produce"), ("READ", "Fetch")):
        line = (f"INFO kafka.authorizer.logger: Principal = User:bob is Denied operation = {operation} "
                f"from host = 127.0.0.1 on resource = Topic:LITERAL:audited for request = {request} "
                "with resourceRefCount = 1 based on rule DefaultDeny")
        assert line in log, log[-3000:]
    assert "User:bob is Denied operation = DESCRIBE from host = 127.0.0.1 on resource = Topic" not in log
    # grants are DEBUG lines: not in the node's INFO log
    assert "is Allowed" not in log
    # Kafka's rates per minute, over the last minute or so: every decision is a request
    metrics = authorizer_metrics(node)
    denied, allowed = metrics["authorization-denied-rate-per-minute"], metrics["authorization-allowed-rate-per-minute"]
    assert denied >= 2 and allowed > 0
    assert metrics["authorization-request-rate-per-minute"] == pytest.approx(denied + allowed, rel=0.01)


def test_grants_are_audit_logged_after_the_logger_is_set_to_debug_while_the_node_runs(
        node: AuthorizedNode, tmp_path: Path) -> None:
    """kafka-configs --entity-type broker-loggers (KIP-412): the DEBUG lines of granted
    requests appear once `kafka.authorizer.logger` is set to DEBUG, and stop once the level is
    deleted (the logger takes its parent's, INFO, again). Only a super user may change it."""
    create_topic(node, "audited-debug")
    node.grant(topic_acl("audited-debug", "User:alice", AclOperation.WRITE))

    def loggers(user: str, *args: str, name: str = "1") -> tuple[int, str]:
        out = kmirror("configs", "--bootstrap-server", node.sasl, "--command-config",
                      str(node.command_config(tmp_path, user)), "--entity-type", "broker-loggers",
                      "--entity-name", name, *args, check=False)
        return out.returncode, out.stdout + out.stderr

    code, described = loggers("admin", "--describe")
    assert code == 0 and described.startswith("Dynamic configs for broker-logger 1 are:"), described
    assert "  kafka.authorizer.logger=INFO sensitive=false synonyms={}" in described
    assert "  root=INFO sensitive=false synonyms={}" in described
    kafka_python = KafkaAdminClient(bootstrap_servers=node.plaintext)  # another client reads the same resource
    try:
        seen = kafka_python.describe_configs([ConfigResource(ConfigResourceType.BROKER_LOGGER, "1")],
                                             config_filter="All")
    finally:
        kafka_python.close()
    (loggers_seen,) = (by_name["1"] for by_name in seen.values())
    assert loggers_seen["kafka.authorizer.logger"]["value"] == "INFO", loggers_seen

    code, out = loggers("alice", "--alter", "--add-config", "kafka.authorizer.logger=DEBUG")
    assert code != 0 and "CLUSTER_AUTHORIZATION_FAILED" in out, out
    code, out = loggers("admin", "--alter", "--add-config", "kafka.authorizer.logger=LOUD")
    assert code != 0 and "Cannot set the log level of kafka.authorizer.logger to LOUD" in out, out
    code, out = loggers("admin", "--describe", name="2")
    assert code != 0 and "Unexpected broker id, expected 1, but received 2" in out, out

    granted = ("DEBUG kafka.authorizer.logger: Principal = User:alice is Allowed operation = WRITE from host = "
               "127.0.0.1 on resource = Topic:LITERAL:audited-debug for request = Produce")
    assert loggers("admin", "--alter", "--add-config", "kafka.authorizer.logger=DEBUG") == (
        0, "Completed updating config for broker-logger 1.\n")
    logged = len(node.cluster.log_text())
    assert produce_error(node.client("alice"), "audited-debug") is None
    wait_until(lambda: granted in node.cluster.log_text()[logged:], "the grant's DEBUG line")

    assert loggers("admin", "--alter", "--delete-config", "kafka.authorizer.logger")[0] == 0
    assert "  kafka.authorizer.logger=INFO " in loggers("admin", "--describe")[1]
    logged = len(node.cluster.log_text())
    assert produce_error(node.client("alice"), "audited-debug") is None
    assert "is Allowed" not in node.cluster.log_text()[logged:]


def test_every_admin_tool_reaches_a_sasl_listener_with_its_command_config(node: AuthorizedNode,
                                                                         tmp_path: Path) -> None:
    """As Kafka's tools: `--command-config` (kafka-leader-election.sh: `--admin.config`) holds
    the admin client's security properties."""
    config = str(node.command_config(tmp_path, "admin"))
    create_topic(node, "tools")
    for tool, *args in (("topics", "--describe", "--topic", "tools"), ("configs", "--entity-type", "topics",
                        "--entity-name", "tools", "--describe"), ("consumer-groups", "--list"),
                        ("features", "describe"), ("transactions", "--list"),
                        ("reassign-partitions", "--list"), ("acls", "--list")):
        out = kmirror(tool, "--bootstrap-server", node.sasl, "--command-config", config, *args, check=False)
        assert out.returncode == 0, (tool, out.stdout + out.stderr)
    out = kmirror("leader-election", "--bootstrap-server", node.sasl, "--admin.config", config,
                  "--election-type", "PREFERRED", "--topic", "tools", "--partition", "0", check=False)
    assert "tools-0" in out.stdout + out.stderr, out.stdout + out.stderr
    refused = kmirror("topics", "--bootstrap-server", node.sasl, "--command-config",
                      str(node.command_config(tmp_path, "bob")), "--describe", "--topic", "tools", check=False)
    assert refused.returncode != 0 and "TOPIC_AUTHORIZATION_FAILED" in refused.stdout + refused.stderr


def described_acls(node: AuthorizedNode) -> list[AclBinding]:
    admin = AdminClient(node.client("admin"))
    wanted = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                              AclPermissionType.ANY)
    found: list[AclBinding] = admin.describe_acls(wanted, request_timeout=30).result()
    return found


def test_a_mirror_between_authorizing_clusters_needs_the_kips_source_permissions(tmp_path: Path) -> None:
    topic = "mirrored"
    source = authorized_node(tmp_path / "source", **{"listener.name.sasl_plaintext.plain.sasl.jaas.config":
                                                      JAAS[:-1] + ' user_mirror="mirror-secret";'})
    dest = authorized_node(tmp_path / "dest", **{"mirror.metadata.refresh.interval.ms": "500"})
    try:
        create_topic(source, topic)
        produce_values(source.client("admin"), topic, [f"record {i}".encode() for i in range(20)])
        admin = dest.command_config(tmp_path, "admin")
        (tmp_path / "mirror.properties").write_text(
            f"bootstrap.servers={source.sasl}\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
            f'sasl.jaas.config={PLAIN_MODULE} required username="mirror" password="mirror-secret";\n'
            f"mirror.acl.include=TOPIC;{topic}\n")

        def mirrors(*args: str) -> tuple[int, str]:
            out = kmirror("mirrors", "--bootstrap-server", dest.sasl, "--command-config", str(admin), *args,
                          check=False)
            return out.returncode, out.stdout + out.stderr

        # `kmirror features` has no --command-config: the operator uses the cluster's own listener
        kmirror("features", "--bootstrap-server", dest.plaintext, "upgrade", "--feature", "mirror.version=1")
        code, text = mirrors("--create", "--mirror", "dr", "--mirror-config", str(tmp_path / "mirror.properties"))
        assert code == 0, text
        # the mirror's principal may not describe the source topic yet
        code, text = mirrors("--add", "--mirror", "dr", "--topic", topic)
        assert code != 0 and "TOPIC_AUTHORIZATION_FAILED" in text, text
        # KIP-1279 "Source cluster permissions": Read (implies Describe) and DescribeConfigs on the
        # topics, Describe on the groups and the cluster
        source.grant(topic_acl(topic, "User:mirror", AclOperation.READ),
                     topic_acl(topic, "User:mirror", AclOperation.DESCRIBE_CONFIGS),
                     AclBinding(ResourceType.GROUP, "*", ResourcePatternType.LITERAL, "User:mirror", "*",
                                AclOperation.DESCRIBE, AclPermissionType.ALLOW),
                     AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:mirror",
                                "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW))
        code, text = mirrors("--add", "--mirror", "dr", "--topic", topic)
        assert code == 0, text
        source_end = watermarks(source.plaintext, topic, 0)[1]
        wait_until(lambda: watermarks(dest.plaintext, topic, 0)[1] == source_end, "the mirror to catch up")
        assert log_batches(dest.cluster, topic, 0) == log_batches(source.cluster, topic, 0)
        # ACL sync read the source's bindings (Describe on the cluster) and wrote them here
        # through the destination's own listener
        wait_until(lambda: topic_acl(topic, "User:mirror", AclOperation.READ) in described_acls(dest),
                   "the topic's bindings copied to the destination")
    finally:
        dest.cluster.down()
        source.cluster.down()


def share_poll_outcome(config: dict[str, str], group: str, topic: str, want: int) -> tuple[list[bytes], str]:
    """What a share consumer as the config's principal gets within 20 s: up to `want` values, or
    the first error it reports (poll's error messages or exceptions)."""
    consumer = ShareConsumer({**config, "group.id": group})
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        deadline = time.monotonic() + 20
        while len(values) < want and time.monotonic() < deadline:
            try:
                for message in consumer.poll(0.5):
                    if message.error() is not None:
                        return values, message.error().name()
                    values.append(message.value())
            except KafkaException as exc:
                return values, exc.args[0].name()
    finally:
        consumer.close()
    return values, ""


def test_share_groups_need_read_on_the_group_and_the_topic(node: AuthorizedNode) -> None:
    create_topic(node, "work-queue")
    produce_values(node.client("admin"), "work-queue", [b"a", b"b", b"c"])
    assert share_poll_outcome(node.client("alice"), "workers", "work-queue", 3)[1] == "GROUP_AUTHORIZATION_FAILED"
    node.grant(AclBinding(ResourceType.GROUP, "workers", ResourcePatternType.LITERAL, "User:alice", "*",
                          AclOperation.READ, AclPermissionType.ALLOW))
    assert share_poll_outcome(node.client("alice"), "workers", "work-queue", 3)[1] == "TOPIC_AUTHORIZATION_FAILED"
    node.grant(topic_acl("work-queue", "User:alice", AclOperation.READ))
    earliest(node.plaintext, "workers")  # through the cluster's own listener
    assert share_poll_outcome(node.client("alice"), "workers", "work-queue", 3) == ([b"a", b"b", b"c"], "")


def test_topic_partitions_need_describe_and_config_resources_describe_configs(node: AuthorizedNode) -> None:
    from kafka.errors import ClusterAuthorizationFailedError

    create_topic(node, "paged-seen")
    create_topic(node, "paged-hidden")
    node.grant(topic_acl("paged-seen", "User:alice", AclOperation.DESCRIBE))
    alice = KafkaAdminClient(bootstrap_servers=node.sasl, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                             sasl_plain_username="alice", sasl_plain_password=USERS["alice"])
    try:
        named = {t["name"]: t for t in
                 alice.describe_topic_partitions(["paged-seen", "paged-hidden", "paged-absent"])["topics"]}
        assert named["paged-seen"]["error_code"] == ErrorCode.none
        assert [p["partition_index"] for p in named["paged-seen"]["partitions"]] == [0]
        assert named["paged-seen"]["topic_authorized_operations"] == 1 << int(AclOperation.DESCRIBE.value)
        # an undescribable topic and an absent one look the same: the existence is not revealed
        for name in ("paged-hidden", "paged-absent"):
            assert named[name]["error_code"] == ErrorCode.topic_authorization_failed, named[name]
            assert named[name]["topic_id"] is None and named[name]["partitions"] == []
        listed = {t["name"] for t in alice.describe_topic_partitions([])["topics"]}
        assert "paged-seen" in listed and "paged-hidden" not in listed

        with pytest.raises(ClusterAuthorizationFailedError):
            alice.list_config_resources(["TOPIC"])
        node.grant(AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:alice", "*",
                              AclOperation.DESCRIBE_CONFIGS, AclPermissionType.ALLOW))
        listing = alice.list_config_resources(["TOPIC", "BROKER"])
        assert {"paged-seen", "paged-hidden"} <= set(listing["topic"]) and listing["broker"] == ["1"]
    finally:
        alice.close()
