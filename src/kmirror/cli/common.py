"""Arguments and helpers shared by the command groups that talk to a cluster."""

from __future__ import annotations

import argparse
import base64
import uuid

from kmirror.cli.errors import CommandError


def add_bootstrap_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT",
                        help="broker(s) to connect to, comma-separated")
    parser.add_argument("--command-timeout-ms", type=int, default=30_000, help=argparse.SUPPRESS)


def parse_key_values(items: list[str] | None, option: str) -> dict[str, str]:
    """`k=v` items (each may itself be comma-separated, as kafka-configs.sh accepts)."""
    out: dict[str, str] = {}
    for item in items or []:
        for part in item.split(","):
            if not part:
                continue
            key, sep, value = part.partition("=")
            if not sep or not key:
                raise CommandError(f"{option} expects key=value, got '{part}'")
            out[key.strip()] = value.strip()
    return out


def kafka_uuid(value: uuid.UUID | None) -> str:
    """Kafka's `Uuid.toString()`: URL-safe base64 of the 16 bytes, no padding."""
    if value is None:
        return "AAAAAAAAAAAAAAAAAAAAAA"
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")
