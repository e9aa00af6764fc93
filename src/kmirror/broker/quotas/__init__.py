"""Quotas, as Kafka's quota managers: client quotas (produce/fetch bytes, request time),
the controller mutation quota (KIP-599) and the mirror replication throttle. Sans-IO: every
method takes the time (`now_ms`) from its caller's clock."""
