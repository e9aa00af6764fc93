"""Messages of `kmirror mirrors` that tell an operator what to do next."""

from __future__ import annotations

import pytest

from kmirror.testing.processes import LocalCluster, kmirror

pytestmark = pytest.mark.integration


def test_disabled_mirroring_names_the_command_that_enables_it(cluster: LocalCluster) -> None:
    proc = kmirror("mirrors", "--bootstrap-server", cluster.bootstrap, "--list", check=False)
    assert proc.returncode == 1
    assert "mirror.version=0" in proc.stderr and "kmirror features" in proc.stderr, proc.stderr
    assert "upgrade --feature mirror.version=1" in proc.stderr, proc.stderr


def test_a_features_update_is_all_or_nothing(cluster: LocalCluster) -> None:
    """As Kafka's controller: one refused update refuses them all, and nothing is applied."""
    proc = kmirror("features", "--bootstrap-server", cluster.bootstrap, "upgrade", "--feature", "mirror.version=1",
                   "--feature", "nope.version=1", check=False)
    assert proc.returncode == 1, proc.stdout
    assert proc.stdout.splitlines() == [
        "Could not upgrade mirror.version to 1. Feature nope.version is not supported by this cluster",
        "Could not upgrade nope.version to 1. Feature nope.version is not supported by this cluster"]
    described = kmirror("features", "--bootstrap-server", cluster.bootstrap, "describe").stdout
    (mirror,) = [line for line in described.splitlines() if "Feature: mirror.version" in line]
    assert "FinalizedVersionLevel: 0" in mirror, described


def test_adding_a_topic_missing_at_the_source_says_source_cluster(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path
) -> None:
    source, dest = clusters
    kmirror("features", "--bootstrap-server", dest.bootstrap, "upgrade", "--feature", "mirror.version=1")
    config = tmp_path / "m.properties"
    config.write_text(f"bootstrap.servers={source.bootstrap}\n")
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--create", "--mirror", "m", "--mirror-config", str(config))
    kmirror("topics", "--bootstrap-server", dest.bootstrap, "--create", "--topic", "only-here")
    proc = kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--add", "--mirror", "m", "--topic", "only-here",
                   check=False)
    assert proc.returncode == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in proc.stderr and "does not exist on the source cluster" in proc.stderr, \
        proc.stderr
