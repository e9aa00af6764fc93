"""Committed offsets and group metadata in `__consumer_offsets`, in Kafka's record formats."""
