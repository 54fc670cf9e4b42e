"""How ``tidelog groups --reset-offsets`` chooses a group's new offsets, as
kafka-consumer-groups.sh does (its ResetOffsets options).

The partitions come from ``--topic TOPIC[:P,P]``, ``--all-topics`` (every partition the group
has committed) or a ``--from-file`` plan. Each gets one target: ``--to-earliest`` (log start),
``--to-latest`` (log end), ``--to-offset N``, ``--shift-by N`` (from the committed offset, or the
log end without one), ``--to-current``, the plan's offset, or the first offset at or after
``--to-datetime`` / now minus ``--by-duration`` (the log end when no record is that new); the
target is then clamped into [log start, log end], as Kafka clamps it.
"""

from __future__ import annotations

import argparse
import csv
import re
import time
from datetime import datetime
from typing import Any

from tidelog.tools._common import ToolError

__all__ = [
    "new_offset",
    "parse_datetime",
    "parse_duration_ms",
    "read_reset_plan",
    "reset_time_ms",
    "target_partitions",
]

_DURATION = re.compile(
    r"(-)?P(?:([0-9.]+)D)?(?:T(?:([0-9.]+)H)?(?:([0-9.]+)M)?(?:([0-9.]+)S)?)?", re.IGNORECASE
)


def parse_datetime(value: str) -> int:
    """``YYYY-MM-DDTHH:mm:SS.sss`` (optionally with Z or an offset) -> epoch ms."""
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise ToolError(
            f"--to-datetime {value!r} is not YYYY-MM-DDTHH:mm:SS.sss "
            "(e.g. 2026-01-31T12:00:00.000, optionally ending in Z or +01:00)",
            2,
        ) from None
    if dt.tzinfo is None:
        dt = dt.astimezone()  # local time, as Kafka's tool reads it
    return int(dt.timestamp() * 1000)


def parse_duration_ms(value: str) -> int:
    """An ISO-8601 duration as Java's Duration.parse reads it (``PnDTnHnMnS``) -> ms."""
    m = _DURATION.fullmatch(value.strip())
    if m is None or not any(m.groups()[1:]):
        raise ToolError(
            f"--by-duration {value!r} is not an ISO-8601 duration such as PT1H30M or P1DT2H", 2
        )
    sign, days, hours, minutes, seconds = m.groups()
    try:
        total = (float(days or 0) * 86400 + float(hours or 0) * 3600
                 + float(minutes or 0) * 60 + float(seconds or 0))  # fmt: skip
    except ValueError:
        raise ToolError(f"--by-duration {value!r}: numbers must be like 1 or 1.5", 2) from None
    return int(total * 1000) * (-1 if sign else 1)


def reset_time_ms(args: argparse.Namespace) -> int | None:
    """The time ``--to-datetime`` or ``--by-duration`` names (epoch ms), or None."""
    if args.to_datetime:
        return parse_datetime(args.to_datetime)
    if args.by_duration:
        return int(time.time() * 1000) - parse_duration_ms(args.by_duration)
    return None


def new_offset(
    args: argparse.Namespace,
    log_start: int,
    log_end: int,
    current: int | None,
    planned: int | None,
    by_time: int,
) -> int:
    """One partition's new offset: the target the options name, clamped into the log
    (``current``: the committed offset; ``by_time``: the offset for ``reset_time_ms``, -1 for
    none)."""
    if args.to_earliest:
        target = log_start
    elif args.to_latest:
        target = log_end
    elif args.to_offset is not None:
        target = args.to_offset
    elif args.shift_by is not None:
        target = (current if current is not None else log_end) + args.shift_by
    elif args.to_current:
        target = current if current is not None else log_end
    elif planned is not None:
        target = planned
    else:
        target = by_time if by_time >= 0 else log_end
    return min(max(target, log_start), log_end)


def target_partitions(admin: Any, args: argparse.Namespace, committed: dict[Any, Any]) -> list[Any]:
    """The partitions --topic / --all-topics name."""
    from kafka import TopicPartition

    if args.all_topics:
        return sorted(committed, key=lambda tp: (tp.topic, tp.partition))
    out: list[Any] = []
    for spec in args.topic:
        topic, _, parts = spec.partition(":")
        if parts:
            try:
                out.extend(TopicPartition(topic, int(p)) for p in parts.split(","))
            except ValueError:
                raise ToolError(
                    f"--topic {spec!r}: partitions must be numbers, e.g. t:0,1", 2
                ) from None
            continue
        described = admin.describe_topics([topic])
        if not described or described[0].get("error_code"):
            raise ToolError(f"topic '{topic}' does not exist")
        out.extend(
            TopicPartition(topic, p["partition_index"])
            for p in sorted(described[0]["partitions"], key=lambda p: p["partition_index"])
        )
    return out


def read_reset_plan(path: str) -> dict[str, dict[Any, int]]:
    """A --from-file CSV plan: ``topic,partition,offset`` lines (group "" = every --group) or
    ``group,topic,partition,offset`` lines, as --export writes them."""
    from kafka import TopicPartition

    try:
        with open(path, encoding="utf-8", newline="") as fh:
            rows = [r for r in csv.reader(fh) if r and any(c.strip() for c in r)]
    except OSError as exc:
        raise ToolError(f"--from-file {path}: {exc.strerror}") from None
    plan: dict[str, dict[Any, int]] = {}
    for number, row in enumerate(rows, 1):
        if len(row) not in (3, 4):
            raise ToolError(
                f"--from-file {path} line {number}: expected topic,partition,offset or "
                "group,topic,partition,offset",
                2,
            )
        gid, topic, partition, offset = row if len(row) == 4 else ["", *row]
        try:
            tp = TopicPartition(topic.strip(), int(partition))
            plan.setdefault(gid.strip(), {})[tp] = int(offset)
        except ValueError:
            raise ToolError(
                f"--from-file {path} line {number}: partition and offset must be numbers", 2
            ) from None
    return plan
