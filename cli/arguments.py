"""The argument parser of ``tidelog`` and every sub-command: unknown flags are named as typed.

Plain ``argparse`` gets two things wrong for a command line with sub-commands:

- a sub-command checks its required arguments before anything reports an unknown flag, so
  ``tidelog topics --lsit`` would say "the following arguments are required:
  --bootstrap-server", and ``tidelog serve --lsit`` would be refused by the top-level parser
  (``tidelog: error``, with the top-level usage);
- prefix matching (``allow_abbrev``) takes ``--conf`` for ``--config`` and answers a typo
  with "ambiguous option: ... could match" naming other flags.

``ToolParser`` (the class of the top-level parser, which ``add_subparsers`` hands to every
sub-command's parser) looks at the command line first: a flag that is not one of the parser's
is refused at once, by the parser it was given to, naming it and the closest known flags.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

__all__ = ("ToolParser", "installed_version", "lazy_version")

#: Flags Kafka's tools dropped -> (the flag that replaced them, the hint given when the parser
#: has that flag).
_RENAMED = {
    "--zookeeper": (
        "--bootstrap-server",
        "Kafka's tools take --bootstrap-server HOST:PORT since ZooKeeper was removed",
    ),
    "--broker-list": ("--bootstrap-server", "use --bootstrap-server, as Kafka's tools do now"),
}


class ToolParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` that names an unknown flag as typed, before other errors.

    Kafka divergence: Kafka's tools (jopt-simple) accept unambiguous abbreviations of long
    options; these take whole flags only (``allow_abbrev=False``), so that a typo is reported
    as itself rather than silently taken for, or refused as ambiguous with, another flag.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if args is None:
            args = sys.argv[1:]
        unknown = self._first_unknown_flag(args)
        if unknown is not None:
            self._unknown_flag(unknown)
        return super().parse_known_args(args, namespace)

    def _first_unknown_flag(self, args: Sequence[str]) -> str | None:
        """The first argument that is written as a flag but is none of this parser's, looking
        only at this parser's own part of the line (up to ``--``, or up to the sub-command)."""
        has_commands = any(isinstance(a, argparse._SubParsersAction) for a in self._actions)
        for arg in args:
            if arg == "--":
                return None
            if not arg.startswith("-") or arg == "-" or self._negative_number_matcher.match(arg):
                if has_commands:
                    return None  # the sub-command's parser checks the rest
                continue
            flag = arg.split("=", 1)[0] if arg.startswith("--") else arg[:2]
            if flag not in self._option_string_actions:
                return flag
        return None

    def _unknown_flag(self, flag: str) -> NoReturn:
        import difflib  # only on an error

        known = sorted(s for s in self._option_string_actions if s.startswith("--"))
        close = difflib.get_close_matches(flag, known, n=2, cutoff=0.7)
        renamed = _RENAMED.get(flag)
        if renamed is not None and renamed[0] in known:
            hint = f" ({renamed[1]})"
        elif close:
            hint = f" (did you mean {' or '.join(close)}?)"
        else:
            hint = ""
        self.error(f"unrecognized arguments: {flag}{hint}")


def lazy_version(version: Callable[[], str]) -> type[argparse.Action]:
    """A ``--version`` action whose text is made only when asked for (the installed version
    comes from ``importlib.metadata``: ~35 modules a start would otherwise import only to build
    its parser)."""

    class LazyVersion(argparse.Action):
        def __init__(
            self,
            option_strings: Sequence[str],
            dest: str = argparse.SUPPRESS,
            default: str = argparse.SUPPRESS,
            help: str = "show program's version number and exit",
        ) -> None:
            super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

        def __call__(
            self,
            parser: argparse.ArgumentParser,
            namespace: argparse.Namespace,
            values: object,
            option_string: str | None = None,
        ) -> None:
            print(version())  # stdout, as argparse's own version action prints it
            parser.exit()

    return LazyVersion


def installed_version() -> str:
    """``tidelog <version>`` of the installed distribution (the ``--version`` text)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"tidelog {version('tidelog')}"
    except PackageNotFoundError:  # pragma: no cover - run from a source tree
        return "tidelog (not installed)"
