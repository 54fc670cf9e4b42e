"""Pieces of the tools that need no broker: line and record formats, options, progress."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from typing import NamedTuple

import pytest

from tidelog.tools._common import (
    Progress,
    ToolError,
    format_table,
    parse_bootstrap,
    parse_properties,
    topic_matcher,
)
from tidelog.tools._reset_offsets import parse_datetime
from tidelog.tools.consume import RecordFormat, format_record
from tidelog.tools.get_offsets import parse_time
from tidelog.tools.produce import LineError, LineFormat, parse_line


class Rec(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


REC = Rec("t", 2, 41, 1_700_000_000_000, 0, b"k", b"v", [("h", b"1"), ("n", None)])


def test_console_consumer_format() -> None:
    assert format_record(REC, RecordFormat()) == b"v\n"
    fmt = RecordFormat.from_properties(
        {"print.timestamp": "true", "print.key": "true", "print.offset": "true",
         "print.partition": "true", "print.headers": "true"}
    )  # fmt: skip
    assert format_record(REC, fmt) == (
        b"CreateTime:1700000000000\tPartition:2\tOffset:41\th:1,n:null\tk\tv\n"
    )
    nulls = REC._replace(key=None, value=None, headers=[], timestamp_type=1)
    fmt = RecordFormat.from_properties(
        {"print.key": "true", "print.headers": "true", "print.timestamp": "true",
         "key.separator": " | ", "null.literal": "<null>"}
    )  # fmt: skip
    assert format_record(nulls, fmt) == (
        b"LogAppendTime:1700000000000 | NO_HEADERS | <null> | <null>\n"
    )
    no_ts = RecordFormat.from_properties({"print.timestamp": "true", "print.value": "false"})
    assert format_record(REC._replace(timestamp_type=-1), no_ts) == b"NO_TIMESTAMP\n"
    with pytest.raises(ToolError, match=r"unknown --property print\.colour"):
        RecordFormat.from_properties({"print.colour": "true"})
    with pytest.raises(ToolError):
        RecordFormat.from_properties({"print.key": "maybe"})


def test_console_producer_lines() -> None:
    plain = LineFormat()
    assert parse_line(b"a\tb", 1, plain) == (None, b"a\tb", [])
    keyed = LineFormat.from_properties({"parse.key": "true", "key.separator": "::"})
    assert parse_line(b"k::v::w", 1, keyed) == (b"k", b"v::w", [])
    with pytest.raises(LineError, match="No key separator found on line number 7"):
        parse_line(b"novalue", 7, keyed)
    lenient = LineFormat.from_properties({"parse.key": "true", "ignore.error": "true"})
    assert parse_line(b"novalue", 1, lenient) == (b"", b"novalue", [])
    full = LineFormat.from_properties(
        {"parse.headers": "true", "parse.key": "true", "null.marker": "-"}
    )
    assert parse_line(b"a:1,b:-\tk\t-", 1, full) == (b"k", None, [("a", b"1"), ("b", None)])
    assert parse_line(b"\tk\tv", 1, full) == (b"k", b"v", [])
    with pytest.raises(ToolError):
        LineFormat.from_properties({"parse.keys": "true"})


def test_options() -> None:
    assert parse_bootstrap("a:1, b:2") == ["a:1", "b:2"]
    for bad in ("", "a", "a:b", ":9092"):
        with pytest.raises(ToolError):
            parse_bootstrap(bad)
    assert parse_properties(["a=1", "b=x=y"]) == {"a": "1", "b": "x=y"}
    with pytest.raises(ToolError) as e:
        parse_properties(["novalue"])
    assert e.value.code == 2
    match = topic_matcher("ord.*")
    assert match("orders") and not match("my-orders")
    assert topic_matcher("a[")("a[")  # not a valid regex: a literal name
    assert topic_matcher(None)("anything")
    assert (parse_time("latest"), parse_time("-2"), parse_time("-3")) == (-1, -2, -3)
    assert parse_time("1700000000000") == 1_700_000_000_000
    with pytest.raises(ToolError):
        parse_time("-7")


def test_reset_datetime() -> None:
    assert parse_datetime("2023-11-14T22:13:20.000Z") == 1_700_000_000_000
    assert parse_datetime("2023-11-14T23:13:20.000+01:00") == 1_700_000_000_000
    local = datetime(2023, 11, 14, 22, 13, 20).astimezone()
    assert parse_datetime("2023-11-14T22:13:20.000") == int(local.timestamp() * 1000)
    assert datetime.fromtimestamp(parse_datetime("2023-01-01T00:00:00Z") / 1000, UTC).year == 2023
    with pytest.raises(ToolError, match=r"YYYY-MM-DDTHH:mm:SS\.sss"):
        parse_datetime("yesterday")


def test_table() -> None:
    assert format_table(["A", "LONGER"], [["x", 1], ["yyy", 22]]).splitlines() == [
        "A   LONGER",
        "x   1",
        "yyy 22",
    ]


def test_progress_only_draws_when_enabled() -> None:
    quiet = io.StringIO()
    with Progress(100, "x", stream=quiet, enabled=False) as p:
        p.update(50)
    assert quiet.getvalue() == ""
    tty = io.StringIO()
    with Progress(2048, "seg.log", stream=tty, enabled=True) as p:
        p.update(1024)
    text = tty.getvalue()
    assert "seg.log [###############" in text and "50.0%" in text and "1.0KiB/2.0KiB" in text
    assert text.endswith("\r\033[K")  # the line is cleared at the end
    counter = io.StringIO()
    with Progress(0, "sent", "records", stream=counter, enabled=True) as p:
        p.update(3)
    assert "\rsent 3 records" in counter.getvalue()
