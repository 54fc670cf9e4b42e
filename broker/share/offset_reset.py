"""``share.auto.offset.reset``: where a share partition starts when a group first reads it.

As Kafka's ``ShareGroupAutoOffsetResetStrategy``: ``latest`` (the default; the high watermark),
``earliest`` (the log start offset), or ``by_duration:<ISO-8601 duration>`` (the first record
whose timestamp is at most that long ago, as ListOffsets by timestamp finds it; the high
watermark when there is none). The duration has the form Java's ``Duration.parse`` reads,
``PnDTnHnMn.nS`` (days, hours, minutes, seconds with up to 9 decimals; a sign per part),
and must not be negative.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

__all__ = ("AutoOffsetReset", "parse_auto_offset_reset")

# Java's Duration.parse grammar (no years, months or weeks); a regular expression rather than an
# ISO-8601 library because those accept forms Kafka refuses (P1Y, P1W).
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?"
    r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE,
)
_BY_DURATION = "by_duration:"


@dataclass(frozen=True, slots=True)
class AutoOffsetReset:
    strategy: str  # "earliest", "latest" or "by_duration"
    duration_ms: int = 0


def _duration_ms(text: str) -> int | None:
    match = _DURATION.fullmatch(text)
    if match is None:
        return None
    sign, days, t_part, hours, minutes, seconds, fraction = match.groups()
    if t_part is not None and t_part.upper() == "T":
        return None  # "PT" names no time unit
    if days is None and t_part is None:
        return None
    total = Decimal(0)
    for value, unit_s in ((days, 86400), (hours, 3600), (minutes, 60)):
        if value is not None:
            total += Decimal(int(value)) * unit_s
    if seconds is not None:
        secs = Decimal(int(seconds))
        if fraction:
            part = Decimal(f"0.{fraction}")
            secs += -part if seconds.startswith("-") else part
        total += secs
    if sign == "-":
        total = -total
    return int(total * 1000)


def parse_auto_offset_reset(value: str) -> AutoOffsetReset | None:
    """The strategy of a ``share.auto.offset.reset`` value; None when Kafka refuses it."""
    text = value.strip()
    lowered = text.lower()
    if lowered in ("earliest", "latest"):
        return AutoOffsetReset(lowered)
    if lowered.startswith(_BY_DURATION):
        duration_ms = _duration_ms(text[len(_BY_DURATION) :].strip())
        if duration_ms is None or duration_ms < 0:
            return None
        return AutoOffsetReset("by_duration", duration_ms)
    return None
