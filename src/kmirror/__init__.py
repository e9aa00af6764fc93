"""kmirror: a Kafka-wire-compatible broker with built-in Cluster Mirroring (KIP-1279)."""

__version__ = "0.1.0"
