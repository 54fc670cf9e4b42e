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
from tidelog.protocol.fast.common import cached_timedelta, read_header, text, truncated, uvarint

__all__ = (
    "LeanPartitionData",
    "LeanProduceRequest",
    "LeanTopicData",
    "parse_produce_frame",
)

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
        if pos < end and buf[pos] < 0x80:  # one-byte varints inline: the common case
            n = buf[pos] - 1
            pos += 1
        else:
            n, pos = _uvarint(buf, pos, end)
            n -= 1
        transactional_id: str | None
        if n < 0:
            transactional_id = None
        else:
            if pos + n > end:
                raise _truncated(pos, end)
            transactional_id = _text(buf, pos, n)
            pos += n
        if pos + 6 > end:
            raise _truncated(pos, end)
        acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(buf, pos)
        pos += 6
        if pos < end and buf[pos] < 0x80:
            topic_count = buf[pos] - 1
            pos += 1
        else:
            topic_count, pos = _uvarint(buf, pos, end)
            topic_count -= 1
        if topic_count < 0:
            raise FrameDecodeError("null topic_data in a produce request")
        # each topic takes at least 3 bytes (name length, partition count, tagged fields)
        if topic_count * 3 > end - pos:
            raise FrameDecodeError(f"{topic_count} topics cannot fit in {end - pos} bytes")
        topics: list[LeanTopicData] = []
        for _ in range(topic_count):
            if pos < end and buf[pos] < 0x80:
                n = buf[pos] - 1
                pos += 1
            else:
                n, pos = _uvarint(buf, pos, end)
                n -= 1
            if n < 0:
                raise FrameDecodeError("null topic name in a produce request")
            if pos + n > end:
                raise _truncated(pos, end)
            name = _text(buf, pos, n)
            pos += n
            if pos < end and buf[pos] < 0x80:
                count = buf[pos] - 1
                pos += 1
            else:
                count, pos = _uvarint(buf, pos, end)
                count -= 1
            if count < 0:
                raise FrameDecodeError("null partition_data in a produce request")
            # each partition takes at least 6 bytes (index, records length, tagged fields)
            if count * 6 > end - pos:
                raise FrameDecodeError(f"{count} partitions cannot fit in {end - pos} bytes")
            partitions: list[LeanPartitionData] = []
            for _ in range(count):
                if pos + 4 > end:
                    raise _truncated(pos, end)
                (index,) = _I32.unpack_from(buf, pos)
                n, pos = _uvarint(buf, pos + 4, end)
                n -= 1
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
        if pos + 2 > end:
            raise _truncated(pos, end)
        (n,) = _I16.unpack_from(buf, pos)
        pos += 2
        if n < 0:
            if n != -1:
                raise FrameDecodeError(f"negative transactional id length {n}")
            transactional_id = None
        else:
            if pos + n > end:
                raise _truncated(pos, end)
            transactional_id = _text(buf, pos, n)
            pos += n
        if pos + 10 > end:
            raise _truncated(pos, end)
        acks, timeout_ms, topic_count = _ACKS_TIMEOUT_ARRAY.unpack_from(buf, pos)
        pos += 10
        if topic_count < 0:
            raise FrameDecodeError(f"negative topic count {topic_count} in a produce request")
        # each topic takes at least 6 bytes (name length, partition count)
        if topic_count * 6 > end - pos:
            raise FrameDecodeError(f"{topic_count} topics cannot fit in {end - pos} bytes")
        topics = []
        for _ in range(topic_count):
            if pos + 2 > end:
                raise _truncated(pos, end)
            (n,) = _I16.unpack_from(buf, pos)
            pos += 2
            if n < 0 or pos + n + 4 > end:
                raise FrameDecodeError(f"bad topic name length {n} at {pos} of {end}")
            name = _text(buf, pos, n)
            pos += n
            (count,) = _I32.unpack_from(buf, pos)
            pos += 4
            # each partition takes at least 8 bytes (index, records length)
            if count < 0 or count * 8 > end - pos:
                raise FrameDecodeError(f"{count} partitions cannot fit in {end - pos} bytes")
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
