"""The group coordinator's sensors (Kafka `GroupCoordinatorMetrics`' global sensors). Each is
Kafka's `Meter` stat: `<name>-rate`, events per second over Kafka's default metrics window (2
samples of 30 s), and `<name>-count`, the events since the node started. They are recorded
where Kafka records them, when the coordinator decides, before its records are written:
- `offset-commit`: offsets an OffsetCommit or TxnOffsetCommit writes;
- `offset-expiration`: offsets removed by the periodic expiration check;
- `offset-deletion`: offsets an OffsetDelete removes (KIP-496);
- `group-completed-rebalance`: a classic group's leader's SyncGroup ends a rebalance;
- `consumer-group-rebalance`: a KIP-848 group's epoch bumped by a member's heartbeat or join.
"""

from __future__ import annotations

from enum import Enum

from kmirror.client.sampled_rate import METRICS_WINDOW, SampledRate
from kmirror.ports import Clock


class GroupSensor(Enum):
    OFFSET_COMMITS = "offset-commit"
    OFFSET_EXPIRED = "offset-expiration"
    OFFSET_DELETIONS = "offset-deletion"
    CLASSIC_GROUP_COMPLETED_REBALANCES = "group-completed-rebalance"
    CONSUMER_GROUP_REBALANCES = "consumer-group-rebalance"


class GroupCoordinatorSensors:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        now = clock.monotonic_ms()
        self._rates = {sensor: SampledRate(METRICS_WINDOW, now) for sensor in GroupSensor}
        self._counts = dict.fromkeys(GroupSensor, 0)

    def record(self, sensor: GroupSensor, n: int = 1) -> None:
        self._rates[sensor].record(n, self._clock.monotonic_ms())
        self._counts[sensor] += n

    def rate(self, sensor: GroupSensor) -> float:
        return self._rates[sensor].measure(self._clock.monotonic_ms())

    def count(self, sensor: GroupSensor) -> int:
        return self._counts[sensor]
