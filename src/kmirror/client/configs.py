"""A `Cluster` from Kafka client configs (Java client names: `bootstrap.servers`,
`security.protocol`, `sasl.*`, `ssl.*`, `client.id`, `request.timeout.ms`), as a tool
that takes a Kafka client's properties (Spark's `kafka.*` options) builds one."""

from __future__ import annotations

from collections.abc import Mapping

from kmirror.client.cluster import Cluster
from kmirror.security.client_config import CLIENT_SECURITY_KEYS, SecurityConfigError, client_security

__all__ = ["CLIENT_SECURITY_KEYS", "SecurityConfigError", "cluster_from_configs", "validate_security_configs"]


def validate_security_configs(configs: Mapping[str, str]) -> None:
    """Raise `SecurityConfigError` (naming the key) when the security configs cannot be honoured."""
    client_security(configs)


def cluster_from_configs(configs: Mapping[str, str], *, client_id: str = "kmirror") -> Cluster:
    """A (not yet connected) Cluster for `configs`; `bootstrap.servers` is required."""
    servers = configs.get("bootstrap.servers")
    if not servers:
        raise ValueError("'bootstrap.servers' is required")
    return Cluster(
        servers,
        client_id=configs.get("client.id") or client_id,
        request_timeout_ms=int(configs.get("request.timeout.ms", "30000")),
        security=client_security(configs),
    )
