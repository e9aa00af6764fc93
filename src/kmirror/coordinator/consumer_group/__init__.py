"""KIP-848 consumer groups: the server-side assignment protocol (ConsumerGroupHeartbeat)."""
