"""The controller's view of its observers for DescribeQuorum, as Kafka's LeaderState keeps it,
and kafka-metadata-quorum.sh's formatting of it."""

from kmirror.cli.metadata_quorum import QuorumInfo, ReplicaInfo, format_replication, format_status
from kmirror.metadata.quorum_state import OBSERVER_SESSION_TIMEOUT_MS, QuorumObservers


def test_caught_up_at_the_log_end_or_at_the_end_the_leader_had_at_the_previous_fetch() -> None:
    q = QuorumObservers()
    q.fetched(1, 10, 10, now_ms=1000)  # at the end: caught up now
    assert (q.replicas[1].log_end_offset, q.replicas[1].last_caught_up_ms) == (10, 1000)
    q.fetched(1, 10, 15, now_ms=2000)  # behind a grown log, but at the end of its previous fetch
    assert q.replicas[1].last_caught_up_ms == 1000
    q.fetched(1, 15, 20, now_ms=3000)  # reached the end the leader had at 2000
    assert (q.replicas[1].last_caught_up_ms, q.replicas[1].last_fetch_ms) == (2000, 3000)
    q.fetched(1, 16, 30, now_ms=4000)  # short of 20: no catch-up
    assert q.replicas[1].last_caught_up_ms == 2000
    q.fetched(-1, 0, 30, now_ms=4000)  # a fetch naming no replica
    assert set(q.replicas) == {1}


def test_an_observer_silent_past_the_session_timeout_is_dropped_and_the_leader_never_listed() -> None:
    q = QuorumObservers()
    q.fetched(1, 5, 5, now_ms=0)
    q.fetched(2, 5, 5, now_ms=OBSERVER_SESSION_TIMEOUT_MS)
    q.fetched(3000, 5, 5, now_ms=OBSERVER_SESSION_TIMEOUT_MS)
    assert list(q.current(OBSERVER_SESSION_TIMEOUT_MS + 1, leader_id=3000)) == [2]


def test_status_lag_is_over_the_voters_and_the_table_lists_the_leader_first() -> None:
    leader = ReplicaInfo(3000, "AAAAAAAAAAAAAAAAAAAAAA", 20, 5000, 5000)
    follower = ReplicaInfo(3001, "bGlzdGVuaW5nIHRvIGthZg", 17, 4900, 4200)
    observer = ReplicaInfo(1, "AAAAAAAAAAAAAAAAAAAAAA", 12, 4950, 3000)
    quorum = QuorumInfo(3000, 4, 20, (follower, leader), (observer,), {3000: ("CONTROLLER://h:9093",)})
    lines = format_status("cid", quorum)
    assert lines[4:] == [
        "MaxFollowerLag:         3",
        "MaxFollowerLagTimeMs:   800",
        'CurrentVoters:          [{"id": 3001, "directoryId": "bGlzdGVuaW5nIHRvIGthZg"}, '
        '{"id": 3000, "endpoints": ["CONTROLLER://h:9093"]}]',
        'CurrentObservers:       [{"id": 1}]',
    ]
    table = [line.split("\t") for line in format_replication(quorum, human_readable=True, now_ms=5000)]
    assert [row[0].strip() for row in table] == ["NodeId", "3000", "3001", "1"]
    assert [row[6].strip() for row in table[1:]] == ["Leader", "Follower", "Observer"]
    assert [row[3].strip() for row in table[1:]] == ["0", "3", "8"]
    assert table[3][5].strip() == "2000 ms ago"
