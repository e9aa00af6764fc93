"""Client quotas end to end on a real node: `kmirror configs` for users, clients and ips,
AlterClientQuotas/DescribeClientQuotas on the wire with Kafka's errors for bad input (nothing
stored is lost, the node keeps serving), quotas surviving a kill -9, and KIP-599's controller
mutation quota answering THROTTLING_QUOTA_EXCEEDED to strict CreateTopics versions."""

from __future__ import annotations

import datetime
import socket
import struct
import time
import uuid

import pytest
from kio.schema.alter_client_quotas.v1 import request as acq
from kio.schema.create_partitions.v3 import request as cp3
from kio.schema.create_topics.v5 import request as ct5
from kio.schema.create_topics.v7 import request as ct7
from kio.schema.delete_topics.v4 import request as dt4
from kio.schema.delete_topics.v6 import request as dt6
from kio.schema.describe_client_quotas.v1 import request as dcq
from kio.schema.errors import ErrorCode
from kio.static.primitive import f64, i8, i16, i32

from kmirror.testing.hostile import call
from kmirror.testing.kafka_clients import create_topic, produce_acked
from kmirror.testing.processes import LocalCluster, kmirror

pytestmark = pytest.mark.integration


def configs(cluster: LocalCluster, *args: str, check: bool = True) -> str:
    result = kmirror("configs", "--bootstrap-server", cluster.bootstrap, *args, check=check)
    return result.stdout if check else result.stderr


def _alter(port: int, entity: list[tuple[str, str | None]], ops: list[tuple[str, float, bool]]) -> tuple[int, str | None]:
    body = acq.AlterClientQuotasRequest(entries=(acq.EntryData(
        entity=tuple(acq.EntityData(entity_type=t, entity_name=n) for t, n in entity),
        ops=tuple(acq.OpData(key=k, value=f64(float(v)), remove=r) for k, v, r in ops)),), validate_only=False)
    entry = call(port, 49, 1, body).entries[0]
    return int(entry.error_code), entry.error_message


def _describe(port: int, components: list[tuple[str, int, str | None]], strict: bool = False) -> tuple[int, list]:
    body = dcq.DescribeClientQuotasRequest(components=tuple(
        dcq.ComponentData(entity_type=t, match_type=i8(m), match=n) for t, m, n in components), strict=strict)
    response = call(port, 48, 1, body)
    entries = [({e.entity_type: e.entity_name for e in entry.entity}, {v.key: float(v.value) for v in entry.values})
               for entry in response.entries or ()]
    return int(response.error_code), entries


def test_configs_cli_alter_describe_delete_and_bad_input(cluster: LocalCluster) -> None:
    out = configs(cluster, "--entity-type", "clients", "--entity-name", "app", "--alter", "--add-config",
                  "producer_byte_rate=1024,consumer_byte_rate=2048")
    assert out.strip() == "Completed updating config for client-id 'app'."
    configs(cluster, "--entity-type", "users", "--entity-default", "--alter", "--add-config", "request_percentage=50")
    configs(cluster, "--user", "alice", "--client", "app", "--alter", "--add-config", "producer_byte_rate=4096")
    configs(cluster, "--entity-type", "ips", "--entity-name", "127.0.0.1", "--alter",
            "--add-config", "connection_creation_rate=10")

    assert configs(cluster, "--entity-type", "clients", "--entity-name", "app", "--describe").strip() == (
        "Quota configs for client-id 'app' are consumer_byte_rate=2048.0, producer_byte_rate=1024.0")
    assert configs(cluster, "--entity-type", "users", "--entity-default", "--describe").strip() == (
        "Quota configs for the default user-principal are request_percentage=50.0")
    assert configs(cluster, "--user", "alice", "--client", "app", "--describe").strip() == (
        "Quota configs for user-principal 'alice', client-id 'app' are producer_byte_rate=4096.0")
    # an unnamed type matches any name; strict: only entities of exactly these types
    assert configs(cluster, "--entity-type", "users", "--describe").strip() == (
        "Quota configs for the default user-principal are request_percentage=50.0")

    # bad input on the wire: Kafka's errors, and nothing stored changes
    port = cluster.port
    before = _describe(port, [])
    assert before[0] == ErrorCode.none and len(before[1]) == 4
    assert _alter(port, [("group", "g")], [("producer_byte_rate", 1, False)]) == (
        ErrorCode.invalid_request, "Unhandled client quota entity type: group")
    assert _alter(port, [("client-id", "app")], [("producer_rate", 1, False)]) == (
        ErrorCode.invalid_request, "Invalid configuration key producer_rate")
    assert _alter(port, [("client-id", "app")], [("producer_byte_rate", -5, False)])[0] == ErrorCode.invalid_request
    assert _alter(port, [("client-id", "app")], [("producer_byte_rate", 1.5, False)]) == (
        ErrorCode.invalid_request, "Configuration producer_byte_rate must be a Long value")
    assert _alter(port, [("ip", "127.0.0.1"), ("user", "u")], [("connection_creation_rate", 1, False)])[0] == (
        ErrorCode.invalid_request)
    assert _alter(port, [("ip", "127.0.0.1")], [("producer_byte_rate", 1, False)])[0] == ErrorCode.invalid_request
    assert _alter(port, [], [("producer_byte_rate", 1, False)]) == (
        ErrorCode.invalid_request, "Invalid empty client quota entity")
    assert _describe(port, [("group", 2, None)])[0] == ErrorCode.unsupported_version
    assert _describe(port, [("user", 0, None)])[0] == ErrorCode.invalid_request
    assert _describe(port, [("ip", 2, None), ("user", 2, None)])[0] == ErrorCode.invalid_request
    assert _describe(port, []) == before
    # the CLI refuses a value that is not a number before sending anything
    err = configs(cluster, "--entity-type", "clients", "--entity-name", "app", "--alter", "--add-config",
                  "producer_byte_rate=lots", check=False)
    assert "Cannot parse quota configuration value for producer_byte_rate: lots" in err
    err = configs(cluster, "--entity-type", "clients", "--entity-name", "app", "--alter", "--add-config",
                  "producer_rate=1", check=False)
    assert "INVALID_REQUEST" in err and "Invalid configuration key producer_rate" in err

    # filters: exact, default, specified; strict or not
    assert _describe(port, [("client-id", 0, "app")], strict=True)[1] == [
        ({"client-id": "app"}, {"consumer_byte_rate": 2048.0, "producer_byte_rate": 1024.0})]
    assert len(_describe(port, [("client-id", 0, "app")], strict=False)[1]) == 2
    assert _describe(port, [("user", 1, None)], strict=True)[1] == [({"user": None}, {"request_percentage": 50.0})]

    configs(cluster, "--entity-type", "clients", "--entity-name", "app", "--alter", "--delete-config",
            "producer_byte_rate")
    assert configs(cluster, "--entity-type", "clients", "--entity-name", "app", "--describe").strip() == (
        "Quota configs for client-id 'app' are consumer_byte_rate=2048.0")

    # the quotas are in the metadata log: a kill -9 and restart keeps them
    cluster.kill9(1)
    cluster.start_node(1)
    assert _describe(port, [])[1] == _describe(port, [])[1]
    assert len(_describe(port, [])[1]) == 4
    assert configs(cluster, "--entity-type", "clients", "--entity-name", "app", "--describe").strip() == (
        "Quota configs for client-id 'app' are consumer_byte_rate=2048.0")
    produce_acked(cluster.bootstrap, "still-served", 5, 1)


def _create_v7(port: int, *topics: tuple[str, int], client_version: int = 7) -> tuple[int, list[tuple[str, int]]]:
    mod = ct7 if client_version == 7 else ct5
    body = mod.CreateTopicsRequest(
        topics=tuple(mod.CreatableTopic(name=n, num_partitions=i32(p), replication_factor=i16(1), assignments=(),
                                        configs=()) for n, p in topics),
        timeout=datetime.timedelta(seconds=30), validate_only=False)
    response = call(port, 19, client_version, body)
    throttle_ms = int(response.throttle_time.total_seconds() * 1000)
    return throttle_ms, [(t.name, int(t.error_code)) for t in response.topics]


def test_controller_mutation_quota_refuses_strict_and_throttles_permissive(cluster: LocalCluster) -> None:
    # 2 partitions/s with Kafka's 11 one-second windows: a burst of 22 partitions
    configs(cluster, "--entity-type", "clients", "--entity-name", "hostile", "--alter",
            "--add-config", "controller_mutation_rate=2")
    create_topic(cluster.bootstrap, "other-client")  # another client id is not limited
    # a creation the controller's policy refuses whole is not charged (and its size cannot overflow)
    throttle_ms, results = _create_v7(cluster.port, ("huge", 2**31 - 1))
    assert results == [("huge", ErrorCode.policy_violation)] and throttle_ms == 0
    throttle_ms, results = _create_v7(cluster.port, ("m1", 20), ("m2", 10), ("m3", 1))
    # m1 and m2 find tokens left (m2 takes the bucket to -8); m3 finds it negative
    assert results == [("m1", ErrorCode.none), ("m2", ErrorCode.none),
                       ("m3", ErrorCode.throttling_quota_exceeded)]
    assert 3000 <= throttle_ms <= 4100  # 8 tokens at 2/s
    throttle_ms, results = _create_v7(cluster.port, ("m4", 1))
    assert results == [("m4", ErrorCode.throttling_quota_exceeded)] and throttle_ms > 0
    # v5 predates KIP-599's error: permissive, the topic is created and only throttled
    throttle_ms, results = _create_v7(cluster.port, ("m5", 2), client_version=5)
    assert results == [("m5", ErrorCode.none)] and throttle_ms > 0
    # DeleteTopics v6 and CreatePartitions v3 are strict too; DeleteTopics v4 is permissive
    throttle_ms, results = _delete_topics(cluster.port, 6, "m1")
    assert results == [("m1", ErrorCode.throttling_quota_exceeded)] and throttle_ms > 0
    assert _create_partitions(cluster.port, "m2", 12) == ErrorCode.throttling_quota_exceeded
    throttle_ms, results = _delete_topics(cluster.port, 4, "m5")
    assert results == [("m5", ErrorCode.none)] and throttle_ms > 0
    listed = kmirror("topics", "--bootstrap-server", cluster.bootstrap, "--list").stdout.split()
    assert {"m1", "m2", "other-client"} <= set(listed) and not {"m3", "m4", "m5"} & set(listed)


def _delete_topics(port: int, version: int, *names: str) -> tuple[int, list[tuple[str, int]]]:
    if version >= 6:
        body: object = dt6.DeleteTopicsRequest(topics=tuple(dt6.DeleteTopicState(name=n, topic_id=uuid.UUID(int=0))
                                                           for n in names), timeout=datetime.timedelta(seconds=30))
    else:
        body = dt4.DeleteTopicsRequest(topic_names=names, timeout=datetime.timedelta(seconds=30))
    response = call(port, 20, version, body)
    return (int(response.throttle_time.total_seconds() * 1000),
            [(r.name, int(r.error_code)) for r in response.responses])


def _create_partitions(port: int, topic: str, count: int) -> int:
    body = cp3.CreatePartitionsRequest(topics=(cp3.CreatePartitionsTopic(name=topic, count=i32(count), assignments=None),),
                                       timeout=datetime.timedelta(seconds=30), validate_only=False)
    return int(call(port, 37, 3, body).results[0].error_code)


def test_ip_connection_creation_rate_closes_connections_past_the_quota(cluster: LocalCluster) -> None:
    # connections from 127.0.0.2 (bound as source address) have a quota; the rest do not
    configs(cluster, "--entity-type", "ips", "--entity-name", "127.0.0.2", "--alter",
            "--add-config", "connection_creation_rate=2")

    def served(source: str) -> bool:
        with socket.create_connection(("127.0.0.1", cluster.port), timeout=10, source_address=(source, 0)) as sock:
            request = struct.pack(">hhih", 18, 0, 1, -1)
            sock.sendall(struct.pack(">i", len(request)) + request)
            try:
                return len(sock.recv(4)) == 4
            except ConnectionResetError:
                return False

    outcomes = [served("127.0.0.2") for _ in range(40)]
    assert outcomes[:20] == [True] * 20  # 2/s over Kafka's 10 s minimum window
    assert outcomes.count(False) >= 15
    assert all(served("127.0.0.1") for _ in range(40))
    configs(cluster, "--entity-type", "ips", "--entity-name", "127.0.0.2", "--alter",
            "--delete-config", "connection_creation_rate")
    assert all(served("127.0.0.2") for _ in range(10))


def test_quotas_through_broker_only_nodes(cluster3: LocalCluster) -> None:
    """Three brokers beside a controller: AlterClientQuotas is forwarded, every broker
    describes the quota from its own metadata, and a broker charges the mutation quota before
    forwarding only the admitted topics."""
    configs(cluster3, "--entity-type", "clients", "--entity-name", "hostile", "--alter",
            "--add-config", "controller_mutation_rate=1,consumer_byte_rate=5000")
    wanted = [({"client-id": "hostile"}, {"consumer_byte_rate": 5000.0, "controller_mutation_rate": 1.0})]
    for node in range(3):
        port = cluster3.port + node
        for _ in range(100):
            code, entries = _describe(port, [("client-id", 0, "hostile")], strict=True)
            if entries:
                break
            time.sleep(0.1)
        assert code == ErrorCode.none and [(dict(e), v) for e, v in entries] == wanted, node
    # a burst of 11 partitions: 12 are accepted (the bucket was not negative), the next topic is refused
    throttle_ms, results = _create_v7(cluster3.port + 1, ("b1", 12), ("b2", 1))
    assert results == [("b1", ErrorCode.none), ("b2", ErrorCode.throttling_quota_exceeded)]
    assert throttle_ms > 0
    listed = kmirror("topics", "--bootstrap-server", cluster3.bootstrap, "--list").stdout.split()
    assert "b1" in listed and "b2" not in listed
