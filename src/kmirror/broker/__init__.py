"""The broker: one handler module per Kafka API, translation only, plus the purgatory."""
