"""`--command-config FILE`: the admin client's properties, as every Kafka admin tool reads
them (kafka-topics.sh, kafka-configs.sh, kafka-mirrors.sh, ...; kafka-leader-election.sh
names it `--admin.config`), turned into `Admin.connect` keyword arguments."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from kmirror.cli.common import add_bootstrap_argument
from kmirror.cli.errors import CommandError
from kmirror.config.properties import PropertiesSyntaxError, parse_properties
from kmirror.security.client_config import CLIENT_SECURITY_KEYS, SecurityConfigError, client_security

# Client properties `--command-config` may carry without effect here.
_IGNORED_CLIENT_KEYS = frozenset({
    "bootstrap.servers", "retries", "retry.backoff.ms", "retry.backoff.max.ms", "metadata.max.age.ms",
    "connections.max.idle.ms", "reconnect.backoff.ms", "reconnect.backoff.max.ms", "client.dns.lookup",
    "default.api.timeout.ms", "receive.buffer.bytes", "send.buffer.bytes",
})


def add_admin_arguments(parser: argparse.ArgumentParser, config_option: str = "--command-config") -> None:
    """`--bootstrap-server` and the admin client's property file."""
    add_bootstrap_argument(parser)
    parser.add_argument(config_option, dest="command_config", metavar="FILE",
                        help="property file containing configs passed to the admin client")


def admin_options(args: argparse.Namespace) -> dict[str, Any]:
    """`Admin.connect` keyword arguments from `add_admin_arguments`' options."""
    props = read_properties(args.command_config, "--command-config") if args.command_config else {}
    return client_options(props, args.command_timeout_ms)


def read_properties(path: str, option: str) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise CommandError(f"{option}: cannot read {path}: {exc.strerror or exc}") from None
    try:
        return parse_properties(text)
    except PropertiesSyntaxError as exc:
        raise CommandError(f"{option}: {path}: {exc}") from None


def client_options(props: Mapping[str, str], request_timeout_ms: int) -> dict[str, Any]:
    """Admin.connect keyword arguments for `--command-config` properties: `security.protocol`,
    `ssl.*` and `sasl.*` as Kafka's clients take them (kmirror.security.client_config); a
    value this client cannot honour, or an unknown property, is an error rather than ignored."""
    try:
        security = client_security(props)
    except SecurityConfigError as exc:
        raise CommandError(f"--command-config: {exc}") from None
    out: dict[str, Any] = {"request_timeout_ms": request_timeout_ms, "security": security}
    for key, value in sorted(props.items()):
        if key == "client.id":
            out["client_id"] = value
        elif key == "request.timeout.ms":
            out["request_timeout_ms"] = _int_property(key, value)
        elif key == "socket.connection.setup.timeout.ms":
            out["connect_timeout_ms"] = _int_property(key, value)
        elif key not in _IGNORED_CLIENT_KEYS and key not in CLIENT_SECURITY_KEYS:
            raise CommandError(f"--command-config: unknown or unsupported client property {key}")
    return out


def _int_property(key: str, value: str) -> int:
    if not value.strip().isdigit():
        raise CommandError(f"--command-config: {key} must be a non-negative integer, got '{value}'")
    return int(value)
