"""Kafka's log cleaner (KIP-58, KIP-354, KIP-534) as a sans-IO core: see docs/design/storage.md."""
