"""Produce v0-2: parsed only far enough to refuse them properly.

Kafka 4 removed Produce v0-2 (KIP-896) but still advertises Produce from v0 in ApiVersions
(KAFKA-18659): librdkafka up to 2.10 (kcat 1.7.1 ships 2.0.2) turns gzip, snappy and lz4 off
unless the broker lists Produce v0. A client that really sends v0-2 gets an answer in the shape
of its version with UNSUPPORTED_VERSION on every partition, rather than a closed connection.

kio has no schemas for these versions, so this module reads the request body by hand::

    acks int16, timeout_ms int32,
    topics [name string, partitions [index int32, records bytes]]

and writes the response body::

    v0:  [name string, [index int32, error_code int16, base_offset int64]]
    v1:  v0 + throttle_time_ms int32 (after the topics)
    v2:  v1 with log_append_time int64 after base_offset

Every count and length is checked against what remains before it is used.
"""

from __future__ import annotations

import struct

from tidelog.protocol.errors import ErrorCode, FrameDecodeError

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PART_V0 = struct.Struct(">ihq")
_PART_V2 = struct.Struct(">ihqq")

UNSUPPORTED_VERSION = int(ErrorCode.unsupported_version)


class _Cursor:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes | memoryview, pos: int) -> None:
        self.buf = buf
        self.pos = pos

    def take(self, n: int) -> bytes | memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise FrameDecodeError("Produce v0-2 request is truncated")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def int16(self) -> int:
        return int(_I16.unpack(self.take(2))[0])

    def int32(self) -> int:
        return int(_I32.unpack(self.take(4))[0])

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise FrameDecodeError("Produce v0-2 request has a null topic name")
        return bytes(self.take(n)).decode("utf-8", errors="replace")

    def count(self) -> int:
        n = self.int32()
        if n < 0 or n > len(self.buf) - self.pos:
            raise FrameDecodeError(f"Produce v0-2 request has an impossible count {n}")
        return n


def parse_topic_partitions(frame: bytes | memoryview) -> list[tuple[str, list[int]]]:
    """The (topic, [partition]) pairs of a Produce v0-2 frame (request header v1 included)."""
    cur = _Cursor(frame, 8)  # api_key, api_version, correlation_id
    client_id_len = cur.int16()
    if client_id_len > 0:
        cur.take(client_id_len)
    cur.int16()  # acks
    cur.int32()  # timeout_ms
    topics: list[tuple[str, list[int]]] = []
    for _ in range(cur.count()):
        name = cur.string()
        partitions = []
        for _ in range(cur.count()):
            partitions.append(cur.int32())
            size = cur.int32()
            if size > 0:
                cur.take(size)
        topics.append((name, partitions))
    return topics


def encode_unsupported_body(version: int, topics: list[tuple[str, list[int]]]) -> bytes:
    """The response body for ``version`` (0-2), UNSUPPORTED_VERSION on every partition."""
    out = bytearray(_I32.pack(len(topics)))
    for name, partitions in topics:
        raw = name.encode("utf-8")
        out += _I16.pack(len(raw)) + raw + _I32.pack(len(partitions))
        for index in partitions:
            if version >= 2:
                out += _PART_V2.pack(index, UNSUPPORTED_VERSION, -1, -1)
            else:
                out += _PART_V0.pack(index, UNSUPPORTED_VERSION, -1)
    if version >= 1:
        out += _I32.pack(0)
    return bytes(out)
