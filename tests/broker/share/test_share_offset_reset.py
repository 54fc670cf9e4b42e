"""``share.auto.offset.reset`` values as Kafka's ShareGroupAutoOffsetResetStrategy reads them."""

from __future__ import annotations

import pytest

from tidelog.broker.share.offset_reset import AutoOffsetReset, parse_auto_offset_reset


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("earliest", AutoOffsetReset("earliest")),
        ("LATEST", AutoOffsetReset("latest")),
        ("by_duration:PT1H", AutoOffsetReset("by_duration", 3_600_000)),
        ("by_duration:P1DT2H3M4.5S", AutoOffsetReset("by_duration", 93_784_500)),
        ("by_duration:pt0.001s", AutoOffsetReset("by_duration", 1)),
        ("by_duration:PT-1M+90S", AutoOffsetReset("by_duration", 30_000)),
        ("by_duration:P0D", AutoOffsetReset("by_duration", 0)),
    ],
)
def test_accepted(value: str, parsed: AutoOffsetReset) -> None:
    assert parse_auto_offset_reset(value) == parsed


@pytest.mark.parametrize(
    "value",
    ["none", "by_duration:", "by_duration:PT", "by_duration:P1Y", "by_duration:P1W",
     "by_duration:-PT1H", "by_duration:1H", "by_duration:PT1.0000000001S"],
)  # fmt: skip
def test_refused(value: str) -> None:
    assert parse_auto_offset_reset(value) is None
