"""A lean, bounds-checked parser for ProduceRequest v3-12 (header included).

The generic path (``codec.decode_request_header`` + ``guard.check_request_body`` + kio's native
reader) builds kio dataclasses and walks the body twice; for the one-record requests a
``linger.ms=0`` producer sends, that is a large share of the broker's cost per request. This
parser reads the request header and body in one pass with ``struct``, checks every length
against the bytes that remain (so no separate guard walk is needed) and returns light tuples
with the attributes the Produce handler uses (the same names as kio's classes).

Anything unusual (a tagged field anywhere, a version outside 3-12) returns ``None``: the caller
then takes the generic kio path. A malformed frame raises ``FrameDecodeError`` only. Trailing
bytes after the body are ignored, as kio (and Kafka) do. ``tests/protocol/test_fast_produce.py``
checks the result against kio's decode for every version (Hypothesis).
"""

from __future__ import annotations

import struct
from datetime import timedelta
from typing import NamedTuple

from tidelog.protocol.errors import FrameDecodeError
from tidelog.protocol.fast.common import (
    array_count,
    cached_timedelta,
    check_fits,
    compact_length,
    read_header,
    read_nullable_string,
    read_string,
    text,
    truncated,
    uvarint,
)

__all__ = (
    "LeanPartitionData",
    "LeanProduceRequest",
    "LeanTopicData",
    "parse_produce_frame",
)

_API = "produce"
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
#: Records at least this large are kept as a view of the frame instead of copied.
BIG_RECORDS_BYTES = 1024 * 1024
_ACKS_TIMEOUT_ARRAY = struct.Struct(">hii")
_TWO_I32 = struct.Struct(">ii")


class LeanPartitionData(NamedTuple):
    index: int  # type: ignore[assignment]  # kio's name; shadows tuple.index, unused here
    #: bytes; a read-only view of the frame for batches of ``BIG_RECORDS_BYTES`` or more
    records: bytes | memoryview | None


class LeanTopicData(NamedTuple):
    name: str
    partition_data: tuple[LeanPartitionData, ...]


class LeanProduceRequest(NamedTuple):
    transactional_id: str | None
    acks: int
    timeout: timedelta
    topic_data: tuple[LeanTopicData, ...]


_new_tuple = tuple.__new__
#: timeout_ms -> timedelta (clients send one or two distinct timeouts; bounded)
_TIMEOUTS: dict[int, timedelta] = {}


def _timeout(timeout_ms: int) -> timedelta:
    return cached_timedelta(_TIMEOUTS, timeout_ms)


def _truncated(pos: int, end: int) -> FrameDecodeError:
    return truncated("produce", pos, end)


def _uvarint(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    return uvarint("produce", buf, pos, end)


def _text(buf: memoryview, pos: int, n: int) -> str:
    return text("produce", buf, pos, n)


_FLEX_ONE = struct.Struct(">BhiBB")  # null txn id, acks, timeout, 1 topic, name length + 1
_FLEX_PARTITION = struct.Struct(">Bi")  # 1 partition, index
_CLASSIC_ONE = struct.Struct(">hhiih")  # null txn id, acks, timeout, 1 topic, name length
_CLASSIC_PARTITION = struct.Struct(">iii")  # 1 partition, index, records length


def _one_batch(buf: memoryview, pos: int, end: int, flexible: bool) -> LeanProduceRequest | None:
    """The body most producers send (no transactional id, one topic, one partition with
    records, no tagged fields), read with two unpacks; None for anything else, which
    the general loop below then reads (and refuses, when malformed)."""
    if flexible:
        if pos + 9 > end:
            return None
        txn, acks, timeout_ms, topics, n = _FLEX_ONE.unpack_from(buf, pos)
        if txn != 0 or topics != 2 or not 1 <= n < 0x80:
            return None
        pos += 9
        n -= 1
        if pos + n + 6 > end:
            return None
        name_at = pos
        pos += n
        partitions, index = _FLEX_PARTITION.unpack_from(buf, pos)
        if partitions != 2:
            return None
        pos += 5
        size = buf[pos]
        if size < 0x80:
            pos += 1
        elif pos + 1 < end and buf[pos + 1] < 0x80:  # two bytes: up to 16 KiB
            size = (size & 0x7F) | (buf[pos + 1] << 7)
            pos += 2
        else:
            try:
                size, pos = _uvarint(buf, pos, end)
            except FrameDecodeError:
                return None
        size -= 1
        if size < 0 or pos + size + 3 > end:
            return None
        tags = pos + size
        if buf[tags] or buf[tags + 1] or buf[tags + 2]:  # partition, topic, request tags
            return None
    else:
        if pos + 14 > end:
            return None
        txn, acks, timeout_ms, topics, n = _CLASSIC_ONE.unpack_from(buf, pos)
        if txn != -1 or topics != 1 or n < 0:
            return None
        pos += 14
        if pos + n + 12 > end:
            return None
        name_at = pos
        pos += n
        partitions, index, size = _CLASSIC_PARTITION.unpack_from(buf, pos)
        pos += 12
        if partitions != 1 or size < 0 or pos + size > end:
            return None
    try:
        name = str(buf[name_at : name_at + n], "utf-8")
    except UnicodeDecodeError:
        return None
    # A big batch stays a view of the frame (the server gathers big frames in a buffer of their
    # own, never reused): copying 32 MiB would stall the event loop for milliseconds.
    records = buf[pos : pos + size] if size >= BIG_RECORDS_BYTES else bytes(buf[pos : pos + size])
    partition = _new_tuple(LeanPartitionData, (index, records))
    topic = _new_tuple(LeanTopicData, (name, (partition,)))
    return _new_tuple(LeanProduceRequest, (None, acks, _timeout(timeout_ms), (topic,)))


def parse_produce_frame(
    frame: bytes | memoryview,
) -> tuple[int, str | None, LeanProduceRequest] | None:
    """``(correlation_id, client_id, request)`` of a Produce v3-12 frame, or None (fallback).

    Raises FrameDecodeError when the frame is malformed.
    """
    header = read_header(frame, 0, 3, 12, 9, "produce")
    if header is None:
        return None
    buf, end, version, correlation_id, client_id, pos = header
    flexible = version >= 9
    if flexible:
        one = _one_batch(buf, pos, end, True)
        if one is not None:
            return correlation_id, client_id, one
        # -- body, flexible: compact strings / arrays, tagged fields
        transactional_id, pos = read_nullable_string(_API, buf, pos, end, True)
        if pos + 6 > end:
            raise _truncated(pos, end)
        acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(buf, pos)
        pos += 6
        topic_count, pos = compact_length(_API, buf, pos, end)
        # each topic takes at least 3 bytes (name length, partition count, tagged fields)
        check_fits(_API, topic_count, 3, pos, end, "topic_data")
        topics: list[LeanTopicData] = []
        for _ in range(topic_count):
            name, pos = read_string(_API, buf, pos, end, True, "topic name")
            count, pos = compact_length(_API, buf, pos, end)
            # each partition takes at least 6 bytes (index, records length, tagged fields)
            check_fits(_API, count, 6, pos, end, "partition_data")
            partitions: list[LeanPartitionData] = []
            for _ in range(count):
                if pos + 4 > end:
                    raise _truncated(pos, end)
                (index,) = _I32.unpack_from(buf, pos)
                n, pos = compact_length(_API, buf, pos + 4, end)
                records: bytes | None
                if n < 0:
                    records = None
                else:
                    if pos + n > end:
                        raise _truncated(pos, end)
                    records = bytes(buf[pos : pos + n])
                    pos += n
                if pos >= end:
                    raise _truncated(pos, end)
                if buf[pos] != 0:
                    return None  # partition tagged fields
                pos += 1
                partitions.append(_new_tuple(LeanPartitionData, (index, records)))
            if pos >= end:
                raise _truncated(pos, end)
            if buf[pos] != 0:
                return None  # topic tagged fields
            pos += 1
            topics.append(_new_tuple(LeanTopicData, (name, tuple(partitions))))
        if pos >= end:
            raise _truncated(pos, end)
        if buf[pos] != 0:
            return None  # request tagged fields
    else:
        one = _one_batch(buf, pos, end, False)
        if one is not None:
            return correlation_id, client_id, one
        # -- body, v3-8: int16 / int32 lengths
        transactional_id, pos = read_nullable_string(_API, buf, pos, end, False)
        if pos + 10 > end:
            raise _truncated(pos, end)
        acks, timeout_ms, topic_count = _ACKS_TIMEOUT_ARRAY.unpack_from(buf, pos)
        pos += 10
        # each topic takes at least 6 bytes (name length, partition count)
        check_fits(_API, topic_count, 6, pos, end, "topic_data")
        topics = []
        for _ in range(topic_count):
            name, pos = read_string(_API, buf, pos, end, False, "topic name")
            count, pos = array_count(_API, buf, pos, end, False)
            # each partition takes at least 8 bytes (index, records length)
            check_fits(_API, count, 8, pos, end, "partition_data")
            partitions = []
            for _ in range(count):
                if pos + 8 > end:
                    raise _truncated(pos, end)
                index, n = _TWO_I32.unpack_from(buf, pos)
                pos += 8
                if n < 0:
                    if n != -1:
                        raise FrameDecodeError(f"negative records length {n}")
                    records = None
                else:
                    if pos + n > end:
                        raise _truncated(pos, end)
                    records = bytes(buf[pos : pos + n])
                    pos += n
                partitions.append(_new_tuple(LeanPartitionData, (index, records)))
            topics.append(_new_tuple(LeanTopicData, (name, tuple(partitions))))
    request: LeanProduceRequest = _new_tuple(
        LeanProduceRequest, (transactional_id, acks, _timeout(timeout_ms), tuple(topics))
    )
    return correlation_id, client_id, request
