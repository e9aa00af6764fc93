"""Delegation tokens (KIP-48) on real processes, through `kmirror delegation-tokens` and
`kmirror topics`: a cluster of two broker-only nodes and a dedicated controller, so every
creation, renewal and expiry is forwarded to the controller in an Envelope that carries the
client's principal. SCRAM users log in over SASL_PLAINTEXT, the StandardAuthorizer is on, and
a token authenticates as its owner at the other broker; renewers, owner mismatch, a request
over a token or over PLAINTEXT, expiry at once and by the controller's periodic check, and a
controller restart are each shown with Kafka's error names; a mirror reads this cluster as its
source with a token."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kmirror.runtime.local_cluster import CONTROLLER_NODE_ID
from kmirror.testing.kafka_clients import create_topic
from kmirror.testing.mirror_clusters import wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror, write_properties
from kmirror.testing.secured_mirrors import mirrored_through

pytestmark = pytest.mark.integration

SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
SECRET = "a-secret-the-nodes-share"


@dataclass
class TokenCluster:
    cluster: LocalCluster
    sasl_port: int
    dir: Path

    def sasl(self, broker: int) -> str:
        return f"127.0.0.1:{self.sasl_port + broker - 1}"

    def login(self, name: str, user: str, password: str, *, token: bool = False) -> Path:
        extra = ' tokenauth="true"' if token else ""
        return write_properties(self.dir / f"{name}.properties", {
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.jaas.config": f'{SCRAM_MODULE} required username="{user}" password="{password}"{extra};'})

    def tokens(self, login: Path, *args: str, broker: int = 1, check: bool = True) -> subprocess.CompletedProcess[str]:
        return kmirror("delegation-tokens", "--bootstrap-server", self.sasl(broker), "--command-config", str(login),
                       *args, check=check)

    def topics_seen(self, login: Path, broker: int) -> list[str]:
        out = kmirror("topics", "--bootstrap-server", self.sasl(broker), "--command-config", str(login), "--list")
        return out.stdout.split()


@pytest.fixture(scope="module")
def tokens(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TokenCluster]:
    base = tmp_path_factory.mktemp("tokens")
    port, sasl_port = free_port_block(2), free_port_block(2)

    def listeners(node_id: int) -> dict[str, str]:
        plain, sasl = f"127.0.0.1:{port + node_id - 1}", f"127.0.0.1:{sasl_port + node_id - 1}"
        return {"listeners": f"PLAINTEXT://{plain},SASL_PLAINTEXT://{sasl}",
                "advertised.listeners": f"PLAINTEXT://{plain},SASL_PLAINTEXT://{sasl}",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
                "inter.broker.listener.name": "PLAINTEXT"}

    cluster = LocalCluster(base / "c", port, 2, {
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "delegation.token.secret.key": SECRET,
        "delegation.token.expiry.check.interval.ms": "500",
    }, per_broker=listeners)
    with cluster:
        for user in ("alice", "bob", "carol"):
            kmirror("configs", "--bootstrap-server", cluster.bootstrap, "--entity-type", "users", "--entity-name",
                    user, "--alter", "--add-config", f"SCRAM-SHA-256=[password={user}-secret]")
        create_topic(cluster.bootstrap, "orders", 1)
        kmirror("acls", "--bootstrap-server", cluster.bootstrap, "--add", "--allow-principal", "User:alice",
                "--operation", "Describe", "--topic", "orders")
        yield TokenCluster(cluster, sasl_port, base)


def created(out: str) -> tuple[str, str]:
    """(token id, HMAC) from `--create`'s lines."""
    token_id = re.search(r"Created delegation token with tokenId : (\S+)", out)
    assert token_id is not None, out
    row = next(line for line in out.splitlines() if line.startswith(token_id[1] + " "))
    return token_id[1], row.split()[1]


def test_a_token_authenticates_as_its_owner_and_follows_its_lifecycle(tokens: TokenCluster) -> None:
    alice, bob, carol = (tokens.login(u, u, f"{u}-secret") for u in ("alice", "bob", "carol"))
    out = tokens.tokens(alice, "--create", "--renewer-principal", "User:bob", "--max-life-time-period", "3600000")
    assert "Calling create token operation with renewers :[User:bob] , max-life-time-period :3600000" in out.stdout
    token_id, mac = created(out.stdout)
    row = next(line for line in out.stdout.splitlines() if line.startswith(token_id))
    assert row.split()[2:5] == ["User:alice", "User:alice", "[User:bob]"]

    # the token is alice at the other broker: it sees what alice may describe, carol does not
    token = tokens.login("token", token_id, mac, token=True)
    assert "orders" in tokens.topics_seen(token, broker=2)
    assert "orders" in tokens.topics_seen(alice, broker=2)
    assert "orders" not in tokens.topics_seen(carol, broker=2)
    assert "authenticated as User:alice with a delegation token" in tokens.cluster.log_text(2)

    # owner and renewer see it with its HMAC, anybody else does not
    for login in (alice, bob):
        described = tokens.tokens(login, "--describe", broker=2).stdout
        assert "Total number of tokens : 1" in described and mac in described
    assert "Total number of tokens : 0" in tokens.tokens(carol, "--describe").stdout

    # a renewer renews it; someone else may not; a token may not ask for tokens itself
    renewed = tokens.tokens(bob, "--renew", "--hmac", mac, "--renew-time-period", "600000", broker=2)
    assert "Completed renew operation. New expiry date : " in renewed.stdout
    refused = tokens.tokens(carol, "--renew", "--hmac", mac, check=False)
    assert refused.returncode == 1 and "DELEGATION_TOKEN_OWNER_MISMATCH" in refused.stderr
    over_token = tokens.tokens(token, "--create", broker=2, check=False)
    assert over_token.returncode == 1 and "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED" in over_token.stderr
    plaintext = kmirror("delegation-tokens", "--bootstrap-server", tokens.cluster.bootstrap, "--create", check=False)
    assert plaintext.returncode == 1 and "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED" in plaintext.stderr
    for_another = tokens.tokens(carol, "--create", "--owner-principal", "User:alice", check=False)
    assert for_another.returncode == 1 and "DELEGATION_TOKEN_AUTHORIZATION_FAILED" in for_another.stderr

    # tokens live in the metadata log: the controller restarts and the token still logs in
    tokens.cluster.kill9(CONTROLLER_NODE_ID)
    tokens.cluster.start_node(CONTROLLER_NODE_ID)
    wait_until(lambda: "orders" in tokens.topics_seen(token, broker=1), "the token logs in after the restart",
               retry_on=(subprocess.CalledProcessError,))

    # expired at once by its owner: removed, and refused at login while the node serves others
    expired = tokens.tokens(alice, "--expire", "--hmac", mac, "--expiry-time-period", "-1")
    assert "Completed expire operation." in expired.stdout
    wait_until(lambda: "Total number of tokens : 0" in tokens.tokens(alice, "--describe", broker=2).stdout,
               "the expired token gone at broker 2")
    gone = kmirror("topics", "--bootstrap-server", tokens.sasl(2), "--command-config", str(token), "--list",
                   check=False)
    assert gone.returncode == 1 and "SASL_AUTHENTICATION_FAILED" in gone.stderr
    assert "orders" in tokens.topics_seen(alice, broker=2)


def test_a_token_past_its_max_lifetime_is_removed_by_the_controller(tokens: TokenCluster) -> None:
    bob = tokens.login("bob", "bob", "bob-secret")
    token_id, mac = created(tokens.tokens(bob, "--create", "--max-life-time-period", "8000").stdout)
    short = tokens.login("short", token_id, mac, token=True)
    tokens.topics_seen(short, broker=1)  # logs in while it lives
    wait_until(lambda: token_id not in tokens.tokens(bob, "--describe").stdout,
               "the controller's periodic check removes the expired token")
    refused = kmirror("topics", "--bootstrap-server", tokens.sasl(1), "--command-config", str(short), "--list",
                      check=False)
    assert refused.returncode == 1 and "SASL_AUTHENTICATION_FAILED" in refused.stderr
    renew = tokens.tokens(bob, "--renew", "--hmac", mac, check=False)
    assert renew.returncode == 1 and "DELEGATION_TOKEN_NOT_FOUND" in renew.stderr


def test_a_mirror_reads_its_source_with_a_token(tokens: TokenCluster, tmp_path: Path) -> None:
    """A destination's operator given a token of the source's user alice (not her password):
    the mirror logs in with it and copies the source's batches byte for byte."""
    for operation in ("Read", "Describe", "DescribeConfigs"):
        kmirror("acls", "--bootstrap-server", tokens.cluster.bootstrap, "--add", "--allow-principal", "User:alice",
                "--operation", operation, "--topic", "mirrored")
    alice = tokens.login("alice", "alice", "alice-secret")
    token_id, mac = created(tokens.tokens(alice, "--create").stdout)
    client = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
              "sasl.jaas.config": f'{SCRAM_MODULE} required username="{token_id}" password="{mac}" tokenauth="true";'}
    with mirrored_through(tokens.cluster, tokens.sasl(2), client, tmp_path, "mirrored", "zstd"):
        pass
    assert "authenticated as User:alice with a delegation token" in tokens.cluster.log_text(2)
