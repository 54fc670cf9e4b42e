"""``tidelog replay``: the analytics replay job (analytics/replay.py), as a tidelog sub-command.

Only the plug-in glue lives here; the job, its options and its help are analytics'. When the
analytics package cannot be imported the sub-command is simply absent.
"""

from __future__ import annotations

from tidelog.broker.tools._common import SubParsers

__all__ = ["add_parser"]


def add_parser(subparsers: SubParsers) -> None:
    try:
        from tidelog.analytics.replay import add_parser as add_replay
    except ImportError:  # pragma: no cover - analytics is part of the same distribution
        return
    add_replay(subparsers)
