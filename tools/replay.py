"""``tidelog replay``: the analytics replay job (analytics/replay.py), as a tidelog sub-command.

The job, its options and its help are analytics'. The glue here adds what every tidelog tool
has: ``--version`` and ``--command-config FILE`` (Kafka client properties, translated by
``_client_config`` and handed to the job as ``kafka.*`` source options, the spelling of Spark's
Kafka source). When the analytics package cannot be imported the sub-command is simply absent.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tidelog.tools._client_config import ClientConfigError, client_settings, read_properties
from tidelog.tools._common import SubParsers, tool_version

__all__ = ["add_parser", "kafka_options"]


def add_parser(subparsers: SubParsers) -> None:
    try:
        from tidelog.analytics.replay import add_parser as add_replay
    except ImportError:  # pragma: no cover - analytics is part of the same distribution
        return
    p = add_replay(subparsers)
    p.add_argument("--version", action="version", version=tool_version())
    p.add_argument(
        "--command-config",
        metavar="FILE",
        help="Kafka client properties for --bootstrap-server (security.protocol, sasl.*, "
        "ssl.* ...)",
    )
    job = p.get_default("func")
    p.set_defaults(func=lambda args: _run(job, args))


def kafka_options(path: str) -> dict[str, str]:
    """Client properties of ``path`` as the job's ``kafka.*`` options (kafka-python's setting
    names with dots, e.g. ``kafka.sasl.plain.username``)."""
    kwargs = client_settings(read_properties(path), "consumer").kwargs
    return {f"kafka.{k.replace('_', '.')}": _text(v) for k, v in kwargs.items()}


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _run(job: Any, args: argparse.Namespace) -> int:
    if args.command_config:
        try:
            args.client_options = kafka_options(args.command_config)
        except ClientConfigError as exc:
            print(f"replay: --command-config: {exc}", file=sys.stderr)
            return 2
    return int(job(args))
