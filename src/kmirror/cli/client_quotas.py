"""`kmirror configs` for client quotas, as kafka-configs.sh: `--entity-type users|clients|ips`
with `--entity-name N` or `--entity-default`, or the shortcuts `--user N`, `--client N`,
`--ip N`, `--user-defaults`, `--client-defaults`, `--ip-defaults` (`--user alice --client app`
is the `<user, client-id>` entity).

`--alter --add-config 'producer_byte_rate=1024,consumer_byte_rate=2048'` sets keys,
`--delete-config k1,k2` removes them; a value that is not a number is refused here ("Cannot
parse quota configuration value"), a key or entity the broker does not accept comes back as
its error (INVALID_REQUEST). `--describe` prints kafka-configs.sh's
`Quota configs for user-principal 'alice' are producer_byte_rate=1024.0` per entity that has
exactly the named types (Kafka's `containsOnly` filter); an unnamed type matches any name.
"""

from __future__ import annotations

import argparse

from kmirror.cli.command_config import admin_options
from kmirror.cli.common import parse_key_values
from kmirror.cli.errors import CommandError
from kmirror.client.admin import Admin
from kmirror.client.quotas import QuotaFilterComponent

QUOTA_ENTITY_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
_SHORTCUTS = (("user", "user"), ("client", "client-id"), ("ip", "ip"))
_LABELS = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    for option, _ in _SHORTCUTS:
        p.add_argument(f"--{option}", metavar="NAME", help=f"the {option} quota entity (kafka-configs.sh --{option})")
        p.add_argument(f"--{option}-defaults", action="store_true", help=f"the default {option} quota entity")


def is_quota_command(args: argparse.Namespace) -> bool:
    return args.entity_type in QUOTA_ENTITY_TYPES or any(
        getattr(args, option) is not None or getattr(args, f"{option}_defaults") for option, _ in _SHORTCUTS)


def components(args: argparse.Namespace) -> list[QuotaFilterComponent]:
    """The entity named on the command line, one component per entity type."""
    out: dict[str, QuotaFilterComponent] = {}
    if args.entity_type is not None:
        if args.entity_type not in QUOTA_ENTITY_TYPES:
            raise CommandError(f"--entity-type {args.entity_type} cannot be combined with --user/--client/--ip")
        entity_type = QUOTA_ENTITY_TYPES[args.entity_type]
        out[entity_type] = QuotaFilterComponent(entity_type, args.entity_name, default=bool(args.entity_default))
    for option, entity_type in _SHORTCUTS:
        name, default = getattr(args, option), getattr(args, f"{option}_defaults")
        if name is None and not default:
            continue
        if entity_type in out:
            raise CommandError(f"the {entity_type} entity is named twice")
        out[entity_type] = QuotaFilterComponent(entity_type, name, default=default)
    return list(out.values())


def quota_ops(args: argparse.Namespace) -> dict[str, float | None]:
    adds = parse_key_values(args.add_config, "--add-config")
    deletes = [k.strip() for item in args.delete_config or [] for k in item.split(",") if k.strip()]
    if not adds and not deletes:
        raise CommandError("--alter needs --add-config or --delete-config")
    both = sorted(set(adds) & set(deletes))
    if both:
        raise CommandError(f"config(s) both added and deleted: {', '.join(both)}")
    ops: dict[str, float | None] = {}
    for key, value in adds.items():
        try:
            ops[key] = float(value)
        except ValueError:
            raise CommandError(f"Cannot parse quota configuration value for {key}: {value}") from None
    ops.update({key: None for key in deletes})
    return ops


def entity_label(entity: dict[str, str | None]) -> str:
    order = ("user", "client-id", "ip")
    return ", ".join(
        f"the default {_LABELS.get(t, t)}" if n is None else f"{_LABELS.get(t, t)} '{n}'"
        for t, n in sorted(entity.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else 3))


async def run(args: argparse.Namespace) -> int:
    wanted = components(args)
    async with await Admin.connect(args.bootstrap_server, **admin_options(args)) as admin:
        if args.alter:
            for c in wanted:
                if c.name is None and not c.default:
                    raise CommandError("--alter needs --entity-name or --entity-default for every entity type")
            entity = {c.entity_type: c.name for c in wanted}
            await admin.alter_client_quotas(entity, quota_ops(args))
            print(f"Completed updating config for {entity_label(entity)}.")
            return 0
        for entity, values in await admin.describe_client_quotas(wanted, strict=True):
            settings = ", ".join(f"{k}={v!r}" for k, v in sorted(values.items()))
            print(f"Quota configs for {entity_label(entity)} are {settings}")
    return 0
