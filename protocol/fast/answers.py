"""Lean encoders for the hot responses: ProduceResponse v3-12 and FetchResponse v4-16.

kio's writers are generic pure Python (one BytesIO write per field, a dataclass per partition);
these write the same bytes with a few ``struct`` calls and, for Fetch, hand the record data back
as separate chunks so it is never copied into the answer (``transport.writelines``). The tests
check them byte for byte against kio's writers for every version.

Optional tagged fields are never written (Produce v10 ``current_leader``/``node_endpoints``,
Fetch v12+ ``diverging_epoch``/``current_leader``/``snapshot_id``/``node_endpoints``): they
matter only after a leader change, which a single node never has.
"""

from __future__ import annotations

import functools
import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from tidelog.protocol.fast.common import array_len, encode_uvarint, nullable_string, string

__all__ = (
    "FetchPartitionAnswer",
    "ProducePartitionAnswer",
    "encode_fetch_body",
    "encode_fetch_one",
    "encode_produce_body",
    "encode_produce_one",
    "frame_answer",
    "frame_chunks",
    "frame_head",
)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_FETCH_PARTITION_V4 = struct.Struct(">ihqq")  # index, error, HW, LSO
_I64 = struct.Struct(">q")
_ABORTED = struct.Struct(">qq")  # producer id, first offset
#: An empty ``aborted_transactions`` array: classic (int32 0), flexible (compact: 0 + 1).
_NO_ABORTED = {False: _I32.pack(0), True: b"\x01"}
_PRODUCE_PARTITION = struct.Struct(">ihqq")  # index, error, base offset, log append time
_PRODUCE_PARTITION_V5 = struct.Struct(">ihqqq")  # ... and log start offset


class FetchPartitionAnswer(NamedTuple):
    """One partition of a Fetch answer. A NamedTuple, not a frozen dataclass: a fetch of many
    partitions builds one per partition at every answer (construction 0.4 us against 1.25 us,
    ``timeit`` on this machine)."""

    partition: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: bytes | memoryview = b""
    #: ``(producer_id, first_offset)`` of each aborted transaction in range (read_committed)
    aborted_transactions: Sequence[tuple[int, int]] = ()


def _aborted(aborted: Sequence[tuple[int, int]], flexible: bool) -> bytes:
    """The ``aborted_transactions`` array of a fetched partition.

    Kafka divergence: an empty array also at read_uncommitted, where Kafka sends null (clients
    read both as "none"; docs/kafka-differences.md)."""
    if not aborted:  # read_uncommitted, or nothing aborted in range: most answers
        return _NO_ABORTED[flexible]
    out = bytearray(array_len(len(aborted), flexible))
    for producer_id, first_offset in aborted:
        out += _ABORTED.pack(producer_id, first_offset)
        if flexible:
            out += b"\x00"
    return bytes(out)


@dataclass(frozen=True, slots=True)
class ProducePartitionAnswer:
    index: int
    error_code: int
    base_offset: int
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    #: KIP-467 (v8+): ``(batch index, message)`` of each refused record.
    record_errors: tuple[tuple[int, str | None], ...] = ()


def encode_fetch_body(
    version: int,
    topics: Sequence[tuple[str | uuid.UUID, Sequence[FetchPartitionAnswer]]],
    *,
    error_code: int = 0,
    session_id: int = 0,
    throttle_time_ms: int = 0,
) -> list[bytes | memoryview]:
    """The FetchResponse body (no header) as chunks; record data chunks are not copied.

    ``topics`` pairs a topic name (v4-12) or topic id (v13+) with its partitions.
    """
    flexible = version >= 12
    chunks: list[bytes | memoryview] = []
    out = bytearray(_I32.pack(throttle_time_ms))
    if version >= 7:
        out += _I16.pack(error_code)
        out += _I32.pack(session_id)
    out += array_len(len(topics), flexible)
    for topic, partitions in topics:
        if version >= 13:
            assert isinstance(topic, uuid.UUID)
            out += topic.bytes
        else:
            out += string(str(topic), flexible)
        out += array_len(len(partitions), flexible)
        for p in partitions:
            out += _FETCH_PARTITION_V4.pack(
                p.partition, p.error_code, p.high_watermark, p.last_stable_offset
            )
            if version >= 5:
                out += _I64.pack(p.log_start_offset)
            out += _aborted(p.aborted_transactions, flexible)
            if version >= 11:
                out += b"\xff\xff\xff\xff"  # preferred read replica -1
            size = len(p.records)
            out += encode_uvarint(size + 1) if flexible else _I32.pack(size)
            if size:
                chunks.append(bytes(out))
                chunks.append(p.records)
                out = bytearray()
            if flexible:
                out += b"\x00"  # partition tagged fields
        if flexible:
            out += b"\x00"  # topic tagged fields
    if flexible:
        out += b"\x00"  # top-level tagged fields
    chunks.append(bytes(out))
    return chunks


@functools.lru_cache(maxsize=4096)
def _fetch_one_prefix(version: int, topic: str | uuid.UUID) -> bytes:
    flexible = version >= 12
    out = _I32.pack(0)  # throttle time
    if version >= 7:
        out += b"\x00\x00\x00\x00\x00\x00"  # error code 0, session id 0
    out += array_len(1, flexible)
    if version >= 13:
        assert isinstance(topic, uuid.UUID)
        out += topic.bytes
    else:
        out += string(str(topic), flexible)
    return out + array_len(1, flexible)


_FETCH_PARTITION_V5 = struct.Struct(">ihqqq")  # index, error, HW, LSO, log start offset


def encode_fetch_one(
    version: int,
    topic: str | uuid.UUID,
    partition: int,
    error_code: int,
    high_watermark: int,
    log_start_offset: int,
    records_size: int,
    last_stable_offset: int | None = None,
    aborted: Sequence[tuple[int, int]] = (),
) -> tuple[bytes, bytes]:
    """``encode_fetch_body`` for one topic with one partition (last stable offset: the HW
    unless given): ``(the bytes before the records, the bytes after them)``, the same bytes."""
    flexible = version >= 12
    prefix = _fetch_one_prefix(version, topic)
    lso = high_watermark if last_stable_offset is None else last_stable_offset
    if version >= 5:
        part = _FETCH_PARTITION_V5.pack(
            partition, error_code, high_watermark, lso, log_start_offset
        )
    else:
        part = _FETCH_PARTITION_V4.pack(partition, error_code, high_watermark, lso)
    if flexible:
        # aborted transactions (usually none), preferred replica -1
        middle = (_aborted(aborted, True) if aborted else b"\x01") + b"\xff\xff\xff\xff"
        n = records_size + 1
        size = bytes((n,)) if records_size < 0x7F else encode_uvarint(n)
        return prefix + part + middle + size, b"\x00\x00\x00"  # partition, topic, body tags
    middle = _aborted(aborted, False) if aborted else b"\x00\x00\x00\x00"
    if version >= 11:
        middle += b"\xff\xff\xff\xff"
    return prefix + part + middle + _I32.pack(records_size), b""


def encode_produce_body(
    version: int,
    topics: Sequence[tuple[str, Sequence[ProducePartitionAnswer]]],
    *,
    throttle_time_ms: int = 0,
) -> bytes:
    """The ProduceResponse body (no header) for v3-12 (v11 and v12 answer as v10)."""
    flexible = version >= 9
    out = bytearray(array_len(len(topics), flexible))
    for name, partitions in topics:
        out += string(name, flexible)
        out += array_len(len(partitions), flexible)
        for p in partitions:
            out += _PRODUCE_PARTITION.pack(
                p.index, p.error_code, p.base_offset, p.log_append_time_ms
            )
            if version >= 5:
                out += _I64.pack(p.log_start_offset)
            if version >= 8:
                out += array_len(len(p.record_errors), flexible)
                for batch_index, message in p.record_errors:
                    out += _I32.pack(batch_index) + nullable_string(message, flexible)
                    if flexible:
                        out += b"\x00"
                out += nullable_string(p.error_message, flexible)
            if flexible:
                out += b"\x00"
        if flexible:
            out += b"\x00"
    out += _I32.pack(throttle_time_ms)
    if flexible:
        out += b"\x00"
    return bytes(out)


_ANSWER_HEAD = struct.Struct(">ii")


def frame_answer(correlation_id: int, flexible_header: bool, body: bytes) -> bytes:
    """Size prefix + response header (v1 when ``flexible_header``) + ``body``, one bytes."""
    if flexible_header:
        return _ANSWER_HEAD.pack(len(body) + 5, correlation_id) + b"\x00" + body
    return _ANSWER_HEAD.pack(len(body) + 4, correlation_id) + body


def frame_chunks(
    correlation_id: int, flexible_header: bool, head: bytes, data: bytes | memoryview, tail: bytes
) -> list[bytes | memoryview]:
    """``frame_answer`` for a body of ``head + data + tail`` without copying ``data``."""
    first = frame_head(correlation_id, flexible_header, head, len(data) + len(tail))
    return [first, data, tail] if tail else [first, data]


def frame_head(correlation_id: int, flexible_header: bool, head: bytes, rest_size: int) -> bytes:
    """Size prefix + response header + ``head`` of an answer whose body goes on with
    ``rest_size`` more bytes (written separately: record data sent from a file, the tail)."""
    size = len(head) + rest_size + (5 if flexible_header else 4)
    return _ANSWER_HEAD.pack(size, correlation_id) + (b"\x00" if flexible_header else b"") + head


@functools.lru_cache(maxsize=4096)
def _produce_one_prefix(version: int, name: str) -> bytes:
    flexible = version >= 9
    return array_len(1, flexible) + string(name, flexible) + array_len(1, flexible)


def encode_produce_one(
    version: int,
    name: str,
    index: int,
    error_code: int,
    base_offset: int,
    log_append_time_ms: int = -1,
    log_start_offset: int = -1,
    error_message: str | None = None,
) -> bytes:
    """``encode_produce_body`` for the common one-topic, one-partition answer (same bytes)."""
    prefix = _produce_one_prefix(version, name)
    if version >= 9:
        if error_message is None:
            tail = b"\x01\x00\x00\x00\x00\x00\x00\x00\x00"  # errors, message, tags, throttle
        else:
            tail = b"\x01" + string(error_message, True) + b"\x00" * 7
        return (
            prefix
            + _PRODUCE_PARTITION_V5.pack(
                index, error_code, base_offset, log_append_time_ms, log_start_offset
            )
            + tail
        )
    if version >= 8:
        tail = b"\x00\x00\x00\x00" + nullable_string(error_message, False) + b"\x00\x00\x00\x00"
    else:
        tail = b"\x00\x00\x00\x00"  # throttle time
    if version >= 5:
        part = _PRODUCE_PARTITION_V5.pack(
            index, error_code, base_offset, log_append_time_ms, log_start_offset
        )
    else:
        part = _PRODUCE_PARTITION.pack(index, error_code, base_offset, log_append_time_ms)
    return prefix + part + tail
