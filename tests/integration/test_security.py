"""TLS and SASL/PLAIN with real processes and real clients: a node with a PLAINTEXT and a
SASL_SSL listener (PEM certificates made with openssl in the test); confluent-kafka
produces and consumes through SASL_SSL and sees that listener's endpoints in Metadata; a
wrong password is refused with SASL_AUTHENTICATION_FAILED; a plaintext client on the TLS
port is disconnected while the node keeps serving; `kmirror mirrors --command-config`
works against the SASL_SSL listener. Mirroring from a SASL_SSL source copies byte-identical
batches; a wrong mirror password copies nothing more, leaves the broker healthy and logs
the refusal; restoring the password resumes the mirror."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient

from kmirror.client.connection import BrokerConnection
from kmirror.client.errors import KafkaAuthenticationError
from kmirror.security.client_config import client_security
from kmirror.testing.certs import GeneratedCertificates, make_certificates
from kmirror.testing.kafka_clients import consume_values, produce_values, watermarks
from kmirror.testing.metrics_scrape import metric_value
from kmirror.testing.mirror_clusters import clusters_up, create_mirror, wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror, write_properties
from kmirror.testing.segments import log_batches

pytestmark = pytest.mark.integration

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
BROKER_JAAS = f'{PLAIN_MODULE} required user_alice="alice-secret" user_mirror="mirror-secret";'


@dataclass
class SecureNode:
    cluster: LocalCluster
    certs: GeneratedCertificates

    @property
    def plaintext(self) -> str:
        return f"127.0.0.1:{self.cluster.port}"

    @property
    def sasl_ssl(self) -> str:
        return f"127.0.0.1:{self.cluster.port + 1}"

    def client(self, user: str = "alice", password: str = "alice-secret") -> dict[str, str]:
        return {"bootstrap.servers": self.sasl_ssl, "security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN",
                "sasl.username": user, "sasl.password": password, "ssl.ca.location": str(self.certs.ca_pem)}

    def java_client(self, user: str, password: str) -> dict[str, str]:
        """Kafka Java client names (mirror configs, --command-config)."""
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": f'{PLAIN_MODULE} required username="{user}" password="{password}";',
                "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.certs.ca_pem)}


def secure_node(directory: Path) -> SecureNode:
    certs = make_certificates(directory / "certs")
    port = free_port_block(2)
    cluster = LocalCluster(directory / "cluster", port, 1, {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{port + 1},"
                     f"CONTROLLER://127.0.0.1:{port + 100}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{port + 1}",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.server_pem),
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": BROKER_JAAS,
    })
    cluster.up()
    return SecureNode(cluster, certs)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureNode]:
    n = secure_node(tmp_path_factory.mktemp("secure"))
    try:
        yield n
    finally:
        n.cluster.down()


def test_confluent_kafka_produces_and_consumes_over_sasl_ssl(node: SecureNode) -> None:
    values = [f"secret record {i}".encode() for i in range(20)]
    produce_values(node.client(), "secured", values)
    assert consume_values(node.client(), "secured", len(values), "g-secured") == values
    # Metadata on the SASL_SSL listener advertises that listener's endpoint, not PLAINTEXT's.
    brokers = AdminClient(node.client()).list_topics(timeout=30).brokers
    assert [(b.host, b.port) for b in brokers.values()] == [("127.0.0.1", node.cluster.port + 1)]
    plain_brokers = AdminClient({"bootstrap.servers": node.plaintext}).list_topics(timeout=30).brokers
    assert [(b.host, b.port) for b in plain_brokers.values()] == [("127.0.0.1", node.cluster.port)]


def test_wrong_password_is_refused_with_an_authentication_error(node: SecureNode) -> None:
    errors: list[KafkaError] = []
    producer = Producer({**node.client(password="wrong"), "error_cb": errors.append})
    deadline = time.monotonic() + 60
    while not errors and time.monotonic() < deadline:
        producer.poll(0.5)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION
    assert "Invalid username or password" in errors[0].str()

    security = client_security(node.java_client("alice", "wrong"))
    conn = BrokerConnection("127.0.0.1", node.cluster.port + 1, security=security)
    with pytest.raises(KafkaAuthenticationError) as refused:
        asyncio.run(conn.connect())
    assert refused.value.error_code == 58  # SASL_AUTHENTICATION_FAILED
    assert "Invalid username or password" in str(refused.value)
    assert "failed: Authentication failed: Invalid username or password" in node.cluster.log_text()


def test_plaintext_client_on_the_tls_port_is_disconnected_and_the_node_keeps_serving(node: SecureNode) -> None:
    api_versions_v0 = struct.pack(">hhi", 18, 0, 7) + struct.pack(">h", 4) + b"test"
    with socket.create_connection(("127.0.0.1", node.cluster.port + 1), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(api_versions_v0)) + api_versions_v0)
        try:
            answer = sock.recv(4096)
        except ConnectionResetError:
            answer = b""
        # a TLS alert at most, never a Kafka response
        assert answer == b"" or answer[:1] == b"\x15"
    values = [b"after the plaintext attempt"]
    produce_values(node.client(), "still-serving", values)
    assert consume_values(node.client(), "still-serving", 1, "g-still") == values
    assert watermarks(node.plaintext, "still-serving", 0)[1] == 1


def test_mirrors_cli_command_config_speaks_sasl_ssl(node: SecureNode, tmp_path: Path) -> None:
    kmirror("features", "--bootstrap-server", node.plaintext, "upgrade", "--feature", "mirror.version=1")
    props = tmp_path / "client.properties"
    write_properties(props, node.java_client("alice", "alice-secret"))
    out = kmirror("mirrors", "--bootstrap-server", node.sasl_ssl, "--command-config", str(props), "--list")
    assert out.returncode == 0 and out.stdout.startswith("MIRROR")
    write_properties(props, node.java_client("alice", "nope"))
    refused = kmirror("mirrors", "--bootstrap-server", node.sasl_ssl, "--command-config", str(props), "--list",
                      check=False)
    assert refused.returncode != 0 and "SASL_AUTHENTICATION_FAILED" in refused.stderr


REFRESH_ERRORS = "kafka_server_mirror_mirrormetadatamanager_metadatarefresherror"


def set_source_password(source: SecureNode, old: str, new: str) -> None:
    """Restart the source node with the mirror user's password changed (credential rotation)."""
    source.cluster.down()
    path = source.cluster.dir / "node-1" / "server.properties"
    path.write_text(path.read_text().replace(f'user_mirror="{old}"', f'user_mirror="{new}"'))
    source.cluster.start_node(1)


def test_mirror_from_a_sasl_ssl_source(tmp_path: Path) -> None:
    topic = "mirrored-secure"
    source = secure_node(tmp_path / "source")
    # the manager retries a refusing source every refresh interval (KIP default 30 s)
    metrics_port = free_port_block()
    dest = LocalCluster(tmp_path / "dest", free_port_block(), overrides={"mirror.metadata.refresh.interval.ms": "500",
                                                                         "metrics.port": str(metrics_port)})
    try:
        dest.up()
        kmirror("topics", "--bootstrap-server", source.plaintext, "--create", "--topic", topic,
                "--partitions", "1", "--replication-factor", "1")
        produce_values(source.client(), topic, [f"first {i}".encode() * 5 for i in range(30)])
        create_mirror(dest, source.sasl_ssl, "sec", topic, tmp_path / "mirror.properties",
                      source.java_client("mirror", "mirror-secret"))
        source_end = watermarks(source.plaintext, topic, 0)[1]
        wait_until(lambda: watermarks(dest.bootstrap, topic, 0)[1] == source_end, "the mirror to catch up")
        wait_until(lambda: log_batches(dest, topic, 0) == log_batches(source.cluster, topic, 0),
                   "byte-identical batches")
        assert log_batches(dest, topic, 0)

        # The source no longer accepts the mirror's password: nothing more is copied, the
        # destination logs the refusal and keeps serving.
        set_source_password(source, "mirror-secret", "rotated")
        produce_values(source.client(), topic, [f"second {i}".encode() for i in range(10)])
        new_end = watermarks(source.plaintext, topic, 0)[1]
        wait_until(lambda: "refused authentication" in dest.log_text(), "the refusal in the broker log")
        # three more refused attempts to reach the source, each of which would copy them if it worked
        refused = metric_value(metrics_port, REFRESH_ERRORS) or 0
        wait_until(lambda: (metric_value(metrics_port, REFRESH_ERRORS) or 0) >= refused + 3,
                   "three more refused source lookups")
        assert watermarks(dest.bootstrap, topic, 0)[1] == source_end
        assert dest.serving()
        produce_values({"bootstrap.servers": dest.bootstrap}, "local-topic", [b"the destination still serves"])

        # The password is accepted again: mirroring resumes where it stopped, same bytes.
        set_source_password(source, "rotated", "mirror-secret")
        wait_until(lambda: watermarks(dest.bootstrap, topic, 0)[1] == new_end, "the mirror to resume")
        wait_until(lambda: log_batches(dest, topic, 0) == log_batches(source.cluster, topic, 0),
                   "byte-identical batches after resuming")
    finally:
        dest.down()
        source.cluster.down()


def test_a_mirror_with_a_wrong_password_cannot_add_topics(node: SecureNode, tmp_path: Path) -> None:
    dest = LocalCluster(tmp_path / "dest", free_port_block())
    with clusters_up(dest):
        create_mirror(dest, node.sasl_ssl, "bad", None, tmp_path / "bad.properties", node.java_client("mirror", "wrong"))
        out = kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--add", "--mirror", "bad",
                      "--topic", "secured", check=False)
        assert out.returncode != 0 and "SASL_AUTHENTICATION_FAILED" in out.stderr + out.stdout
        assert dest.serving()
