"""``tidelog config-reference``: print the configuration reference (Markdown).

The reference in docs/configuration.md is this output; ``--check docs/configuration.md`` exits
1 when that copy differs, and ``--write docs/configuration.md`` replaces it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tidelog.config.reference import BEGIN, END, render_reference_markdown
from tidelog.tools._common import (
    EXIT_FAILURE,
    EXIT_OK,
    SubParsers,
    ToolError,
    add_tool_parser,
)

EXAMPLES = """\
  tidelog config-reference                                # print the reference
  tidelog config-reference --check docs/configuration.md  # exit 1 if the copy there is stale
  tidelog config-reference --write docs/configuration.md  # refresh it
"""


def add_parser(subparsers: SubParsers) -> None:
    p = add_tool_parser(
        subparsers,
        "config-reference",
        help="print every broker and topic setting with its default (Markdown)",
        description="Print the configuration reference generated from the config definitions.",
        examples=EXAMPLES,
        run=run,
    )
    group = p.add_mutually_exclusive_group()
    group.add_argument("--check", metavar="FILE", help="exit 1 if FILE's reference is stale")
    group.add_argument("--write", metavar="FILE", help="replace FILE's reference section")


def replace_section(text: str, section: str) -> str:
    """``text`` with the part between the reference markers replaced by ``section``."""
    start = text.find(BEGIN)
    end = text.find(END)
    if start < 0 or end < start:
        raise ToolError(f"no reference section (a line '{BEGIN}' ... '{END}') found")
    return text[:start] + section + text[end + len(END) :]


def run(args: argparse.Namespace) -> int:
    section = render_reference_markdown()
    if args.check is None and args.write is None:
        print(section)
        return EXIT_OK
    path = Path(args.check or args.write)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ToolError(f"cannot read {path}: {e.strerror}") from None
    updated = replace_section(text, section)
    if args.check is not None:
        if updated != text:
            print(
                f"{path}: configuration reference is stale; run: tidelog config-reference "
                f"--write {path}"
            )
            return EXIT_FAILURE
        return EXIT_OK
    path.write_text(updated, encoding="utf-8")
    return EXIT_OK
