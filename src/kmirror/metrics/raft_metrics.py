"""Kafka's `kafka.server:type=raft-metrics` of a controller: who leads the metadata log in which
epoch, this voter's vote, its log end offset and high watermark (read at scrape time), and
`KafkaController` `ActiveControllerCount` (1 on the active controller)."""

from __future__ import annotations

from typing import Any

from kmirror.metrics.registry import MetricsRegistry, metric_name

RAFT = ("kafka.server", "raft-metrics")
CONTROLLER = ("kafka.controller", "KafkaController")


def register_raft_metrics(registry: MetricsRegistry, controller: Any) -> None:
    """`controller` is a `MetadataService` (with `quorum` None for a single voter)."""
    def quorum_value(name: str, single: int) -> Any:
        return lambda: single if controller.quorum is None else getattr(controller.quorum, name)

    node_id = controller.config.node_id
    gauges = {
        "current-leader": quorum_value("leader_id", node_id),
        "current-epoch": quorum_value("epoch", 0),
        "current-vote": quorum_value("voted_id", -1),
        "high-watermark": lambda: controller.high_watermark,
        "log-end-offset": lambda: controller.log_end_offset,
    }
    for name, read in gauges.items():
        registry.gauge(metric_name(*RAFT, name), read)
    registry.gauge(metric_name(*CONTROLLER, "ActiveControllerCount"), lambda: 1 if controller.active else 0)
