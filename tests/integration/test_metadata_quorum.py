"""`kmirror metadata-quorum describe` (kafka-metadata-quorum.sh) on real clusters: the active
controller is the leader and only voter, the brokers are observers with their positions in
the metadata log, and a broker that stops falls behind there until it comes back."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kmirror.runtime.local_cluster import CONTROLLER_NODE_ID, CONTROLLER_PORT_OFFSET
from kmirror.testing.kafka_clients import create_topic
from kmirror.testing.mirror_clusters import quorum_replication, wait_until
from kmirror.testing.processes import (
    FAST_FAILURE_DETECTION,
    LocalCluster,
    free_port_block,
    kmirror,
)

pytestmark = pytest.mark.integration


def status(bootstrap: str) -> dict[str, str]:
    out = kmirror("metadata-quorum", "--bootstrap-server", bootstrap, "describe", "--status").stdout
    return {key: value.strip() for key, _, value in (line.partition(":") for line in out.splitlines())}


def test_the_controller_leads_and_the_brokers_observe_and_fall_behind_while_stopped(tmp_path: Path) -> None:
    with LocalCluster(dir=tmp_path / "c", port=free_port_block(3), nodes=2,
                      overrides=dict(FAST_FAILURE_DETECTION)) as cluster:
        b = cluster.bootstrap
        broker1 = b.split(",")[0]
        wait_until(lambda: set(quorum_replication(b)) == {CONTROLLER_NODE_ID, 1, 2}, "both brokers observed",
                   retry_on=(AssertionError,))
        s = status(b)
        assert re.fullmatch(r"\S{22}", s["ClusterId"])
        assert (s["LeaderId"], s["LeaderEpoch"], s["MaxFollowerLag"], s["MaxFollowerLagTimeMs"]) == (
            str(CONTROLLER_NODE_ID), "0", "0", "0")
        controller = f"CONTROLLER://127.0.0.1:{cluster.port + CONTROLLER_PORT_OFFSET}"
        assert json.loads(s["CurrentVoters"]) == [{"id": CONTROLLER_NODE_ID, "endpoints": [controller]}]
        assert json.loads(s["CurrentObservers"]) == [{"id": 1}, {"id": 2}]

        def rows_caught_up() -> bool:
            rows = quorum_replication(b)
            return all(rows[n]["Lag"] == "0" for n in (1, 2)) and rows[CONTROLLER_NODE_ID]["Status"] == "Leader"

        wait_until(rows_caught_up, "both observers at the log end")
        rows = quorum_replication(b)
        assert [rows[n]["Status"] for n in (CONTROLLER_NODE_ID, 1, 2)] == ["Leader", "Observer", "Observer"]

        cluster.kill9(2)
        for i in range(3):
            create_topic(broker1, f"while-2-is-down-{i}")
        stopped_fetch = int(quorum_replication(b)[2]["LastFetchTimestamp"])
        wait_until(lambda: int(quorum_replication(b)[2]["Lag"]) > 0 and quorum_replication(b)[1]["Lag"] == "0",
                   "broker 2 behind, broker 1 at the log end")
        rows = quorum_replication(b)
        assert int(rows[2]["LastFetchTimestamp"]) == stopped_fetch  # it fetches no more
        assert int(rows[2]["LastCaughtUpTimestamp"]) < int(rows[1]["LastCaughtUpTimestamp"])

        cluster.start_node(2)
        wait_until(rows_caught_up, "broker 2 caught up again")
        assert int(quorum_replication(b)[2]["LastFetchTimestamp"]) > stopped_fetch
        human = kmirror("metadata-quorum", "--bootstrap-server", broker1, "describe", "--replication",
                        "--human-readable").stdout
        assert re.search(r"\t\d+ ms ago\s*\t\d+ ms ago\s*\tObserver", human)


def test_a_combined_node_is_the_only_voter_and_has_no_observers(tmp_path: Path) -> None:
    with LocalCluster(dir=tmp_path / "c", port=free_port_block(1)) as cluster:
        s = status(cluster.bootstrap)
        assert (s["LeaderId"], s["MaxFollowerLag"], s["CurrentObservers"]) == ("1", "0", "[]")
        assert json.loads(s["CurrentVoters"])[0]["id"] == 1
        assert list(quorum_replication(cluster.bootstrap)) == [1]
        refused = kmirror("metadata-quorum", "--bootstrap-server", cluster.bootstrap, "describe", "--status",
                          "--human-readable", check=False)
        assert refused.returncode == 1 and refused.stderr.strip() == \
            "Error: --human-readable is only valid with --replication"
