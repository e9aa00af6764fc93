"""`ServerConfig`: a parsed, validated `server.properties` (KRaft-style keys, Kafka names)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kmirror.config import cordoned_log_dirs
from kmirror.config.broker_keys import BROKER_CONFIG_DEFS
from kmirror.config.definitions import ConfigError
from kmirror.config.properties import PropertiesSyntaxError, parse_properties
from kmirror.security.listener_config import (
    ListenerConfigError,
    ListenerSecurity,
    is_listener_security_key,
    listener_security,
)

SUPPORTED_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True, slots=True)
class Listener:
    """One `NAME://host:port` entry; host "" means every interface."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class QuorumVoter:
    node_id: int
    host: str
    port: int


@dataclass(frozen=True)
class ServerConfig:
    raw: Mapping[str, str]
    node_id: int
    process_roles: tuple[str, ...]
    listeners: tuple[Listener, ...]
    advertised_listeners: tuple[Listener, ...]
    listener_security_protocol_map: Mapping[str, str]
    controller_listener_names: tuple[str, ...]
    controller_quorum_voters: tuple[QuorumVoter, ...]
    controller_quorum_bootstrap_servers: tuple[tuple[str, int], ...]
    inter_broker_listener_name: str
    log_dirs: list[str]
    log_roll_ms: int
    log_roll_jitter_ms: int
    log_retention_ms: int
    log_flush_interval_ms: int
    values: Mapping[str, Any] = field(repr=False)
    listener_securities: Mapping[str, ListenerSecurity] = field(default_factory=dict, repr=False)

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path) -> ServerConfig:
        text = Path(path).read_text(encoding="utf-8")
        try:
            props = parse_properties(text)
        except PropertiesSyntaxError as e:
            raise ConfigError(f"{path}: {e}") from None
        return cls.from_properties(props)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ServerConfig:
        values: dict[str, Any] = {}
        for key, raw in props.items():
            if is_listener_security_key(key):
                continue  # read per listener by listener_security()
            d = BROKER_CONFIG_DEFS.get(key)
            if d is None:
                raise ConfigError(f"unknown configuration {key!r}")
            values[key] = d.parse(raw)
        for key, d in BROKER_CONFIG_DEFS.items():
            if key not in values:
                values[key] = d.default_value()

        if values["node.id"] is None:
            raise ConfigError("missing required configuration 'node.id'")
        protocol_map = _parse_protocol_map(values["listener.security.protocol.map"])
        listeners = _parse_listeners("listeners", values["listeners"], protocol_map)
        controller_names = tuple(values["controller.listener.names"] or ())
        if values["advertised.listeners"] is None:
            advertised = tuple(lst for lst in listeners if lst.name not in controller_names)
        else:
            advertised = _parse_listeners("advertised.listeners", values["advertised.listeners"], protocol_map)
        broker_listener_names = [lst.name for lst in listeners if lst.name not in controller_names]
        roles = tuple(values["process.roles"])
        if "broker" in roles and not broker_listener_names:
            raise ConfigError("invalid value for 'listeners': a broker needs a non-controller listener")
        ibl = values["inter.broker.listener.name"]
        if ibl is None:
            ibl = "PLAINTEXT" if "PLAINTEXT" in broker_listener_names else (broker_listener_names or [""])[0]
        elif ibl not in broker_listener_names:
            raise ConfigError(f"invalid value {ibl!r} for 'inter.broker.listener.name': not a broker listener")
        for name in controller_names:
            if name not in {lst.name for lst in listeners} and "controller" in roles:
                raise ConfigError(f"invalid value {name!r} for 'controller.listener.names': not in listeners")
        securities = _listener_securities(props, listeners, protocol_map)
        # Inter-broker and controller connections are made by kmirror's own PLAINTEXT channels.
        for key, names in (("inter.broker.listener.name", [ibl]), ("controller.listener.names", controller_names)):
            for name in names:
                if name in securities and securities[name].protocol != "PLAINTEXT":
                    raise ConfigError(f"invalid value {name!r} for {key!r}: listener {name} uses "
                                      f"{securities[name].protocol}; inter-broker and controller listeners "
                                      "must be PLAINTEXT")

        log_dirs = list(values["log.dirs"]) if values["log.dirs"] else [values["log.dir"]]
        if not log_dirs:
            raise ConfigError("invalid value '' for 'log.dirs': expected at least one directory")
        try:
            cordoned_log_dirs.resolve(",".join(values["cordoned.log.dirs"]), log_dirs)
        except ConfigError as e:
            raise ConfigError(f"invalid value for 'cordoned.log.dirs': {e}") from None
        roll_ms = values["log.roll.ms"] if values["log.roll.ms"] is not None else values["log.roll.hours"] * 3_600_000
        jitter_ms = (
            values["log.roll.jitter.ms"]
            if values["log.roll.jitter.ms"] is not None
            else values["log.roll.jitter.hours"] * 3_600_000
        )
        flush_ms = values["log.flush.interval.ms"]
        if flush_ms is None:
            flush_ms = values["log.flush.scheduler.interval.ms"]
        _parse_ip_overrides(values["max.connections.per.ip.overrides"])
        voters = _parse_voters(values["controller.quorum.voters"])
        if len(voters) > 1 and "controller" in roles and values["node.id"] not in {v.node_id for v in voters}:
            raise ConfigError(f"invalid value for 'controller.quorum.voters': node.id {values['node.id']} "
                              "is not among them")
        if values["group.min.session.timeout.ms"] > values["group.max.session.timeout.ms"]:
            raise ConfigError(
                "invalid value for 'group.min.session.timeout.ms': greater than group.max.session.timeout.ms"
            )
        return cls(
            raw=dict(props),
            node_id=values["node.id"],
            process_roles=roles,
            listeners=listeners,
            advertised_listeners=advertised,
            listener_security_protocol_map=protocol_map,
            controller_listener_names=controller_names,
            controller_quorum_voters=voters,
            controller_quorum_bootstrap_servers=tuple(
                _parse_host_port("controller.quorum.bootstrap.servers", s)
                for s in values["controller.quorum.bootstrap.servers"]
            ),
            inter_broker_listener_name=ibl,
            log_dirs=log_dirs,
            log_roll_ms=roll_ms,
            log_roll_jitter_ms=jitter_ms,
            log_retention_ms=_retention_ms(values),
            log_flush_interval_ms=flush_ms,
            values=values,
            listener_securities=securities,
        )

    # -- typed access -------------------------------------------------------------------------

    def get(self, key: str) -> Any:
        """The typed value of any accepted broker key (its default when not set)."""
        if key not in self.values:
            raise KeyError(key)
        return self.values[key]

    def is_set(self, key: str) -> bool:
        """True when `key` came from the properties file (STATIC_BROKER_CONFIG)."""
        return key in self.raw

    def advertised_listener(self, name: str | None = None) -> Listener:
        """The advertised listener clients of listener `name` should use (first one by default)."""
        for lst in self.advertised_listeners:
            if name is None or lst.name == name:
                return lst
        if name is not None:
            return self.advertised_listener(None)
        raise ConfigError("invalid value for 'advertised.listeners': no listener to advertise")

    @property
    def num_partitions(self) -> int:
        return int(self.values["num.partitions"])

    @property
    def default_replication_factor(self) -> int:
        return int(self.values["default.replication.factor"])

    @property
    def auto_create_topics_enable(self) -> bool:
        return bool(self.values["auto.create.topics.enable"])

    @property
    def delete_topic_enable(self) -> bool:
        return bool(self.values["delete.topic.enable"])

    @property
    def message_max_bytes(self) -> int:
        return int(self.values["message.max.bytes"])

    @property
    def log_segment_bytes(self) -> int:
        return int(self.values["log.segment.bytes"])

    @property
    def log_retention_bytes(self) -> int:
        return int(self.values["log.retention.bytes"])

    @property
    def log_retention_check_interval_ms(self) -> int:
        return int(self.values["log.retention.check.interval.ms"])

    @property
    def log_flush_interval_messages(self) -> int:
        return int(self.values["log.flush.interval.messages"])

    @property
    def log_index_interval_bytes(self) -> int:
        return int(self.values["log.index.interval.bytes"])

    @property
    def log_segment_delete_delay_ms(self) -> int:
        return int(self.values["log.segment.delete.delay.ms"])

    @property
    def log_cleanup_policy(self) -> list[str]:
        return list(self.values["log.cleanup.policy"])

    @property
    def log_message_timestamp_type(self) -> str:
        return str(self.values["log.message.timestamp.type"])

    @property
    def min_insync_replicas(self) -> int:
        return int(self.values["min.insync.replicas"])

    @property
    def unclean_leader_election_enable(self) -> bool:
        return bool(self.values["unclean.leader.election.enable"])

    @property
    def offsets_topic_num_partitions(self) -> int:
        return int(self.values["offsets.topic.num.partitions"])

    @property
    def offsets_topic_replication_factor(self) -> int:
        return int(self.values["offsets.topic.replication.factor"])

    @property
    def offsets_retention_minutes(self) -> int:
        return int(self.values["offsets.retention.minutes"])

    @property
    def group_initial_rebalance_delay_ms(self) -> int:
        return int(self.values["group.initial.rebalance.delay.ms"])

    @property
    def group_min_session_timeout_ms(self) -> int:
        return int(self.values["group.min.session.timeout.ms"])

    @property
    def group_max_session_timeout_ms(self) -> int:
        return int(self.values["group.max.session.timeout.ms"])

    @property
    def group_max_size(self) -> int:
        return int(self.values["group.max.size"])

    @property
    def socket_request_max_bytes(self) -> int:
        return int(self.values["socket.request.max.bytes"])

    def cordoned_log_dirs(self, node_configs: Mapping[str, str]) -> list[str]:
        """The log directories cordoned now (KIP-1066), given this broker's dynamic configs."""
        return cordoned_log_dirs.cordoned(self.raw.get("cordoned.log.dirs"), node_configs, self.log_dirs)

    @property
    def max_request_partition_size_limit(self) -> int:
        return int(self.values["max.request.partition.size.limit"])

    @property
    def max_connections_per_ip_overrides(self) -> dict[str, int]:
        return _parse_ip_overrides(self.values["max.connections.per.ip.overrides"])

    @property
    def broker_rack(self) -> str | None:
        rack = self.values["broker.rack"]
        return None if rack is None else str(rack)

    @property
    def replica_lag_time_max_ms(self) -> int:
        return int(self.values["replica.lag.time.max.ms"])

    @property
    def replica_fetch_max_bytes(self) -> int:
        return int(self.values["replica.fetch.max.bytes"])

    @property
    def auto_leader_rebalance_enable(self) -> bool:
        return bool(self.values["auto.leader.rebalance.enable"])

    @property
    def leader_imbalance_check_interval_seconds(self) -> int:
        return int(self.values["leader.imbalance.check.interval.seconds"])

    @property
    def metrics_port(self) -> int:
        return int(self.values["metrics.port"])

    @property
    def cluster_id(self) -> str | None:
        cid = self.values["cluster.id"]
        return None if cid is None else str(cid)

    @property
    def is_broker(self) -> bool:
        return "broker" in self.process_roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.process_roles


def _retention_ms(values: Mapping[str, Any]) -> int:
    """Kafka precedence: log.retention.ms > .minutes > .hours; negative means unlimited (-1)."""
    if values["log.retention.ms"] is not None:
        ms = int(values["log.retention.ms"])
    elif values["log.retention.minutes"] is not None:
        ms = int(values["log.retention.minutes"]) * 60_000
    else:
        ms = int(values["log.retention.hours"]) * 3_600_000
    if ms < -1:
        raise ConfigError(f"invalid value '{ms}' for 'log.retention.ms': expected -1 or a value >= 0")
    return ms


def _parse_ip_overrides(text: str | None) -> dict[str, int]:
    """Kafka's `max.connections.per.ip.overrides`: `host:count,host:count`."""
    out: dict[str, int] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        if not sep or not host or not count.strip().isdigit():
            raise ConfigError(f"invalid value {item!r} for 'max.connections.per.ip.overrides': expected host:count")
        out[host.strip()] = int(count)
    return out


def _parse_protocol_map(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, sep, proto = item.partition(":")
        if not sep or not name or not proto:
            raise ConfigError(f"invalid value {item!r} for 'listener.security.protocol.map': expected NAME:PROTOCOL")
        out[name.strip().upper()] = proto.strip().upper()
    return out


def _parse_host_port(key: str, text: str) -> tuple[str, int]:
    host, sep, port_text = text.rpartition(":")
    if not sep:
        raise ConfigError(f"invalid value {text!r} for {key!r}: expected host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_text)
    except ValueError:
        raise ConfigError(f"invalid value {text!r} for {key!r}: expected a numeric port") from None
    if not 0 <= port <= 65535:
        raise ConfigError(f"invalid value {text!r} for {key!r}: port out of range")
    return host, port


def _parse_listeners(key: str, items: list[str], protocol_map: Mapping[str, str]) -> tuple[Listener, ...]:
    out: list[Listener] = []
    for item in items:
        name, sep, rest = item.partition("://")
        if not sep or not name:
            raise ConfigError(f"invalid value {item!r} for {key!r}: expected NAME://host:port")
        name = name.upper()
        host, port = _parse_host_port(key, rest)
        proto = protocol_map.get(name)
        if proto is None:
            raise ConfigError(f"invalid value {item!r} for {key!r}: listener {name} not in listener.security.protocol.map")
        if proto not in SUPPORTED_SECURITY_PROTOCOLS:
            raise ConfigError(f"invalid value {item!r} for {key!r}: security protocol {proto} is not supported")
        if any(lst.name == name for lst in out):
            raise ConfigError(f"invalid value {item!r} for {key!r}: duplicate listener name {name}")
        out.append(Listener(name, host, port))
    return tuple(out)


def _listener_securities(props: Mapping[str, str], listeners: tuple[Listener, ...],
                         protocol_map: Mapping[str, str]) -> dict[str, ListenerSecurity]:
    out: dict[str, ListenerSecurity] = {}
    for lst in listeners:
        try:
            out[lst.name] = listener_security(props, lst.name, protocol_map[lst.name])
        except ListenerConfigError as exc:
            raise ConfigError(str(exc)) from None
    return out


def _parse_voters(items: list[str]) -> tuple[QuorumVoter, ...]:
    out: list[QuorumVoter] = []
    for item in items:
        id_text, sep, rest = item.partition("@")
        try:
            node_id = int(id_text)
        except ValueError:
            node_id = -1
        if not sep or node_id < 0:
            raise ConfigError(f"invalid value {item!r} for 'controller.quorum.voters': expected id@host:port")
        host, port = _parse_host_port("controller.quorum.voters", rest)
        out.append(QuorumVoter(node_id, host, port))
    return tuple(out)
