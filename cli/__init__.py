"""The ``tidelog`` command (``tidelog serve`` and the tools), at the package's top.

``python -m tidelog`` and the ``tidelog`` console script run ``main``. The broker does not know
this module or the tools exist (an import-linter contract in pyproject.toml): the command
imports the broker, never the other way round.

Plug-in point: ``serve`` (``cli/serve.py``) and every module ``tools/<name>.py`` that defines
``add_parser(subparsers: argparse._SubParsersAction) -> None`` add their own sub-command. The
parser added must ``set_defaults(func=<callable(args) -> int>)``; ``main`` calls it and exits
with the number it returns. Example::

    def add_parser(subparsers):
        p = subparsers.add_parser("dump-log", help="print the batches of a segment file")
        p.add_argument("path")
        p.set_defaults(func=run)

    def run(args: argparse.Namespace) -> int:
        ...
        return 0
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import cast

from tidelog.cli import serve
from tidelog.cli.arguments import ToolParser, installed_version, lazy_version

__all__ = ("build_parser", "main")


def _add_tools(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    import pkgutil

    try:
        tools = importlib.import_module("tidelog.tools")
    except ImportError:
        return
    for info in sorted(pkgutil.iter_modules(tools.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"tidelog.tools.{info.name}")
        add_parser = getattr(module, "add_parser", None)
        if callable(add_parser):
            add_parser(subparsers)


def build_parser(*, tools: bool = True) -> argparse.ArgumentParser:
    """The whole command line; ``tools=False`` leaves the plug-in tools out (``serve`` does not
    need them, and importing them all costs ~80 ms of start-up)."""
    parser = ToolParser(
        prog="tidelog", description="A single-node broker that speaks the Kafka protocol."
    )
    parser.add_argument("--version", action=lazy_version(installed_version))
    # ToolParser's sub-commands are ToolParsers (argparse makes them of the parent's class)
    subparsers = cast(
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        parser.add_subparsers(dest="command", metavar="COMMAND"),
    )
    subparsers.required = True
    serve.add_parser(subparsers)
    if tools:
        _add_tools(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser(tools=args_in[:1] != ["serve"])
        args = parser.parse_args(args_in)
        code = args.func(args)
    except KeyboardInterrupt:  # Ctrl-C before a command's own handler took over (imports)
        print("tidelog: interrupted", file=sys.stderr)
        return 130
    return int(code or 0)
