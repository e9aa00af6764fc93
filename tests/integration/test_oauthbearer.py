"""SASL/OAUTHBEARER with real processes, a real identity provider (an HTTP token endpoint and
JWK Set, `kmirror.testing.oidc`) and real clients. One node has two OAUTHBEARER listeners:
SASL_PLAINTEXT checks signed JWTs against the provider's keys (Kafka's
OAuthBearerValidatorCallbackHandler), UNSECURED takes Kafka's unsecured tokens with a required
scope. confluent-kafka logs in through the provider (librdkafka's OIDC client credentials) and
with an unsecured token, kafka-python and aiokafka with token providers; `kmirror topics` logs
in through the provider; refused tokens get SASL_AUTHENTICATION_FAILED while the node keeps
serving; the broker follows the provider's key rotation; and a mirror reads its source through
OAuth with byte-identical batches, its connections re-authenticating as their sessions end (KIP-368).
Clients that re-authenticate (librdkafka, kmirror's client) keep their connections past
`connections.max.reauth.ms`; a connection that does not is closed at its next request."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.abc import AbstractTokenProvider as AioTokenProvider
from confluent_kafka import KafkaError, Producer
from kafka import KafkaConsumer, KafkaProducer
from kafka.net.sasl.oauth import AbstractTokenProvider

from kmirror.protocol.entities import build
from kmirror.security.jwt import unsecured_token
from kmirror.security.oauthbearer import client_initial_response
from kmirror.testing.certs import make_certificates
from kmirror.testing.hostile import decode_response, encode_request, load_request_schema, recv_frame
from kmirror.testing.kafka_clients import consume_values, produce_values
from kmirror.testing.mirror_clusters import wait_until
from kmirror.testing.oidc import AUDIENCE, IdentityProvider
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror, write_properties
from kmirror.testing.secured_mirrors import mirrored_through, wait_byte_identical

pytestmark = pytest.mark.integration

MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
CLIENTS = {"app": "app-secret", "ops": "ops-secret", "mirror": "mirror-secret"}
REAUTH_MS = 3000  # the UNSECURED listener's connections.max.reauth.ms (KIP-368)


@dataclass
class OAuthNode:
    idp: IdentityProvider
    cluster: LocalCluster

    @property
    def plaintext(self) -> str:
        return f"127.0.0.1:{self.cluster.port}"

    @property
    def signed(self) -> str:
        return f"127.0.0.1:{self.cluster.port + 1}"

    @property
    def unsecured(self) -> str:
        return f"127.0.0.1:{self.cluster.port + 2}"

    def java_client(self, client_id: str, idp: IdentityProvider | None = None) -> dict[str, str]:
        secret = CLIENTS.get(client_id, "unknown")
        return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                "sasl.login.callback.handler.class":
                    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
                "sasl.oauthbearer.token.endpoint.url": (idp or self.idp).token_endpoint,
                "sasl.jaas.config": f'{MODULE} required clientId="{client_id}" clientSecret="{secret}" scope="kafka";'}

    def command_config(self, directory: Path, client: dict[str, str]) -> Path:
        return write_properties(directory / f"client-{abs(hash(tuple(client.items())))}.properties", client)

    def topics(self, bootstrap: str, config: Path, *args: str, check: bool = True) -> tuple[int, str]:
        out = kmirror("topics", "--bootstrap-server", bootstrap, "--command-config", str(config), *args, check=check)
        return out.returncode, out.stdout + out.stderr


def oauth_node(idp: IdentityProvider, directory: Path, extra: dict[str, str] | None = None) -> OAuthNode:
    port = free_port_block(3)
    cluster = LocalCluster(directory, port, 1, {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{port + 1},"
                     f"UNSECURED://127.0.0.1:{port + 2},CONTROLLER://127.0.0.1:{port + 100}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{port + 1},"
                                f"UNSECURED://127.0.0.1:{port + 2}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "UNSECURED:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": f"{MODULE} required;",
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
        "sasl.oauthbearer.jwks.endpoint.url": idp.jwks_url,
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": idp.issuer,
        "listener.name.unsecured.oauthbearer.sasl.jaas.config":
            f'{MODULE} required unsecuredValidatorRequiredScope="kafka";',
        "listener.name.unsecured.oauthbearer.connections.max.reauth.ms": str(REAUTH_MS),
        **(extra or {}),
    })
    cluster.up()
    return OAuthNode(idp, cluster)


@pytest.fixture(scope="module")
def idp() -> Iterator[IdentityProvider]:
    with IdentityProvider(dict(CLIENTS)) as provider:
        yield provider


@pytest.fixture(scope="module")
def node(idp: IdentityProvider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OAuthNode]:
    n = oauth_node(idp, tmp_path_factory.mktemp("oauth"))
    try:
        yield n
    finally:
        n.cluster.down()


def test_confluent_kafka_logs_in_through_the_identity_provider(node: OAuthNode) -> None:
    topic = "oauth-oidc"
    config = {"bootstrap.servers": node.signed, "security.protocol": "SASL_PLAINTEXT",
              "sasl.mechanisms": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
              "sasl.oauthbearer.client.id": "app", "sasl.oauthbearer.client.secret": "app-secret",
              "sasl.oauthbearer.scope": "kafka", "sasl.oauthbearer.token.endpoint.url": node.idp.token_endpoint}
    kmirror("topics", "--bootstrap-server", node.plaintext, "--create", "--topic", topic,
            "--partitions", "1", "--replication-factor", "1")
    values = [f"oidc {i}".encode() for i in range(20)]
    produce_values(config, topic, values)
    assert consume_values(config, topic, len(values), "g-oidc") == values
    assert "on listener SASL_PLAINTEXT authenticated as User:app" in node.cluster.log_text()


def test_refused_tokens_get_an_authentication_error_and_the_node_keeps_serving(node: OAuthNode,
                                                                                tmp_path: Path) -> None:
    # an unsecured token on the listener that wants signed ones
    unsecured = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                 "sasl.jaas.config": f'{MODULE} required unsecuredLoginStringClaim_sub="mallory";'}
    code, out = node.topics(node.signed, node.command_config(tmp_path, unsecured), "--list", check=False)
    assert code == 1 and len(out.strip().splitlines()) == 1, out
    assert "SASL_AUTHENTICATION_FAILED" in out and '{"status":"invalid_token"}' in out
    # a token signed by another provider's key under the same key id
    with IdentityProvider(dict(CLIENTS)) as impostor:
        code, out = node.topics(node.signed, node.command_config(tmp_path, node.java_client("ops", impostor)),
                                "--list", check=False)
    assert code == 1 and "SASL_AUTHENTICATION_FAILED" in out and "invalid_token" in out, out
    # a secret the provider refuses: the client's own error, before the broker is asked
    code, out = node.topics(node.signed, node.command_config(tmp_path, node.java_client("nobody")), "--list",
                            check=False)
    assert code == 1 and "HTTP 401" in out, out
    # librdkafka with an unsecured token, refused on the signed listener
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": node.signed, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanisms": "OAUTHBEARER", "sasl.oauthbearer.config": "principal=mallory",
                         "enable.sasl.oauthbearer.unsecure.jwt": True,
                         "error_cb": errors.append})
    deadline = time.monotonic() + 30
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) and time.monotonic() < deadline:
        producer.poll(0.2)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    code, out = node.topics(node.signed, node.command_config(tmp_path, node.java_client("ops")), "--list")
    assert code == 0
    assert "authenticated as User:ops" in node.cluster.log_text()


def test_the_broker_follows_the_providers_key_rotation(node: OAuthNode, tmp_path: Path) -> None:
    config = node.command_config(tmp_path, node.java_client("ops"))
    assert node.topics(node.signed, config, "--list")[0] == 0
    node.idp.rotate()  # new tokens are signed with key-2, which the broker has not fetched yet
    wait_until(lambda: node.topics(node.signed, node.command_config(tmp_path, node.java_client("app")), "--list",
                                   check=False)[0] == 0, "the broker to fetch the rotated key", timeout_s=60)


def _unsecured(subject: str, scope: str) -> str:
    now = int(time.time())
    return unsecured_token({"sub": subject, "scope": scope, "iat": now, "exp": now + 600})


class UnsecuredTokens(AbstractTokenProvider):  # type: ignore[misc]
    def __init__(self, subject: str, scope: str) -> None:
        self.subject, self.scope = subject, scope

    def token(self) -> str:
        return _unsecured(self.subject, self.scope)


class AioUnsecuredTokens(AioTokenProvider):  # type: ignore[misc]
    def __init__(self, subject: str, scope: str) -> None:
        self.subject, self.scope = subject, scope

    async def token(self) -> str:
        return _unsecured(self.subject, self.scope)


def test_unsecured_tokens_with_the_required_scope(node: OAuthNode) -> None:
    topic = "oauth-unsecured"
    config = {"bootstrap.servers": node.unsecured, "security.protocol": "SASL_PLAINTEXT",
              "sasl.mechanisms": "OAUTHBEARER", "sasl.oauthbearer.config": "principal=carol scope=kafka",
              "enable.sasl.oauthbearer.unsecure.jwt": "true"}
    kmirror("topics", "--bootstrap-server", node.plaintext, "--create", "--topic", topic,
            "--partitions", "1", "--replication-factor", "1")
    produce_values(config, topic, [b"unsecured"])
    common = {"bootstrap_servers": node.unsecured, "security_protocol": "SASL_PLAINTEXT",
              "sasl_mechanism": "OAUTHBEARER"}
    producer = KafkaProducer(sasl_oauth_token_provider=UnsecuredTokens("dave", "kafka"), **common)
    producer.send(topic, b"from kafka-python").get(timeout=60)
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=30_000,
                             sasl_oauth_token_provider=UnsecuredTokens("dave", "kafka"), **common)
    assert [r.value for _, r in zip(range(2), consumer, strict=False)] == [b"unsecured", b"from kafka-python"]
    consumer.close()
    log = node.cluster.log_text()
    assert "on listener UNSECURED authenticated as User:carol" in log and "authenticated as User:dave" in log
    refusals = log.count("on listener UNSECURED failed")
    with pytest.raises(Exception):  # noqa: B017 (kafka-python retries the refused login until its bootstrap ends)
        KafkaProducer(sasl_oauth_token_provider=UnsecuredTokens("erin", "read"), bootstrap_timeout_ms=5000,
                      **common)
    assert node.cluster.log_text().count("on listener UNSECURED failed") > refusals

    async def aiokafka_send() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=node.unsecured, security_protocol="SASL_PLAINTEXT",
                                    sasl_mechanism="OAUTHBEARER",
                                    sasl_oauth_token_provider=AioUnsecuredTokens("frank", "kafka"))
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"from aiokafka", partition=0)
        finally:
            await producer.stop()

    asyncio.run(aiokafka_send())
    assert "authenticated as User:frank" in node.cluster.log_text()
    assert consume_values({"bootstrap.servers": node.plaintext}, topic, 3, "g-unsecured")[2] == b"from aiokafka"


def test_mirror_from_an_oauth_source(idp: IdentityProvider, tmp_path: Path) -> None:
    topic = "mirrored-oauth"
    source = oauth_node(idp, tmp_path / "source",
                        {"listener.name.sasl_plaintext.oauthbearer.connections.max.reauth.ms": str(REAUTH_MS)})
    try:
        with mirrored_through(source.cluster, source.signed, source.java_client("mirror"), tmp_path, topic,
                              "lz4") as dest:
            # the mirror's connections outlive their sessions: they re-authenticate and go on mirroring
            wait_until(lambda: "re-authenticated as User:mirror" in source.cluster.log_text(),
                       "the mirror's connections to re-authenticate")
            produce_values({"bootstrap.servers": source.plaintext, "compression.type": "lz4"}, topic,
                           [f"after {i}".encode() * 9 for i in range(10)])
            wait_byte_identical(dest, source.cluster, topic)
        assert "expired without re-authentication" not in source.cluster.log_text()
    finally:
        source.cluster.down()


def test_clients_reauthenticate_and_a_connection_that_does_not_is_closed(node: OAuthNode) -> None:
    topic = "oauth-reauth"
    kmirror("topics", "--bootstrap-server", node.plaintext, "--create", "--topic", topic,
            "--partitions", "1", "--replication-factor", "1")
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": node.unsecured, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanisms": "OAUTHBEARER", "sasl.oauthbearer.config": "principal=henry scope=kafka",
                         "enable.sasl.oauthbearer.unsecure.jwt": "true", "error_cb": errors.append})
    delivered: list[object] = []
    sent = 0
    deadline = time.monotonic() + 60
    while node.cluster.log_text().count("re-authenticated as User:henry") < 2 and time.monotonic() < deadline:
        producer.produce(topic, f"r{sent}".encode(), on_delivery=lambda err, msg: delivered.append(err))
        sent += 1
        producer.poll(0.25)
    assert producer.flush(30) == 0
    assert node.cluster.log_text().count("re-authenticated as User:henry") >= 2
    assert len(delivered) == sent and not any(delivered) and not errors, (errors, delivered[:3])

    with socket.create_connection(("127.0.0.1", node.cluster.port + 2), timeout=30) as sock:
        sock.sendall(encode_request(17, 1, 1, build(load_request_schema(17, 1), mechanism="OAUTHBEARER")))
        assert recv_frame(sock) is not None
        token = client_initial_response(_unsecured("ivy", "kafka"))
        sock.sendall(encode_request(36, 2, 2, build(load_request_schema(36, 2), auth_bytes=token)))
        frame = recv_frame(sock)
        authenticated_at = time.monotonic()
        assert frame is not None
        answer = decode_response(36, 2, frame)
        assert answer.error_code == 0 and answer.session_lifetime.total_seconds() * 1000 == REAUTH_MS
        time.sleep(max(0.0, authenticated_at + REAUTH_MS / 1000 + 0.3 - time.monotonic()))  # the session's end
        sock.sendall(encode_request(3, 1, 3, build(load_request_schema(3, 1), topics=())))
        assert recv_frame(sock) is None  # closed, unanswered
    assert "the SASL session of User:ivy expired without re-authentication" in node.cluster.log_text()



def test_an_identity_provider_over_tls_and_a_token_file(tmp_path: Path) -> None:
    """The provider's endpoints are trusted through the JAAS options' `ssl.truststore.*`, as in
    Kafka (a broker's JWK Set, a client's token endpoint); a token can also come from a file."""
    certs = make_certificates(tmp_path / "certs")
    with IdentityProvider(dict(CLIENTS), tls_keystore=certs.server_pem) as tls_idp:
        trusted = f'ssl.truststore.type="PEM" ssl.truststore.location="{certs.ca_pem}"'
        source = oauth_node(tls_idp, tmp_path / "node",
                            {"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": f"{MODULE} required {trusted};"})
        try:
            client = source.java_client("ops")
            code, out = source.topics(source.signed, source.command_config(tmp_path, client), "--list", check=False)
            assert code == 1 and "CERTIFICATE_VERIFY_FAILED" in out and len(out.strip().splitlines()) == 1, out
            client["sasl.jaas.config"] = client["sasl.jaas.config"].replace("required", f"required {trusted}")
            assert source.topics(source.signed, source.command_config(tmp_path, client), "--list")[0] == 0
            token_file = tmp_path / "token"
            token_file.write_text(tls_idp.token("app", "kafka"))
            from_file = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                         "sasl.oauthbearer.token.endpoint.url": token_file.as_uri(),
                         "sasl.jaas.config": f"{MODULE} required;"}
            assert source.topics(source.signed, source.command_config(tmp_path, from_file), "--list")[0] == 0
            log = source.cluster.log_text()
            assert "authenticated as User:ops" in log and "authenticated as User:app" in log
        finally:
            source.cluster.down()
