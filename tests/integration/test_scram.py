"""SASL/SCRAM with real processes and real clients: SCRAM users are created with
`kmirror configs --entity-type users` (credentials in the metadata log); confluent-kafka
producers and consumers log in with SCRAM-SHA-256 and SCRAM-SHA-512 over SASL_PLAINTEXT; a
wrong password, a deleted credential and a mechanism the listener does not enable are refused
with an authentication error while the node keeps serving; a mirror reads its source through
SCRAM with byte-identical batches; kafka-python and aiokafka log in with SCRAM too."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import KafkaError, Producer
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError as KafkaPythonError

from kmirror.client.connection import BrokerConnection
from kmirror.testing.kafka_clients import consume_values, produce_values
from kmirror.testing.mirror_clusters import wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror
from kmirror.testing.secured_mirrors import mirrored_through

pytestmark = pytest.mark.integration

SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass
class ScramNode:
    cluster: LocalCluster

    @property
    def plaintext(self) -> str:
        return f"127.0.0.1:{self.cluster.port}"

    @property
    def sasl_plaintext(self) -> str:
        return f"127.0.0.1:{self.cluster.port + 1}"

    def client(self, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> dict[str, str]:
        return {"bootstrap.servers": self.sasl_plaintext, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanisms": mechanism, "sasl.username": user, "sasl.password": password}

    def java_client(self, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> dict[str, str]:
        return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                "sasl.jaas.config": f'{SCRAM_MODULE} required username="{user}" password="{password}";'}

    def configs(self, *args: str, check: bool = True) -> str:
        out = kmirror("configs", "--bootstrap-server", self.plaintext, "--entity-type", "users", *args, check=check)
        return out.stdout + out.stderr


def scram_node(directory: Path) -> ScramNode:
    port = free_port_block(2)
    cluster = LocalCluster(directory, port, 1, {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{port + 1},"
                     f"CONTROLLER://127.0.0.1:{port + 100}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{port + 1}",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
    })
    cluster.up()
    return ScramNode(cluster)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScramNode]:
    n = scram_node(tmp_path_factory.mktemp("scram"))
    try:
        n.configs("--entity-name", "alice", "--alter", "--add-config",
                  "SCRAM-SHA-256=[iterations=8192,password=alice-secret]")
        n.configs("--entity-name", "bob", "--alter", "--add-config", "SCRAM-SHA-512=[password=bob-secret]")
        yield n
    finally:
        n.cluster.down()


def auth_error(config: dict[str, str]) -> KafkaError:
    errors: list[KafkaError] = []
    producer = Producer({**config, "error_cb": errors.append})
    deadline = time.monotonic() + 60
    while not errors and time.monotonic() < deadline:
        producer.poll(0.5)
    assert errors, "no error reported"
    return errors[0]


@pytest.mark.parametrize("user, password, mechanism", [
    ("alice", "alice-secret", "SCRAM-SHA-256"), ("bob", "bob-secret", "SCRAM-SHA-512")])
def test_confluent_kafka_produces_and_consumes_with_scram(node: ScramNode, user: str, password: str,
                                                          mechanism: str) -> None:
    topic = f"scram-{mechanism.lower()}"
    values = [f"{user} {i}".encode() for i in range(20)]
    config = node.client(user, password, mechanism)
    produce_values(config, topic, values)
    assert consume_values(config, topic, len(values), f"g-{user}") == values


def test_describe_lists_mechanisms_and_iterations_never_secrets(node: ScramNode) -> None:
    out = node.configs("--describe", "--entity-name", "alice")
    assert "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192" in out
    everyone = node.configs("--describe")
    assert "'bob' are SCRAM-SHA-512=iterations=4096" in everyone and "secret" not in everyone


@pytest.mark.parametrize("config", [
    {"user": "alice", "password": "wrong", "mechanism": "SCRAM-SHA-256"},
    {"user": "alice", "password": "alice-secret", "mechanism": "SCRAM-SHA-512"},  # no 512 credential
    {"user": "nobody", "password": "x", "mechanism": "SCRAM-SHA-256"},
])
def test_bad_credentials_are_refused_with_an_authentication_error(node: ScramNode, config: dict[str, str]) -> None:
    err = auth_error(node.client(**config))
    assert err.code() == KafkaError._AUTHENTICATION, err.str()
    produce_values(node.client("alice", "alice-secret"), "still-serving", [b"after a refused login"])


def test_a_mechanism_the_listener_does_not_enable_is_refused(node: ScramNode) -> None:
    err = auth_error(node.client("alice", "alice-secret", "PLAIN"))
    assert err.code() == KafkaError._AUTHENTICATION or "mechanism" in err.str().lower(), err.str()


def test_alter_errors_are_kafkas(node: ScramNode) -> None:
    few = node.configs("--entity-name", "carol", "--alter", "--add-config", "SCRAM-SHA-256=[iterations=100,password=p]",
                       check=False)
    assert "UNACCEPTABLE_CREDENTIAL" in few and "Too few iterations" in few
    missing = node.configs("--entity-name", "carol", "--alter", "--delete-config", "SCRAM-SHA-512", check=False)
    assert "RESOURCE_NOT_FOUND" in missing


def test_deleted_credential_no_longer_logs_in(node: ScramNode) -> None:
    node.configs("--entity-name", "dave", "--alter", "--add-config", "SCRAM-SHA-256=[password=dave-secret]")
    produce_values(node.client("dave", "dave-secret"), "dave-topic", [b"before deletion"])
    node.configs("--entity-name", "dave", "--alter", "--delete-config", "SCRAM-SHA-256")
    assert auth_error(node.client("dave", "dave-secret")).code() == KafkaError._AUTHENTICATION


@pytest.mark.slow
def test_mirror_from_a_scram_source(tmp_path: Path) -> None:
    source = scram_node(tmp_path / "source")
    try:
        source.configs("--entity-name", "mirror", "--alter", "--add-config",
                       "SCRAM-SHA-512=[iterations=4096,password=mirror-secret]")
        with mirrored_through(source.cluster, source.sasl_plaintext,
                              source.java_client("mirror", "mirror-secret", "SCRAM-SHA-512"), tmp_path,
                              "mirrored-scram", "none"):
            pass
    finally:
        source.cluster.down()


def test_kafka_python_and_aiokafka_log_in_with_scram(node: ScramNode) -> None:
    common = {"bootstrap_servers": node.sasl_plaintext, "security_protocol": "SASL_PLAINTEXT",
              "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "bob", "sasl_plain_password": "bob-secret"}
    producer = KafkaProducer(**common)
    producer.send("scram-kafka-python", b"from kafka-python").get(timeout=60)
    producer.close()
    consumer = KafkaConsumer("scram-kafka-python", group_id="g-kp", auto_offset_reset="earliest",
                             consumer_timeout_ms=30_000, **common)
    assert next(iter(consumer)).value == b"from kafka-python"
    consumer.close()
    refused = "failed: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"
    refusals = node.cluster.log_text().count(refused)
    with pytest.raises(KafkaPythonError):  # kafka-python retries refused logins until its bootstrap times out
        KafkaProducer(**{**common, "sasl_plain_password": "wrong", "bootstrap_timeout_ms": 5000})
    assert node.cluster.log_text().count(refused) > refusals  # refused as a wrong password, not unreachable

    async def aiokafka_round_trip() -> bytes:
        config = {"bootstrap_servers": node.sasl_plaintext, "security_protocol": "SASL_PLAINTEXT",
                  "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": "alice",
                  "sasl_plain_password": "alice-secret"}
        aio_producer = AIOKafkaProducer(**config)
        await aio_producer.start()
        try:
            await aio_producer.send_and_wait("scram-aiokafka", b"from aiokafka")
        finally:
            await aio_producer.stop()
        aio_consumer = AIOKafkaConsumer("scram-aiokafka", group_id="g-aio", auto_offset_reset="earliest", **config)
        await aio_consumer.start()
        try:
            msg = await asyncio.wait_for(aio_consumer.getone(), 60)
        finally:
            await aio_consumer.stop()
        return bytes(msg.value or b"")

    assert asyncio.run(aiokafka_round_trip()) == b"from aiokafka"


def test_credentials_replicate_to_every_broker_of_a_three_broker_cluster(tmp_path: Path) -> None:
    """Broker-only nodes forward AlterUserScramCredentials to the controller and serve
    DescribeUserScramCredentials (and SCRAM logins) from their own replica of the metadata log."""
    cluster = LocalCluster(tmp_path / "three", free_port_block(3), 3)
    cluster.up()
    try:
        for node_id in (2, 3):
            out = kmirror("configs", "--bootstrap-server", f"127.0.0.1:{cluster.port + node_id - 1}",
                          "--entity-type", "users", "--entity-name", f"user{node_id}", "--alter", "--add-config",
                          "SCRAM-SHA-512=[iterations=5000,password=p]")
            assert "Completed updating config for user" in out.stdout
        for node_id in (1, 2, 3):
            port = cluster.port + node_id - 1
            wait_until(lambda p=port: described_on(p) == {"user2": [(2, 5000)], "user3": [(2, 5000)]},
                       f"broker {node_id} to describe both users")
    finally:
        cluster.down()


def described_on(port: int) -> dict[str, list[tuple[int, int]]]:
    """DescribeUserScramCredentials answered by the broker at `port` itself."""
    async def ask() -> dict[str, list[tuple[int, int]]]:
        conn = BrokerConnection("127.0.0.1", port)
        await conn.connect()
        try:
            response = await conn.send(conn.build_request(50, users=None))
        finally:
            await conn.close()
        return {r.user: [(int(c.mechanism), int(c.iterations)) for c in r.credential_infos] for r in response.results}
    return asyncio.run(ask())
