"""TLS client certificates as principals (Kafka's DefaultKafkaPrincipalBuilder) on a real node
with the StandardAuthorizer: an SSL listener with `ssl.client.auth=required` names each
confluent-kafka client by its certificate's distinguished name, mapped by
`ssl.principal.mapping.rules`, and the ACLs of that principal decide what it may do."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from kmirror.testing.certs import GeneratedCertificates, make_certificates, make_client_certificate
from kmirror.testing.processes import LocalCluster, free_port_block

pytestmark = pytest.mark.integration

TOPIC = "payments"
# "CN=Alice,O=Acme" -> "alice"; any other name is its distinguished name (DEFAULT)
RULES = "RULE:^CN=([A-Za-z]+),O=Acme$/$1/L,DEFAULT"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, GeneratedCertificates]]:
    directory = tmp_path_factory.mktemp("mtls")
    certs = make_certificates(directory / "certs")
    port = free_port_block(2)
    with LocalCluster(directory / "cluster", port, 1, {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{port + 1},CONTROLLER://127.0.0.1:{port + 100}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{port + 1}",
        "inter.broker.listener.name": "PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.server_pem),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca_pem),
        "listener.name.ssl.ssl.client.auth": "required",
        "listener.name.ssl.ssl.principal.mapping.rules": RULES,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    }) as cluster:
        yield cluster, certs


def produce_error(cluster: LocalCluster, certs: GeneratedCertificates, cert: tuple[Path, Path]) -> KafkaError | None:
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{cluster.port + 1}", "security.protocol": "SSL",
                         "ssl.ca.location": str(certs.ca_pem), "ssl.certificate.location": str(cert[0]),
                         "ssl.key.location": str(cert[1]), "message.timeout.ms": 20000})
    reports: list[KafkaError | None] = []
    producer.produce(TOPIC, b"v", on_delivery=lambda err, msg: reports.append(err))
    producer.flush(30)
    assert reports, "no delivery report"
    return reports[0]


def grant_write(admin: AdminClient, principal: str) -> None:
    binding = AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, principal, "*", AclOperation.WRITE,
                         AclPermissionType.ALLOW)
    for future in admin.create_acls([binding], request_timeout=30).values():
        future.result()


def test_a_client_certificate_names_the_principal(node: tuple[LocalCluster, GeneratedCertificates]) -> None:
    cluster, certs = node
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{cluster.port}"})  # the cluster's own listener
    admin.create_topics([NewTopic(TOPIC, 1, 1)], request_timeout=30)[TOPIC].result()
    alice = make_client_certificate(certs, "alice", "/O=Acme/CN=Alice")
    mallory = make_client_certificate(certs, "mallory", "/O=Evil/CN=mallory")

    grant_write(admin, "User:alice")  # the mapped name
    assert produce_error(cluster, certs, alice) is None
    refused = produce_error(cluster, certs, mallory)
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    grant_write(admin, "User:CN=mallory,O=Evil")  # DEFAULT: the name as Java writes it (RFC 2253)
    assert produce_error(cluster, certs, mallory) is None
