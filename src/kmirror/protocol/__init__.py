"""Kafka wire protocol, sans-IO: framing, headers, the API registry."""
