"""``tidelog storage format``: prepare the log dirs before the first start, and create the first
SCRAM credentials offline (kafka-storage.sh format --add-scram), so a broker whose listeners all
need SCRAM can be administered from its first second.

``--add-scram 'SCRAM-SHA-256=[name=admin,password=admin-secret]'`` (repeatable; ``iterations=``
optional, default 4096) salts and hashes the password here and writes only the credential
(``<first log dir>/__scram_credentials.json``, mode 0600, written atomically).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tidelog.tools._common import EXIT_OK, SubParsers, ToolError, add_tool_parser
from tidelog.tools._scram_spec import parse_scram_specs

__all__ = ["add_parser", "run"]

EXAMPLES = """\
  tidelog storage format --config broker.yaml \\
      --add-scram 'SCRAM-SHA-256=[name=admin,password=admin-secret]'
  tidelog storage format --override log.dirs=/var/lib/tidelog \\
      --add-scram 'SCRAM-SHA-512=[name=admin,iterations=8192,password=admin-secret]'
"""


def add_parser(subparsers: SubParsers) -> None:
    p = add_tool_parser(
        subparsers,
        "storage",
        help="format the log dirs and add SCRAM credentials offline (like kafka-storage.sh)",
        description="Create the log dirs of a broker configuration and, with --add-scram, the "
        "first SCRAM credentials (the broker must not be running).",
        examples=EXAMPLES,
        run=run,
    )
    p.add_argument("action", choices=("format",), help="format")
    p.add_argument("--config", type=Path, help="the broker's YAML file")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument(
        "--add-scram",
        action="append",
        default=[],
        metavar="SPEC",
        help="MECHANISM=[name=USER,password=PASSWORD,iterations=N] (repeatable)",
    )


def run(args: argparse.Namespace) -> int:
    from tidelog.config import ConfigError, load_broker_config
    from tidelog.storage.scram_credentials import (
        MAX_ITERATIONS,
        MIN_ITERATIONS,
        STORE_FILE,
        ScramCredentialStore,
        credential_from_password,
    )

    try:
        config = load_broker_config(args.config, args.override)
    except ConfigError as exc:
        raise ToolError(f"bad configuration: {exc}", 2) from None
    dirs = [Path(d) for d in config.log_dirs]
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
    store = ScramCredentialStore(dirs[0] / STORE_FILE)
    for text in args.add_scram:
        for spec in parse_scram_specs(text):
            user = spec.options.get("name")
            if not user:
                raise ToolError(f"{spec.mechanism}: give name=USER inside the brackets", 2)
            if not MIN_ITERATIONS <= spec.iterations <= MAX_ITERATIONS:
                raise ToolError(
                    f"iterations must be {MIN_ITERATIONS}..{MAX_ITERATIONS} (Kafka's bounds)", 2
                )
            credential = credential_from_password(spec.mechanism, spec.password, spec.iterations)
            store.put(user, spec.mechanism, credential)
            print(
                f"Added {spec.mechanism} credential of user {user!r} ({spec.iterations} "
                "iterations)."
            )
    if args.add_scram:
        store.save()
    print(f"Formatted {', '.join(str(d) for d in dirs)}.")
    return EXIT_OK
