"""SASL/GSSAPI (Kerberos) with real processes, a real KDC (MIT krb5kdc, `kmirror.testing.kdc`)
and real clients: kcat (librdkafka with Cyrus SASL), kafka-python and aiokafka produce and consume
as Kerberos principals; `kmirror topics` logs in from a keytab through a `--command-config`; a
ticket for another service is refused with SASL_AUTHENTICATION_FAILED while the node keeps
serving; `sasl.kerberos.principal.to.local.rules` names the users; a mirror reads its
Kerberos source with byte-identical batches (the KIP's "Security Validation" with Kerberos);
and after a SaslHandshake v0 the listener takes bare tokens (the legacy framing)."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from kafka import KafkaConsumer, KafkaProducer

from kmirror.protocol.entities import build
from kmirror.security.plain import plain_client_token
from kmirror.testing.hostile import decode_response, encode_request, load_request_schema, recv_frame
from kmirror.testing.kdc import TOOLS, Kdc
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror, write_properties
from kmirror.testing.secured_mirrors import mirrored_through

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(any(shutil.which(t) is None and not os.path.exists(f"/usr/sbin/{t}") for t in TOOLS)
                       or importlib.util.find_spec("gssapi") is None,
                       reason="MIT Kerberos (krb5-kdc, krb5-user) or the gssapi package not installed"),
]

KRB5_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
# two-part principals of the service "mirror" are the user dr-mirror; others by the default rule
RULES = "RULE:[2:$1](mirror)s/^.*$/dr-mirror/,DEFAULT"


@dataclass
class KerberosNode:
    kdc: Kdc
    cluster: LocalCluster
    dir: Path

    @property
    def plaintext(self) -> str:
        return f"127.0.0.1:{self.cluster.port}"

    @property
    def gssapi(self) -> str:
        return f"127.0.0.1:{self.cluster.port + 1}"

    def keytab(self, name: str) -> Path:
        return keytab(self.kdc, self.dir, name)

    def java_client(self, name: str, service: str = "kafka") -> dict[str, str]:
        return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI",
                "sasl.kerberos.service.name": service,
                "sasl.jaas.config": f'{KRB5_MODULE} required useKeyTab=true storeKey=true '
                                    f'keyTab="{self.keytab(name)}" principal="{self.kdc.principal(name)}";'}

    def command_config(self, name: str, service: str = "kafka") -> Path:
        return write_properties(self.dir / f"{name.replace('/', '_')}-{service}.properties", self.java_client(name, service))

    def kcat(self, name: str, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            ["kcat", "-b", self.gssapi, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=GSSAPI",
             "-X", "sasl.kerberos.service.name=kafka", "-X", f"sasl.kerberos.keytab={self.keytab(name)}",
             "-X", f"sasl.kerberos.principal={self.kdc.principal(name)}", *args],
            input=stdin, capture_output=True, timeout=120,
            env={**os.environ, "KRB5CCNAME": f"FILE:{self.dir / (name.replace('/', '_') + '.ccache')}"})


def keytab(kdc: Kdc, directory: Path, name: str) -> Path:
    """A keytab of the principal `name` in `directory` (created in the KDC on first use)."""
    path = directory / f"{name.replace('/', '_')}.keytab"
    if not path.exists():
        kdc.add_principal(name, path)
    return path


def kerberos_node(kdc: Kdc, directory: Path) -> KerberosNode:
    port = free_port_block(2)
    directory.mkdir(parents=True, exist_ok=True)
    broker_keytab = keytab(kdc, directory, "kafka/127.0.0.1")
    cluster = LocalCluster(directory / "cluster", port, 1, {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{port + 1},"
                     f"CONTROLLER://127.0.0.1:{port + 100}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{port + 1}",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "GSSAPI,PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_carol="carol-secret";',
        "sasl.kerberos.service.name": "kafka",
        "sasl.kerberos.principal.to.local.rules": RULES,
        "listener.name.sasl_plaintext.gssapi.sasl.jaas.config":
            f'{KRB5_MODULE} required useKeyTab=true storeKey=true keyTab="{broker_keytab}" '
            f'principal="{kdc.principal("kafka/127.0.0.1")}";',
    })
    cluster.up()
    return KerberosNode(kdc, cluster, directory)


@pytest.fixture(scope="module")
def kdc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kdc]:
    """The realm's KDC; this process and the nodes it starts find it through KRB5_CONFIG."""
    with Kdc(tmp_path_factory.mktemp("kdc")) as running:
        saved = os.environ.get("KRB5_CONFIG")
        os.environ["KRB5_CONFIG"] = str(running.krb5_conf)
        try:
            yield running
        finally:
            if saved is None:
                os.environ.pop("KRB5_CONFIG", None)
            else:
                os.environ["KRB5_CONFIG"] = saved


@pytest.fixture(scope="module")
def node(kdc: Kdc, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KerberosNode]:
    n = kerberos_node(kdc, tmp_path_factory.mktemp("kerberos"))
    try:
        yield n
    finally:
        n.cluster.down()


def test_kcat_produces_and_consumes_as_a_kerberos_principal(node: KerberosNode) -> None:
    topic = "krb-kcat"
    kmirror("topics", "--bootstrap-server", node.gssapi, "--command-config", str(node.command_config("admin")),
            "--create", "--topic", topic, "--partitions", "1", "--replication-factor", "1")
    produced = node.kcat("alice", "-P", "-t", topic, "-p", "0", stdin=b"one\ntwo\nthree\n")
    assert produced.returncode == 0, produced.stderr.decode()[-2000:]
    consumed = node.kcat("alice", "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%o %s\n")
    assert consumed.returncode == 0, consumed.stderr.decode()[-2000:]
    assert consumed.stdout.decode().splitlines() == ["0 one", "1 two", "2 three"]
    log = node.cluster.log_text()
    assert "on listener SASL_PLAINTEXT authenticated as User:alice" in log
    assert "on listener SASL_PLAINTEXT authenticated as User:admin" in log  # the CLI's keytab login


def test_kafka_python_and_aiokafka_log_in_from_a_ticket_cache(node: KerberosNode,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    topic = "krb-kafka-python"
    ccache = node.dir / "bob-kinit.ccache"
    node.kdc.kinit(node.kdc.principal("bob"), node.keytab("bob"), ccache)
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{ccache}")
    common = {"bootstrap_servers": node.gssapi, "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "GSSAPI",
              "sasl_kerberos_service_name": "kafka"}
    producer = KafkaProducer(**common)
    producer.send(topic, b"from kafka-python").get(timeout=60)
    producer.close()
    consumer = KafkaConsumer(topic, group_id="g-krb", auto_offset_reset="earliest", consumer_timeout_ms=30_000,
                             **common)
    assert next(iter(consumer)).value == b"from kafka-python"
    consumer.close()
    assert "authenticated as User:bob" in node.cluster.log_text()

    async def aiokafka_round_trip() -> bytes:
        config = {"bootstrap_servers": node.gssapi, "security_protocol": "SASL_PLAINTEXT",
                  "sasl_mechanism": "GSSAPI", "sasl_kerberos_service_name": "kafka"}
        producer = AIOKafkaProducer(**config)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"from aiokafka", partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id="g-krb-aio", auto_offset_reset="earliest", **config)
        await consumer.start()
        try:
            values = []
            while b"from aiokafka" not in values:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 60)
                values += [r.value for records in batch.values() for r in records]
            return values[0]
        finally:
            await consumer.stop()

    assert asyncio.run(aiokafka_round_trip()) == b"from kafka-python"  # the partition's first record


def test_a_ticket_for_another_service_is_refused_and_the_node_keeps_serving(node: KerberosNode) -> None:
    node.keytab("other/127.0.0.1")  # the service exists in the realm, so the client gets a ticket for it
    refused = kmirror("topics", "--bootstrap-server", node.gssapi, "--list",
                      "--command-config", str(node.command_config("alice", service="other")), check=False)
    assert refused.returncode != 0
    message = refused.stderr.strip().splitlines()
    assert len(message) == 1 and "SASL_AUTHENTICATION_FAILED" in message[0], refused.stderr
    assert "Authentication failed during authentication due to invalid credentials with SASL mechanism GSSAPI" \
        in node.cluster.log_text()
    served = kmirror("topics", "--bootstrap-server", node.gssapi, "--list",
                     "--command-config", str(node.command_config("alice")))
    assert served.returncode == 0


def test_principal_to_local_rules_name_the_user(node: KerberosNode) -> None:
    kmirror("topics", "--bootstrap-server", node.gssapi, "--list",
            "--command-config", str(node.command_config("mirror/dr-site")))
    assert "authenticated as User:dr-mirror" in node.cluster.log_text()


def test_mirror_from_a_kerberos_source(kdc: Kdc, tmp_path: Path) -> None:
    source = kerberos_node(kdc, tmp_path / "source")
    try:
        with mirrored_through(source.cluster, source.gssapi, source.java_client("mirror/dr-site"), tmp_path,
                              "mirrored-krb", "zstd"):
            assert "authenticated as User:dr-mirror" in source.cluster.log_text()
    finally:
        source.cluster.down()


def _handshake_v0(sock: socket.socket, mechanism: str) -> int:
    sock.sendall(encode_request(17, 0, 1, build(load_request_schema(17, 0), mechanism=mechanism)))
    frame = recv_frame(sock)
    assert frame is not None
    return int(decode_response(17, 0, frame).error_code)


def test_sasl_handshake_v0_takes_bare_tokens(node: KerberosNode) -> None:
    """Kafka's framing before SaslAuthenticate (librdkafka asks for v0 in ApiVersions' range)."""
    with socket.create_connection(("127.0.0.1", node.cluster.port + 1), timeout=30) as sock:
        assert _handshake_v0(sock, "PLAIN") == 0
        token = plain_client_token("carol", "carol-secret")
        sock.sendall(len(token).to_bytes(4, "big") + token)
        assert recv_frame(sock) == b""  # PLAIN's empty answer, as a bare frame
        sock.sendall(encode_request(3, 1, 2, build(load_request_schema(3, 1), topics=())))
        frame = recv_frame(sock)
        assert frame is not None and decode_response(3, 1, frame).brokers  # authenticated: Metadata answered
    assert "authenticated as User:carol" in node.cluster.log_text()
    with socket.create_connection(("127.0.0.1", node.cluster.port + 1), timeout=30) as sock:
        assert _handshake_v0(sock, "PLAIN") == 0
        token = plain_client_token("carol", "wrong")
        sock.sendall(len(token).to_bytes(4, "big") + token)
        assert recv_frame(sock) is None  # refused: closed without an answer


def test_a_keytab_without_the_broker_principal_refuses_the_start(kdc: Kdc, tmp_path: Path) -> None:
    port = free_port_block(2)
    stray = tmp_path / "stray.keytab"
    kdc.add_principal("stray", stray)
    cluster = LocalCluster(tmp_path / "cluster", port, 1, {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{port + 1},"
                     f"CONTROLLER://127.0.0.1:{port + 100}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{port + 1}",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "GSSAPI",
        "sasl.kerberos.service.name": "kafka",
        "listener.name.sasl_plaintext.gssapi.sasl.jaas.config":
            f'{KRB5_MODULE} required useKeyTab=true keyTab="{stray}" principal="{kdc.principal("kafka/127.0.0.1")}";',
    })
    try:
        with pytest.raises(AssertionError, match="node 1 exited with 1"):
            cluster.up()
        errors = [line for line in cluster.log_text().splitlines() if line.startswith("Error: ")]
        assert len(errors) == 1 and errors[0].startswith(
            f"Error: cannot read the key of kafka/127.0.0.1@{kdc.realm} from keytab {stray}: "), errors
        assert "No key table entry found" in errors[0] and "Traceback" not in cluster.log_text()
    finally:
        cluster.down()
