"""A broker's logger levels on a 3-broker cluster (BROKER_LOGGER, KIP-412): each broker answers
for its own loggers only, and a broker that forwards config changes to the controller keeps
the logger part of a request for itself. One IncrementalAlterConfigs to broker 2 that changes
a topic config and broker 2's loggers does both; broker 1's loggers stay as they were."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from kmirror.client.admin import Admin, ConfigResourceType
from kmirror.protocol.entities import build, nested
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror

pytestmark = pytest.mark.integration

INCREMENTAL_ALTER_CONFIGS = 44


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("loggers"), free_port_block(4), nodes=3) as c:
        yield c


def level(cluster: LocalCluster, broker: int, logger: str) -> str:
    out = kmirror("configs", "--bootstrap-server", cluster.bootstrap, "--entity-type", "broker-loggers",
                  "--entity-name", str(broker), "--describe").stdout
    assert out.startswith(f"Dynamic configs for broker-logger {broker} are:"), out
    (line,) = [line for line in out.splitlines() if line.startswith(f"  {logger}=")]
    return line.split("=", 1)[1].split()[0]


async def alter_topic_and_loggers(cluster: LocalCluster, broker: int) -> list[tuple[int, int, str | None]]:
    """One IncrementalAlterConfigs to `broker`: retention.ms of topic `t` and `broker`'s
    `kmirror.replication` level; (resource type, error code, message) of each answer."""
    async with await Admin.connect(cluster.bootstrap) as admin:
        await admin.cluster.refresh([])
        conn = await admin.cluster.connection(broker)
        rt = conn.request_type(INCREMENTAL_ALTER_CONFIGS)
        Resource, Config = nested(rt, "AlterConfigsResource"), nested(rt, "AlterableConfig")
        response = await conn.send(build(rt, validate_only=False, resources=(
            build(Resource, resource_type=int(ConfigResourceType.TOPIC), resource_name="t",
                  configs=(build(Config, name="retention.ms", config_operation=0, value="3600000"),)),
            build(Resource, resource_type=int(ConfigResourceType.BROKER_LOGGER), resource_name=str(broker),
                  configs=(build(Config, name="kmirror.replication", config_operation=0, value="DEBUG"),)),
        )))
    return [(int(r.resource_type), int(r.error_code), r.error_message) for r in response.responses]


def test_each_broker_changes_its_own_loggers_and_forwards_the_rest(cluster: LocalCluster) -> None:
    kmirror("topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", "t", "--partitions", "1",
            "--replication-factor", "3")
    assert level(cluster, 2, "kmirror.replication") == "INFO"

    answers = asyncio.run(alter_topic_and_loggers(cluster, 2))
    assert answers == [(int(ConfigResourceType.TOPIC), 0, None), (int(ConfigResourceType.BROKER_LOGGER), 0, None)]
    assert level(cluster, 2, "kmirror.replication") == "DEBUG"
    assert level(cluster, 1, "kmirror.replication") == "INFO"
    described = kmirror("configs", "--bootstrap-server", cluster.bootstrap, "--entity-type", "topics",
                        "--entity-name", "t", "--describe").stdout
    assert "  retention.ms=3600000 " in described, described

    asked_broker_1 = asyncio.run(alter_topic_and_loggers(cluster, 1))
    assert asked_broker_1[1][1] == 0 and level(cluster, 1, "kmirror.replication") == "DEBUG"
    wrong = kmirror("configs", "--bootstrap-server", cluster.bootstrap, "--entity-type", "broker-loggers",
                    "--entity-name", "7", "--describe", check=False)
    assert wrong.returncode != 0 and "7" in wrong.stderr, wrong.stderr
