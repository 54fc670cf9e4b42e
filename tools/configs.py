"""``tidelog configs``: SCRAM credentials of users (kafka-configs.sh --entity-type users).

``--alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=...]'`` salts and hashes the
password here (PBKDF2) and sends only the salted password (AlterUserScramCredentials);
``--delete-config SCRAM-SHA-512`` removes one; ``--describe`` lists each user's mechanisms and
iteration counts (DescribeUserScramCredentials). Topic configs are set with ``tidelog topics
--alter --config``.
"""

from __future__ import annotations

import argparse
from typing import Any

from tidelog.tools._common import (
    EXIT_OK,
    SubParsers,
    ToolError,
    add_admin_options,
    add_timeout_ms,
    add_tool_parser,
    admin_session,
)
from tidelog.tools._scram_spec import MECHANISMS, parse_scram_specs

__all__ = ["add_parser", "run"]

EXAMPLES = """\
  tidelog configs --bootstrap-server 127.0.0.1:9092 --alter --entity-type users \\
      --entity-name alice --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
  tidelog configs --bootstrap-server 127.0.0.1:9092 --describe --entity-type users
  tidelog configs --bootstrap-server 127.0.0.1:9092 --alter --entity-type users \\
      --entity-name alice --delete-config SCRAM-SHA-512
"""


def add_parser(subparsers: SubParsers) -> None:
    p = add_tool_parser(
        subparsers,
        "configs",
        help="add, remove or list users' SCRAM credentials (like kafka-configs.sh)",
        description="Manage SCRAM credentials with kafka-configs.sh's options. Passwords are "
        "salted and hashed before they leave this process.",
        examples=EXAMPLES,
        run=run,
    )
    add_admin_options(
        p,
        (
            ("--alter", "add or delete credentials"),
            ("--describe", "list credentials"),
        ),
    )
    p.add_argument("--entity-type", required=True, choices=("users",), help="users")
    p.add_argument("--entity-name", metavar="USER", help="the user (all users for --describe)")
    p.add_argument("--add-config", metavar="SPEC", help="SCRAM-SHA-256=[iterations=N,password=P]")
    p.add_argument("--delete-config", metavar="MECHANISMS", help="SCRAM-SHA-256,SCRAM-SHA-512")
    add_timeout_ms(p)


def run(args: argparse.Namespace) -> int:
    if args.alter and not args.entity_name:
        raise ToolError("--alter needs --entity-name USER", 2)
    if args.alter and not (args.add_config or args.delete_config):
        raise ToolError("--alter needs --add-config or --delete-config", 2)
    from kafka.admin import UserScramCredentialDeletion, UserScramCredentialUpsertion

    alterations: list[Any] = []
    if args.alter:
        for spec in parse_scram_specs(args.add_config) if args.add_config else []:
            alterations.append(
                UserScramCredentialUpsertion(
                    args.entity_name, spec.mechanism, spec.password, iterations=spec.iterations
                )
            )
        for name in (args.delete_config or "").split(","):
            name = name.strip().upper()
            if not name:
                continue
            if name not in MECHANISMS:
                raise ToolError(f"unknown SCRAM mechanism {name!r} in --delete-config", 2)
            alterations.append(UserScramCredentialDeletion(args.entity_name, name))
    with admin_session(args, args.timeout_ms) as admin:
        if args.alter:
            results = admin.alter_user_scram_credentials(alterations)
            failed = {u: e for u, e in results.items() if e}
            for user, error in failed.items():
                print(f"Error altering SCRAM credentials of {user!r}: {error}")
            if failed:
                raise ToolError("the credentials were not changed")
            print(f"Completed updating config for user {args.entity_name}.")
            return EXIT_OK
        users = [args.entity_name] if args.entity_name else None
        described = admin.describe_user_scram_credentials(users)
        for user, info in sorted(described.items()):
            if info["error"]:
                print(f"SCRAM credentials of user-principal '{user}': {info['error']}")
                continue
            mechanisms = ",".join(
                f"{ci['mechanism'].name.replace('_', '-')}=iterations={ci['iterations']}"
                for ci in info["credential_infos"]
            )
            print(f"SCRAM credential configs for user-principal '{user}' are {mechanisms}")
        return EXIT_OK
