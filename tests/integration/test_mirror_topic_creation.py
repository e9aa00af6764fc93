"""Mirror topic creation on a 3-broker destination (KIP-1279 AddTopicsToMirror): the
destination creates a source-only topic with the source's topic id and partition count and
the replication factor of `kmirror mirrors --add --replication-factor N`, or the destination's
`default.replication.factor` without it; a factor above the registered brokers is
INVALID_REPLICATION_FACTOR, as in CreateTopics. The first mirror creates `__mirror_state`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kmirror.testing.mirror_clusters import clusters_up, topic_summary
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror

pytestmark = pytest.mark.integration


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[tuple[LocalCluster, LocalCluster]]:
    source = LocalCluster(dir=tmp_path / "source", port=free_port_block())
    dest = LocalCluster(dir=tmp_path / "dest", port=free_port_block(3), nodes=3,
                        overrides={"default.replication.factor": "3", "mirror.topic.num.partitions": "5"})
    with clusters_up(source, dest):
        yield source, dest


def test_add_creates_mirror_topics_with_the_requested_replication_factor(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    source, dest = clusters
    for topic in ("rf-one", "rf-default", "rf-four"):
        kmirror("topics", "--bootstrap-server", source.bootstrap, "--create", "--topic", topic,
                "--partitions", "2", "--replication-factor", "1")
    kmirror("features", "--bootstrap-server", dest.bootstrap, "upgrade", "--feature", "mirror.version=1")
    config = tmp_path / "mirror.properties"
    config.write_text(f"bootstrap.servers={source.bootstrap}\n")
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--create", "--mirror", "m",
            "--mirror-config", str(config))
    state = topic_summary(dest.bootstrap, "__mirror_state")  # created with the first mirror
    assert (state["PartitionCount"], state["ReplicationFactor"]) == ("5", "3")
    assert "cleanup.policy=compact" in state["Configs"]

    def add(topic: str, *extra: str) -> str:
        done = kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--add", "--mirror", "m",
                       "--topic", topic, *extra, check=False)
        return done.stdout + done.stderr

    add("rf-one", "--replication-factor", "1")
    add("rf-default")
    refused = add("rf-four", "--replication-factor", "4")
    assert "INVALID_REPLICATION_FACTOR" in refused, refused

    for topic, factor in (("rf-one", "1"), ("rf-default", "3")):
        created = topic_summary(dest.bootstrap, topic)
        assert created["TopicId"] == topic_summary(source.bootstrap, topic)["TopicId"]
        assert (created["PartitionCount"], created["ReplicationFactor"]) == ("2", factor)
    absent = kmirror("topics", "--bootstrap-server", dest.bootstrap, "--describe", "--topic", "rf-four", check=False)
    assert "rf-four" not in absent.stdout
