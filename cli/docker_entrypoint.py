"""Questions the Docker entry point (docker/entrypoint.sh) asks tidelog before it runs.

``python -m tidelog.cli.docker_entrypoint log-dirs [serve arguments]`` prints the log dirs
``tidelog serve`` would use with these arguments and the ``TIDELOG_*`` variables, one per line,
so the "is the volume writable" check follows whichever setting names the dirs (``log.dirs``
or ``log.dir``, from the environment, ``--config`` or ``--override``). A configuration
``serve`` would refuse prints nothing: ``serve`` then reports it in its own words. Nor do
``--help``, ``--version`` or a bad flag: ``serve`` prints those itself, and nothing argparse
writes may reach the list (the entry point makes a directory of every line it gets).

``python -m tidelog.cli.docker_entrypoint is-command NAME`` exits 0 when NAME is a tidelog
sub-command (``topics``, ``config-reference``, a plug-in added later ...), 1 when it is not.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Sequence


def log_dirs(argv: Sequence[str]) -> list[str]:
    from tidelog.cli import build_parser
    from tidelog.config import ConfigError, load_broker_config

    quiet = io.StringIO()
    try:
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            args = build_parser().parse_args(["serve", *argv])
            return load_broker_config(args.config, args.override).log_dirs
    except (SystemExit, ConfigError):
        return []


def commands() -> list[str]:
    """The sub-commands ``tidelog`` has (serve and every tool plug-in)."""
    from tidelog.cli import build_parser

    parser = build_parser()
    for action in parser._actions:
        if action.dest == "command" and action.choices is not None:
            return sorted(action.choices)
    return []


def main(argv: Sequence[str]) -> int:
    if argv[:1] == ["log-dirs"]:
        for path in log_dirs(argv[1:]):
            print(path)
        return 0
    if argv[:1] == ["is-command"] and len(argv) == 2:
        return 0 if argv[1] in commands() else 1
    print("usage: _entrypoint log-dirs [serve arguments] | is-command NAME", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
