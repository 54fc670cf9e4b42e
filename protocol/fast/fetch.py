"""A lean, bounds-checked parser for FetchRequest v4-16 (header included).

Consumers send thousands of Fetch requests a second, almost all of them the same small shape
(one or a few partitions, no forgotten topics, no rack, no tagged fields). The generic path
(``codec.decode_request_header`` + ``guard.check_request_body`` + kio's native reader) walks
the body twice and builds kio dataclasses: 10-25 us a request. This parser reads the request
header and body in one pass with ``struct``, checks every length against the bytes that remain
(an array count against the least its elements can take, so a garbage count never allocates)
and returns light tuples with the attributes the Fetch handler reads, under kio's names. The
one-topic, one-partition request takes two unpacks (``_one_partition``), as fast.produce does.

Fields a version lacks get Kafka's defaults, so the handler need not look at the version:
``replica_id`` -1 (v15+ moved it into a tagged field), ``session_id`` 0 and ``session_epoch``
-1 (before v7), ``current_leader_epoch`` -1 (before v9), ``log_start_offset`` -1 (before v5),
``last_fetched_epoch`` -1 (before v12), ``rack_id`` "" (before v11). Topics carry both
``topic`` (the name, v4-12, else None) and ``topic_id`` (v13+, else None); an all-zero topic
id reads as None, as kio reads it.

Anything unusual returns ``None`` and the caller takes the generic kio path: a version outside
4-16, or any non-empty tagged-field section (request header, partition, topic, forgotten topic,
request: the last one is where v12+ carries ``cluster_id`` and v15+ ``replica_state``, which
consumers leave out). A malformed frame raises ``FrameDecodeError`` only, and only where the
generic path refuses it too. Trailing bytes after the body are ignored, as kio (and Kafka) do.
``tests/protocol/test_fast_fetch.py`` checks the result against kio's decode for every version
(Hypothesis).
"""

from __future__ import annotations

import struct
import uuid
from datetime import timedelta
from typing import NamedTuple

from tidelog.protocol.errors import FrameDecodeError
from tidelog.protocol.fast.common import (
    array_count,
    cached_timedelta,
    check_fits,
    read_header,
    read_string,
    truncated,
)

__all__ = (
    "LeanFetchPartition",
    "LeanFetchRequest",
    "LeanFetchTopic",
    "LeanForgottenTopic",
    "parse_fetch_frame",
)

# replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level [, session_id, session_epoch]
_HEAD_V4 = struct.Struct(">iiiib")
_HEAD_V7 = struct.Struct(">iiiibii")
_HEAD_V15 = struct.Struct(">iiibii")  # no replica_id
# partition [, current_leader_epoch], fetch_offset [, last_fetched_epoch]
# [, log_start_offset], partition_max_bytes
_PARTITION_V4 = struct.Struct(">iqi")
_PARTITION_V5 = struct.Struct(">iqqi")
_PARTITION_V9 = struct.Struct(">iiqqi")
_PARTITION_V12 = struct.Struct(">iiqiqi")
_UUID_ZERO = bytes(16)


class LeanFetchPartition(NamedTuple):
    partition: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int


class LeanFetchTopic(NamedTuple):
    topic: str | None
    topic_id: uuid.UUID | None
    partitions: tuple[LeanFetchPartition, ...]


class LeanForgottenTopic(NamedTuple):
    topic: str | None
    topic_id: uuid.UUID | None
    partitions: tuple[int, ...]


class LeanFetchRequest(NamedTuple):
    replica_id: int
    max_wait: timedelta
    min_bytes: int
    max_bytes: int
    isolation_level: int
    session_id: int
    session_epoch: int
    topics: tuple[LeanFetchTopic, ...]
    forgotten_topics_data: tuple[LeanForgottenTopic, ...]
    rack_id: str


_new_tuple = tuple.__new__
#: max_wait_ms -> timedelta (clients send one or two distinct waits; bounded)
_MAX_WAITS: dict[int, timedelta] = {}
#: 16 wire bytes -> topic id (a consumer fetches the same few topics over and over; bounded)
_TOPIC_IDS: dict[bytes, uuid.UUID] = {}


def _max_wait(max_wait_ms: int) -> timedelta:
    return cached_timedelta(_MAX_WAITS, max_wait_ms)


def _topic_id(raw: bytes) -> uuid.UUID | None:
    value = _TOPIC_IDS.get(raw)
    if value is None:
        if raw == _UUID_ZERO:
            return None  # kio reads the all-zero uuid as None
        value = uuid.UUID(bytes=raw)
        if len(_TOPIC_IDS) < 4096:
            _TOPIC_IDS[raw] = value
    return value


_API = "fetch"


def _truncated(pos: int, end: int) -> FrameDecodeError:
    return truncated("fetch", pos, end)


def _partitions(
    buf: memoryview, pos: int, end: int, version: int
) -> tuple[tuple[LeanFetchPartition, ...], int] | None:
    """One topic's partitions: (partitions, position after them), None on a tagged field."""
    flexible = version >= 12
    count, pos = array_count(_API, buf, pos, end, flexible)
    # the fixed fields (a flexible partition ends with its tagged fields: one more byte)
    size = 33 if flexible else 28 if version >= 9 else 24 if version >= 5 else 16
    check_fits(_API, count, size, pos, end, "partitions")
    partitions: list[LeanFetchPartition] = []
    append = partitions.append
    if flexible:
        for _ in range(count):
            fields = _PARTITION_V12.unpack_from(buf, pos)
            pos += 32
            if buf[pos]:
                return None  # partition tagged fields
            pos += 1
            append(_new_tuple(LeanFetchPartition, fields))
    elif version >= 9:
        for _ in range(count):
            partition, leader_epoch, offset, start, max_bytes = _PARTITION_V9.unpack_from(buf, pos)
            pos += 28
            append(
                _new_tuple(
                    LeanFetchPartition, (partition, leader_epoch, offset, -1, start, max_bytes)
                )
            )
    elif version >= 5:
        for _ in range(count):
            partition, offset, start, max_bytes = _PARTITION_V5.unpack_from(buf, pos)
            pos += 24
            append(_new_tuple(LeanFetchPartition, (partition, -1, offset, -1, start, max_bytes)))
    else:
        for _ in range(count):
            partition, offset, max_bytes = _PARTITION_V4.unpack_from(buf, pos)
            pos += 16
            append(_new_tuple(LeanFetchPartition, (partition, -1, offset, -1, -1, max_bytes)))
    return tuple(partitions), pos


def _topic_key(
    buf: memoryview, pos: int, end: int, version: int
) -> tuple[str | None, uuid.UUID | None, int]:
    """A topic's name (v4-12) or id (v13+): (topic, topic_id, position after it)."""
    if version >= 13:
        if pos + 16 > end:
            raise _truncated(pos, end)
        return None, _topic_id(bytes(buf[pos : pos + 16])), pos + 16
    name, pos = read_string(_API, buf, pos, end, version >= 12, "topic name")
    return name, None, pos


def _forgotten(
    buf: memoryview, pos: int, end: int, version: int
) -> tuple[tuple[LeanForgottenTopic, ...], int] | None:
    """forgotten_topics_data (v7+): (topics, position after them), None on a tagged field."""
    flexible = version >= 12
    count, pos = array_count(_API, buf, pos, end, flexible)
    # name / id, partition count (+ tagged fields)
    least = 18 if version >= 13 else 3 if flexible else 6
    check_fits(_API, count, least, pos, end, "forgotten topics")
    topics: list[LeanForgottenTopic] = []
    for _ in range(count):
        name, topic_id, pos = _topic_key(buf, pos, end, version)
        n, pos = array_count(_API, buf, pos, end, flexible)
        check_fits(_API, n, 4, pos, end, "forgotten partitions")
        partitions = struct.unpack_from(f">{n}i", buf, pos) if n else ()
        pos += 4 * n
        if flexible:
            if pos >= end:
                raise _truncated(pos, end)
            if buf[pos]:
                return None  # forgotten topic tagged fields
            pos += 1
        topics.append(_new_tuple(LeanForgottenTopic, (name, topic_id, partitions)))
    return tuple(topics), pos


# The common request, one topic with one partition (no forgotten topics, empty rack id, no
# tagged fields), in two unpacks per version: (head, tail). The head is the fixed start of the
# body, the topic count and the topic's id (v13+) or name length; the name follows it; the tail
# is the partition count, the partition, the topic / forgotten topics / rack id / tagged fields
# ends that the shape implies.
_ONE_HEAD_V4 = struct.Struct(">iiiibih")
_ONE_HEAD_V7 = struct.Struct(">iiiibiiih")
_ONE_HEAD_V12 = struct.Struct(">iiiibiiBB")
_ONE_HEAD_V13 = struct.Struct(">iiiibiiB16s")
_ONE_HEAD_V15 = struct.Struct(">iiibiiB16s")
_ONE_TAIL_V4 = struct.Struct(">iiqi")
_ONE_TAIL_V5 = struct.Struct(">iiqqi")
_ONE_TAIL_V7 = struct.Struct(">iiqqii")
_ONE_TAIL_V9 = struct.Struct(">iiiqqii")
_ONE_TAIL_V11 = struct.Struct(">iiiqqiih")
_ONE_TAIL_V12 = struct.Struct(">BiiqiqiBBBBB")
_ONE: dict[int, tuple[struct.Struct, struct.Struct]] = {
    4: (_ONE_HEAD_V4, _ONE_TAIL_V4),
    5: (_ONE_HEAD_V4, _ONE_TAIL_V5),
    6: (_ONE_HEAD_V4, _ONE_TAIL_V5),
    7: (_ONE_HEAD_V7, _ONE_TAIL_V7),
    8: (_ONE_HEAD_V7, _ONE_TAIL_V7),
    9: (_ONE_HEAD_V7, _ONE_TAIL_V9),
    10: (_ONE_HEAD_V7, _ONE_TAIL_V9),
    11: (_ONE_HEAD_V7, _ONE_TAIL_V11),
    12: (_ONE_HEAD_V12, _ONE_TAIL_V12),
    13: (_ONE_HEAD_V13, _ONE_TAIL_V12),
    14: (_ONE_HEAD_V13, _ONE_TAIL_V12),
    15: (_ONE_HEAD_V15, _ONE_TAIL_V12),
    16: (_ONE_HEAD_V15, _ONE_TAIL_V12),
}
_EMPTY_ENDS = (0, 0, 1, 1, 0)  # partition, topic tags; no forgotten topics; rack ""; tags


def _one_partition(buf: memoryview, pos: int, end: int, version: int) -> LeanFetchRequest | None:
    """The body consumers send most (see ``_ONE``), or None for anything else, which the
    general code below then reads (and refuses, when malformed)."""
    head, tail = _ONE[version]
    if pos + head.size > end:
        return None
    fields = head.unpack_from(buf, pos)
    pos += head.size
    topic: str | None = None
    topic_id: uuid.UUID | None = None
    if version >= 13:
        if fields[-2] != 2:
            return None
        topic_id = _topic_id(fields[-1])
    else:
        count, n = fields[-2:]
        if version >= 12:
            if count != 2 or not 1 <= n < 0x80:
                return None
            n -= 1
        elif count != 1 or n < 0:
            return None
        if pos + n > end:
            return None
        try:
            topic = str(buf[pos : pos + n], "utf-8")
        except UnicodeDecodeError:
            return None
        pos += n
    if pos + tail.size > end:
        return None
    t = tail.unpack_from(buf, pos)
    partition: tuple[int, ...]
    if version >= 12:
        if t[0] != 2 or t[7:] != _EMPTY_ENDS:
            return None
        partition = t[1:7]
    elif version >= 9:
        if t[0] != 1 or t[6] != 0 or (version >= 11 and t[7] != 0):
            return None
        partition = (t[1], t[2], t[3], -1, t[4], t[5])
    elif version >= 5:
        if t[0] != 1 or (version >= 7 and t[5] != 0):
            return None
        partition = (t[1], -1, t[2], -1, t[3], t[4])
    else:
        if t[0] != 1:
            return None
        partition = (t[1], -1, t[2], -1, -1, t[3])
    if version >= 15:
        replica_id = -1
        max_wait_ms, min_bytes, max_bytes, isolation, session_id, epoch = fields[:6]
    elif version >= 7:
        replica_id, max_wait_ms, min_bytes, max_bytes, isolation, session_id, epoch = fields[:7]
    else:
        replica_id, max_wait_ms, min_bytes, max_bytes, isolation = fields[:5]
        session_id, epoch = 0, -1
    one = _new_tuple(
        LeanFetchTopic, (topic, topic_id, (_new_tuple(LeanFetchPartition, partition),))
    )
    request: LeanFetchRequest = _new_tuple(
        LeanFetchRequest,
        (
            replica_id,
            _max_wait(max_wait_ms),
            min_bytes,
            max_bytes,
            isolation,
            session_id,
            epoch,
            (one,),
            (),
            "",
        ),
    )
    return request


def parse_fetch_frame(
    frame: bytes | memoryview,
) -> tuple[int, str | None, LeanFetchRequest] | None:
    """``(correlation_id, client_id, request)`` of a Fetch v4-16 frame, or None (fallback).

    Raises FrameDecodeError when the frame is malformed.
    """
    header = read_header(frame, 1, 4, 16, 12, "fetch")
    if header is None:
        return None
    buf, end, version, correlation_id, client_id, pos = header
    flexible = version >= 12
    one = _one_partition(buf, pos, end, version)
    if one is not None:
        return correlation_id, client_id, one
    # -- the fixed start of the body
    if version >= 15:
        if pos + 21 > end:
            raise _truncated(pos, end)
        max_wait_ms, min_bytes, max_bytes, isolation, session_id, epoch = _HEAD_V15.unpack_from(
            buf, pos
        )
        replica_id = -1
        pos += 21
    elif version >= 7:
        if pos + 25 > end:
            raise _truncated(pos, end)
        replica_id, max_wait_ms, min_bytes, max_bytes, isolation, session_id, epoch = (
            _HEAD_V7.unpack_from(buf, pos)
        )
        pos += 25
    else:
        if pos + 17 > end:
            raise _truncated(pos, end)
        replica_id, max_wait_ms, min_bytes, max_bytes, isolation = _HEAD_V4.unpack_from(buf, pos)
        session_id, epoch = 0, -1
        pos += 17
    # -- topics
    count, pos = array_count(_API, buf, pos, end, flexible)
    # name / id, partition count (+ tagged fields)
    check_fits(_API, count, 18 if version >= 13 else 3 if flexible else 6, pos, end, "topics")
    topics: list[LeanFetchTopic] = []
    for _ in range(count):
        name, topic_id, pos = _topic_key(buf, pos, end, version)
        read = _partitions(buf, pos, end, version)
        if read is None:
            return None
        partitions, pos = read
        if flexible:
            if pos >= end:
                raise _truncated(pos, end)
            if buf[pos]:
                return None  # topic tagged fields
            pos += 1
        topics.append(_new_tuple(LeanFetchTopic, (name, topic_id, partitions)))
    # -- forgotten topics (v7+), rack id (v11+), request tagged fields (v12+)
    forgotten: tuple[LeanForgottenTopic, ...] = ()
    if version >= 7:
        read_forgotten = _forgotten(buf, pos, end, version)
        if read_forgotten is None:
            return None
        forgotten, pos = read_forgotten
    rack_id = ""
    if version >= 11:
        rack_id, pos = read_string(_API, buf, pos, end, flexible, "rack id")
    if flexible:
        if pos >= end:
            raise _truncated(pos, end)
        if buf[pos]:
            return None  # request tagged fields (cluster_id, replica_state)
    request: LeanFetchRequest = _new_tuple(
        LeanFetchRequest,
        (
            replica_id,
            _max_wait(max_wait_ms),
            min_bytes,
            max_bytes,
            isolation,
            session_id,
            epoch,
            tuple(topics),
            forgotten,
            rack_id,
        ),
    )
    return correlation_id, client_id, request
