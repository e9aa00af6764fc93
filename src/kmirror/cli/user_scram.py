"""`kmirror configs --entity-type users`: SCRAM credentials, as kafka-configs.sh (KIP-554).

  --alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=...]'
  --alter --delete-config 'SCRAM-SHA-256'
  --describe [--entity-name alice]

Iterations default to 4096 (Kafka's default). The client draws the salt and sends the salted
password (AlterUserScramCredentials); the broker never sees the password. `split_scram_configs`
separates SCRAM keys from other user configs so the other kinds of user config can share the
same `--add-config` / `--delete-config` arguments.
"""

from __future__ import annotations

import argparse

from kmirror.cli.command_config import admin_options
from kmirror.cli.errors import CommandError
from kmirror.client.admin import Admin
from kmirror.client.errors import KafkaError
from kmirror.client.scram_credentials import ScramDelete, ScramUpsert
from kmirror.security.scram import SCRAM_MECHANISM_NAMES, ScramMechanism

DEFAULT_ITERATIONS = 4096


def split_top_level(text: str) -> list[str]:
    """`a=[x=1,y=2],b=3` -> ['a=[x=1,y=2]', 'b=3']: commas inside brackets do not split."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if depth != 0:
        raise CommandError(f"unbalanced brackets in '{text}'")
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def _scram_upsert(user: str, key: str, value: str) -> ScramUpsert:
    mechanism = ScramMechanism.from_mechanism_name(key)
    assert mechanism is not None
    body = value[1:-1] if value.startswith("[") and value.endswith("]") else value
    fields: dict[str, str] = {}
    for part in split_top_level(body):
        k, sep, v = part.partition("=")
        if not sep:
            raise CommandError(f"{key} expects [iterations=N,password=P] or password=P, got '{value}'")
        fields[k.strip()] = v
    unknown = sorted(set(fields) - {"iterations", "password"})
    if unknown:
        raise CommandError(f"unknown {key} field(s): {', '.join(unknown)} (expected iterations, password)")
    if "password" not in fields:
        raise CommandError(f"{key} needs password=...")
    try:
        iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise CommandError(f"invalid iterations for {key}: '{fields['iterations']}'") from None
    return ScramUpsert(user, mechanism, iterations, fields["password"])


def split_scram_configs(user: str, add_config: list[str] | None, delete_config: list[str] | None
                        ) -> tuple[list[ScramUpsert | ScramDelete], list[str], list[str]]:
    """(SCRAM alterations, other `k=v` additions, other deleted keys)."""
    alterations: list[ScramUpsert | ScramDelete] = []
    other_adds: list[str] = []
    other_deletes: list[str] = []
    for item in add_config or []:
        for part in split_top_level(item):
            key, sep, value = part.partition("=")
            key = key.strip()
            if not sep or not key:
                raise CommandError(f"--add-config expects key=value, got '{part}'")
            if key in SCRAM_MECHANISM_NAMES:
                alterations.append(_scram_upsert(user, key, value.strip()))
            else:
                other_adds.append(part)
    for item in delete_config or []:
        for key in (k.strip() for k in item.split(",")):
            mechanism = ScramMechanism.from_mechanism_name(key)
            if mechanism is not None:
                alterations.append(ScramDelete(user, mechanism))
            elif key:
                other_deletes.append(key)
    return alterations, other_adds, other_deletes


def format_scram_description(user: str, credentials: list[tuple[ScramMechanism, int]]) -> str:
    infos = ", ".join(f"{m.mechanism_name}=iterations={it}" for m, it in credentials)
    return f"SCRAM credential configs for user-principal '{user}' are {infos}"


async def run_users(args: argparse.Namespace) -> int:
    """`--entity-type users`, SCRAM credentials only."""
    if args.entity_default:
        raise CommandError("--entity-default is not supported for SCRAM credentials (they belong to one user)")
    async with await Admin.connect(args.bootstrap_server, **admin_options(args)) as admin:
        if args.alter:
            if not args.entity_name:
                raise CommandError("--entity-name is required to alter a user's SCRAM credentials")
            alterations, adds, deletes = split_scram_configs(args.entity_name, args.add_config, args.delete_config)
            if adds or deletes:
                raise CommandError(f"unsupported user config(s): {', '.join([*adds, *deletes])} "
                                   f"(supported: {', '.join(SCRAM_MECHANISM_NAMES)})")
            if not alterations:
                raise CommandError("--alter needs --add-config or --delete-config")
            results = await admin.alter_user_scram_credentials(alterations)
            errors = [err for err in results.values() if err is not None]
            if errors:
                raise CommandError(f"altering SCRAM credentials of user {args.entity_name} failed: {errors[0]}")
            print(f"Completed updating config for user {args.entity_name}.")
            return 0
        found = await admin.describe_user_scram_credentials(None if not args.entity_name else [args.entity_name])
        for user, creds in found.items():
            if isinstance(creds, KafkaError):
                if args.entity_name:
                    print(f"No SCRAM credentials for user-principal '{user}'")
                    continue
                raise CommandError(str(creds))
            print(format_scram_description(user, creds))
    return 0
