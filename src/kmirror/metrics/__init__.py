"""Metrics: a sans-IO registry of Kafka-named gauges, counters and meters, rendered as
Prometheus text (`prometheus.render`). The runtime serves it (`runtime/metrics_http.py`)."""
