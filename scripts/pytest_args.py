"""The pytest arguments ``./scripts/test`` runs with: the long runs marked ``slow`` stay out.

With no arguments the selection is ``-m "not slow"``. A user's ``-m EXPR`` becomes
``-m "(EXPR) and not slow"`` unless EXPR names ``slow`` itself (``-m slow``,
``-m "slow and spark"``, ``-m "not slow"``), so ``./scripts/test -m "not spark"`` does not start
the 20,000-partition and 30-kill runs. Arguments without ``-m`` (a path, ``-k``) get
``-m "not slow"`` added; ``-m slow`` (or ``-m "slow or not slow"``) selects the long runs.

Printed NUL-separated for ``mapfile -d ''`` in ``scripts/test``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence

NOT_SLOW = "not slow"


def _names_slow(expr: str) -> bool:
    return re.search(r"\bslow\b", expr) is not None


def _combine(expr: str) -> str:
    return expr if _names_slow(expr) else f"({expr}) and {NOT_SLOW}"


def pytest_args(argv: Sequence[str]) -> list[str]:
    """``argv`` with every marker expression combined with ``not slow``."""
    out: list[str] = []
    saw_m = False
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":  # the rest are paths
            out += args[i:]
            break
        if arg == "-m" and i + 1 < len(args):
            out += ["-m", _combine(args[i + 1])]
            saw_m = True
            i += 2
            continue
        if arg.startswith("-m") and len(arg) > 2 and not arg.startswith("--"):
            out += ["-m", _combine(arg[2:].removeprefix("="))]
            saw_m = True
        else:
            out.append(arg)
        i += 1
    if not saw_m:
        out = ["-m", NOT_SLOW, *out]
    return out


def main(argv: Sequence[str]) -> int:
    sys.stdout.write("".join(a + "\0" for a in pytest_args(argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
