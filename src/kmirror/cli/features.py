"""`kmirror features`: kafka-features.sh (describe, upgrade, downgrade, disable).

`describe` reads ApiVersions (v4 when the broker has it: v0-v3 omit features whose minimum
supported version is 0, such as `mirror.version`) and prints Kafka's line per supported
feature. `upgrade` / `downgrade` / `disable` send UpdateFeatures (API key 57) to the
controller; KIP-1279 enables cluster mirroring with `upgrade --feature mirror.version=1`.
"""

from __future__ import annotations

import argparse
import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum

from kmirror.cli.command_config import add_admin_arguments, admin_options
from kmirror.cli.errors import CommandError
from kmirror.client.admin import Admin
from kmirror.client.connection import CLIENT_SOFTWARE_NAME, CLIENT_SOFTWARE_VERSION
from kmirror.client.errors import KafkaError, check
from kmirror.client.protocol import API_VERSIONS_KEY, kio_versions, request_schema
from kmirror.protocol.entities import build, nested

UPDATE_FEATURES = 57


class UpgradeType(IntEnum):
    """Kafka's FeatureUpdate.UpgradeType (UpdateFeatures v1+)."""

    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


@dataclass(frozen=True, slots=True)
class FeatureDescription:
    name: str
    supported_min: int
    supported_max: int
    finalized_level: int  # 0 when not finalized
    epoch: int  # -1: unknown


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("features", help="describe and update cluster features (kafka-features.sh)")
    add_admin_arguments(p)
    commands = p.add_subparsers(dest="features_command", metavar="COMMAND", required=True)
    commands.add_parser("describe", help="describe the supported and finalized features")
    for name, text in (("upgrade", "upgrade one or more features"), ("downgrade", "downgrade one or more features"),
                       ("disable", "disable one or more features (finalized level 0)")):
        c = commands.add_parser(name, help=text)
        c.add_argument("--feature", action="append", required=True,
                       metavar="NAME=LEVEL" if name != "disable" else "NAME")
        c.add_argument("--dry-run", action="store_true", help="validate only, change nothing")
        if name != "upgrade":
            c.add_argument("--unsafe", action="store_true", help="allow a lossy (unsafe) downgrade")
    p.set_defaults(func=run)


def parse_feature_levels(items: Iterable[str], disable: bool = False) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        if disable:
            name, level = item.strip(), "0"
        else:
            name, sep, level = item.partition("=")
            name, level = name.strip(), level.strip()
            if not sep or not name:
                raise CommandError(f"--feature expects NAME=LEVEL, got '{item}'")
        if not name or not level.isdigit():
            raise CommandError(f"--feature {item}: the level must be a non-negative integer")
        if name in out:
            raise CommandError(f"--feature {name} given more than once")
        out[name] = int(level)
    return out


def format_features(features: Iterable[FeatureDescription]) -> list[str]:
    return [
        f"Feature: {f.name}\tSupportedMinVersion: {f.supported_min}\tSupportedMaxVersion: {f.supported_max}\t"
        f"FinalizedVersionLevel: {f.finalized_level}\tEpoch: {f.epoch if f.epoch >= 0 else '-'}"
        for f in sorted(features, key=lambda f: f.name)
    ]


async def describe_features(admin: Admin) -> list[FeatureDescription]:
    conn = await admin.cluster.any_connection()
    broker_max = conn.api_versions.get(API_VERSIONS_KEY, (0, 0))[1]
    version = max(v for v in kio_versions(API_VERSIONS_KEY) if v <= max(broker_max, 0))
    request = build(request_schema(API_VERSIONS_KEY, version), client_software_name=CLIENT_SOFTWARE_NAME,
                    client_software_version=CLIENT_SOFTWARE_VERSION)
    response = await conn.send(request)
    check(response.error_code, None, "ApiVersions")
    finalized = {f.name: int(f.max_version_level) for f in getattr(response, "finalized_features", ())}
    epoch = int(getattr(response, "finalized_features_epoch", -1))
    return [
        FeatureDescription(f.name, int(f.min_version), int(f.max_version), finalized.get(f.name, 0), epoch)
        for f in getattr(response, "supported_features", ())
    ]


async def update_features(
    admin: Admin, levels: Mapping[str, int], upgrade_type: UpgradeType, validate_only: bool
) -> dict[str, KafkaError | None]:
    """UpdateFeatures: feature -> None when applied (or valid, with `validate_only`), else its
    error: its own (older brokers answer per feature), or the top-level one (v2 has no other)."""
    conn = await admin.cluster.controller_connection()
    rt = conn.request_type(UPDATE_FEATURES)
    Update = nested(rt, "FeatureUpdateKey")
    request = build(
        rt,
        timeout=datetime.timedelta(milliseconds=admin.timeout_ms),
        feature_updates=tuple(
            build(Update, feature=name, max_version_level=level, upgrade_type=int(upgrade_type),
                  allow_downgrade=upgrade_type != UpgradeType.UPGRADE)
            for name, level in sorted(levels.items())
        ),
        validate_only=validate_only,
    )
    response = await conn.send(request)
    top = int(response.error_code)
    results: dict[str, KafkaError | None] = {}
    for r in getattr(response, "results", ()):
        code = int(r.error_code) or top
        results[r.feature] = KafkaError(code, r.error_message or response.error_message, r.feature) if code else None
    for name in levels:
        if name not in results:
            results[name] = KafkaError(top, response.error_message, name) if top else None
    return results


def format_update_results(
    command: str, levels: Mapping[str, int], results: Mapping[str, KafkaError | None], dry_run: bool
) -> tuple[list[str], int]:
    """kafka-features.sh's lines and the number of failed updates."""
    verb = {"upgrade": "upgraded", "downgrade": "downgraded", "disable": "disabled"}[command]
    lines: list[str] = []
    failed = 0
    for name in sorted(levels):
        level = levels[name]
        target = "" if command == "disable" else f" to {level}"
        error = results.get(name)
        if error is None:
            lines.append(f"{name} can be {verb}{target}." if dry_run else f"{name} was {verb}{target}.")
        else:
            failed += 1
            message = error.error_message or error.error_name
            lines.append(f"Could not {'disable' if command == 'disable' else command} {name}{target}. {message}")
    return lines, failed


async def run(args: argparse.Namespace) -> int:
    command = args.features_command
    levels: dict[str, int] = {}
    if command != "describe":
        levels = parse_feature_levels(args.feature, disable=command == "disable")
        if command == "upgrade" and any(level == 0 for level in levels.values()):
            raise CommandError("upgrade needs levels of at least 1 (use downgrade or disable)")
    async with await Admin.connect(args.bootstrap_server, **admin_options(args)) as admin:
        if command == "describe":
            print("\n".join(format_features(await describe_features(admin))))
            return 0
        upgrade_type = UpgradeType.UPGRADE
        if command != "upgrade":
            upgrade_type = UpgradeType.UNSAFE_DOWNGRADE if args.unsafe else UpgradeType.SAFE_DOWNGRADE
        results = await update_features(admin, levels, upgrade_type, args.dry_run)
    lines, failed = format_update_results(command, levels, results, args.dry_run)
    print("\n".join(lines))
    if failed:
        raise CommandError(f"{failed} out of {len(levels)} operation(s) failed.")
    return 0
