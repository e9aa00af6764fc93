"""Kafka error codes. kio's enum is complete for Kafka 4.2; KIP-1279 codes are added in mirror/."""

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode"]
