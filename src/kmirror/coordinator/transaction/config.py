"""The transaction coordinator's settings, named as Kafka's broker configs
(`TransactionStateManagerConfig`, `TransactionLogConfig`)."""

from __future__ import annotations

from dataclasses import dataclass

TRANSACTION_STATE_TOPIC = "__transaction_state"
# Kafka's limit for a transactional id: a string field of the protocol holds at most
# 32767 bytes, and Kafka's generated readers refuse a longer one. Flexible request versions
# could carry more, so the coordinator checks it.
MAX_TRANSACTIONAL_ID_BYTES = 0x7FFF


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_min_isr: int = 2
    transaction_state_log_segment_bytes: int = 104_857_600
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3_600_000

    @classmethod
    def from_server_config(cls, config: object) -> TransactionConfig:
        """From ServerConfig's Kafka keys (`config.get`), else Kafka's defaults."""
        values: dict[str, int] = {}
        getter = getattr(config, "get", None)
        for name in cls.__dataclass_fields__:
            if getter is None:
                break
            try:
                values[name] = int(getter(name.replace("_", ".")))
            except (KeyError, TypeError, ValueError):
                pass
        return cls(**values)

    def topic_configs(self) -> dict[str, str]:
        """Kafka's `TransactionStateManager` topic configs for `__transaction_state`."""
        return {"cleanup.policy": "compact", "compression.type": "uncompressed", "unclean.leader.election.enable":
                "false", "min.insync.replicas": str(self.transaction_state_log_min_isr),
                "segment.bytes": str(self.transaction_state_log_segment_bytes)}
