"""`kmirror delegation-tokens`: kafka-delegation-tokens.sh (KIP-48), with its options and lines.

  --create [--max-life-time-period MS] [--renewer-principal User:bob ...] [--owner-principal User:carol]
  --renew --hmac HMAC [--renew-time-period MS]
  --expire --hmac HMAC [--expiry-time-period MS]   (a negative period removes the token now)
  --describe [--owner-principal User:alice ...]

Tokens are asked for over an authenticated connection (`--command-config` with SASL or a TLS
client certificate): never over PLAINTEXT, nor over a token. Dates are UTC, `yyyy-MM-ddTHH:mm`.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import datetime

from kmirror.cli.acl_bindings import parse_principal
from kmirror.cli.command_config import add_admin_arguments, admin_options
from kmirror.cli.errors import CommandError
from kmirror.client.admin import Admin
from kmirror.client.delegation_tokens import DelegationToken


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("delegation-tokens", help="create, renew, expire and describe delegation tokens "
                                                        "(kafka-delegation-tokens.sh)")
    add_admin_arguments(p)
    action = p.add_mutually_exclusive_group(required=True)
    for name in ("create", "renew", "expire", "describe"):
        action.add_argument(f"--{name}", action="store_true", help=f"{name} delegation tokens")
    p.add_argument("--max-life-time-period", type=int, default=-1, metavar="MS",
                   help="a created token's max life (-1: the server's delegation.token.max.lifetime.ms)")
    p.add_argument("--renewer-principal", action="append", default=[], metavar="PRINCIPAL",
                   help="a principal (User:name) that may renew the created token; may be repeated")
    p.add_argument("--owner-principal", action="append", default=[], metavar="PRINCIPAL",
                   help="--create: the token's owner (needs CREATE_TOKENS on that user); --describe: the owners "
                        "whose tokens to list (default: all)")
    p.add_argument("--hmac", metavar="HMAC", help="the token's HMAC (base64), for --renew and --expire")
    p.add_argument("--renew-time-period", type=int, default=-1, metavar="MS",
                   help="--renew: how long from now (-1: the server's delegation.token.expiry.time.ms)")
    p.add_argument("--expiry-time-period", type=int, default=-1, metavar="MS",
                   help="--expire: how long from now (negative: at once)")
    p.set_defaults(func=run)


def _date(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M")


def format_tokens(tokens: list[DelegationToken]) -> list[str]:
    row = "{:<15} {:<30} {:<15} {:<15} {:<25} {:<15} {:<15} {:<15}"
    lines = ["", row.format("TOKENID", "HMAC", "OWNER", "REQUESTER", "RENEWERS", "ISSUEDATE", "EXPIRYDATE", "MAXDATE")]
    lines += [row.format(t.token_id, t.hmac_base64, t.owner, t.requester, "[" + ", ".join(t.renewers) + "]",
                         _date(t.issue_timestamp_ms), _date(t.expiry_timestamp_ms), _date(t.max_timestamp_ms))
              for t in tokens]
    return lines


def _hmac(args: argparse.Namespace) -> bytes:
    if not args.hmac:
        raise CommandError("--hmac is required with --renew and --expire")
    try:
        return base64.b64decode(args.hmac, validate=True)
    except (binascii.Error, ValueError):
        raise CommandError("--hmac: not base64") from None


async def run(args: argparse.Namespace) -> int:
    async with await Admin.connect(args.bootstrap_server, **admin_options(args)) as admin:
        if args.create:
            renewers = [parse_principal(p) for p in args.renewer_principal]
            owners = [parse_principal(p) for p in args.owner_principal]
            if len(owners) > 1:
                raise CommandError("--owner-principal: a token has one owner")
            print(f"Calling create token operation with renewers :[{', '.join(renewers)}] , "
                  f"max-life-time-period :{args.max_life_time_period}")
            token = await admin.create_delegation_token(renewers=renewers, owner=owners[0] if owners else None,
                                                        max_lifetime_ms=args.max_life_time_period)
            print(f"Created delegation token with tokenId : {token.token_id}")
            print("\n".join(format_tokens([token])))
        elif args.renew:
            mac = _hmac(args)
            print(f"Calling renew token operation with hmac :{args.hmac} , renew-time-period :{args.renew_time_period}")
            expiry = await admin.renew_delegation_token(mac, args.renew_time_period)
            print(f"Completed renew operation. New expiry date : {_date(expiry)}")
        elif args.expire:
            mac = _hmac(args)
            print(f"Calling expire token operation with hmac :{args.hmac} , "
                  f"expire-time-period :{args.expiry_time_period}")
            expiry = await admin.expire_delegation_token(mac, args.expiry_time_period)
            print(f"Completed expire operation. New expiry date : {_date(expiry)}")
        else:
            owners = [parse_principal(p) for p in args.owner_principal]
            print(f"Calling describe token operation for owners :[{', '.join(owners)}]")
            tokens = await admin.describe_delegation_tokens(owners or None)
            print(f"Total number of tokens : {len(tokens)}")
            print("\n".join(format_tokens(tokens)))
    return 0
