"""Records of ``__transaction_state``, byte for byte as Kafka writes them.

One record per change of a transactional id's metadata; the topic is compacted, so the last
value of a key is the state. A transactional id lives in partition
``abs(transactionalId.hashCode()) % transaction.state.log.num.partitions`` (Java's
``String.hashCode``), like groups in ``__consumer_offsets``.

Key (Kafka's TransactionLogKey, prefixed by the coordinator record type 0)::

    version          int16   0
    transactional_id string  int16 length + UTF-8

Value (Kafka's TransactionLogValue; version 0 for a transaction of the protocol v1, version 1,
flexible, for one of transaction version 2 (``client_transaction_version`` 2), which Kafka
writes once ``transaction.version`` 2 is finalized; both are read)::

    version                          int16   0 (or 1)
    producer_id                      int64
    producer_epoch                   int16
    transaction_timeout_ms           int32
    transaction_status               int8    TxnState id (Empty 0 ... CompleteAbort 5, Dead 6)
    transaction_partitions           array   int32 count (-1 = null: state Empty) of
        topic                        string
        partition_ids                array of int32
    transaction_last_update_ms       int64
    transaction_start_ms             int64
  v1 only: compact strings/arrays (unsigned varint length + 1) and tagged fields at the end of
  each struct (tag 0 previous_producer_id int64, tag 1 next_producer_id int64, tag 2
  client_transaction_version int16); a tag is written only when it differs from its default
  (-1, -1, 0), as Kafka's generated writer does.

Kafka divergence: Kafka 4 with ``transaction.version`` 2 finalized writes version 1 for every
id; tidelog writes version 1 only for ids whose last client spoke transaction version 2, so the
records of librdkafka, kafka-python and aiokafka producers keep their version 0 bytes.

A null value (tombstone) removes the transactional id (``transactional.id.expiration.ms``).
Every length is checked against the bytes present; damage raises ``TxnSchemaError``.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tidelog.protocol.internal_topics.consumer_offsets import (
    RecordReader,
    RecordWriter,
    SchemaError,
)

__all__ = [
    "TxnLogValue",
    "TxnSchemaError",
    "decode_txn_key",
    "decode_txn_value",
    "encode_txn_key",
    "encode_txn_value",
]

_I16 = struct.Struct(">h")


class TxnSchemaError(ValueError):
    """A ``__transaction_state`` record that does not parse."""


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state_id: int
    partitions: Mapping[str, Sequence[int]] | None
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


def encode_txn_key(transactional_id: str) -> bytes:
    w = RecordWriter()
    w.i16(0)
    w.string(transactional_id)
    return bytes(w.buf)


def encode_txn_value(value: TxnLogValue) -> bytes:
    """Version 0, or version 1 (compact lengths, tagged fields: only those off their defaults)
    for an id whose client speaks transaction version 2."""
    version = 1 if value.client_transaction_version >= 2 else 0
    w = RecordWriter(flexible=version == 1)
    w.i16(version)
    w.i64(value.producer_id)
    w.i16(value.producer_epoch)
    w.i32(value.transaction_timeout_ms)
    w.i8(value.state_id)
    if value.partitions is None:
        w.array_len(-1)
    else:
        w.array_len(len(value.partitions))
        for topic in sorted(value.partitions):
            ids = sorted(value.partitions[topic])
            w.string(topic)
            w.array_len(len(ids))
            for i in ids:
                w.i32(i)
            w.no_tags()  # the topic entry's (flexible only)
    w.i64(value.last_update_ms)
    w.i64(value.start_ms)
    if version == 1:
        tags: list[tuple[int, bytes]] = []
        if value.previous_producer_id != -1:
            tags.append((0, struct.pack(">q", value.previous_producer_id)))
        if value.next_producer_id != -1:
            tags.append((1, struct.pack(">q", value.next_producer_id)))
        if value.client_transaction_version != 0:
            tags.append((2, _I16.pack(value.client_transaction_version)))
        w.tagged_fields(tags)
    return bytes(w.buf)


def decode_txn_key(key: bytes) -> str | None:
    """The transactional id of a key; None for another record type."""
    try:
        reader = RecordReader(key)
        if reader.i16() != 0:
            return None
        return reader.string()
    except SchemaError as exc:
        raise TxnSchemaError(str(exc)) from None


def decode_txn_value(value: bytes) -> TxnLogValue:
    try:
        return _decode_txn_value(RecordReader(value))
    except SchemaError as exc:
        raise TxnSchemaError(str(exc)) from None


def _decode_txn_value(reader: RecordReader) -> TxnLogValue:
    version = reader.i16()
    if version not in (0, 1):
        raise TxnSchemaError(f"unknown transaction log value version {version}")
    reader.flexible = compact = version == 1
    producer_id, epoch, timeout, status = reader.i64(), reader.i16(), reader.i32(), reader.i8()
    count = reader.nullable_array_len()
    partitions: dict[str, list[int]] | None = None
    if count >= 0:
        partitions = {}
        for _ in range(count):
            topic = reader.string()
            n = reader.nullable_array_len()
            partitions[topic] = [reader.i32() for _ in range(max(n, 0))]
            reader.tags()
    last_update, start = reader.i64(), reader.i64()
    previous = next_ = -1
    client_version = 0
    if compact:
        tags = reader.tagged_fields()
        if 0 in tags and len(tags[0]) == 8:
            previous = struct.unpack(">q", tags[0])[0]
        if 1 in tags and len(tags[1]) == 8:
            next_ = struct.unpack(">q", tags[1])[0]
        if 2 in tags and len(tags[2]) == 2:
            client_version = _I16.unpack(tags[2])[0]
    return TxnLogValue(
        producer_id,
        epoch,
        timeout,
        status,
        partitions,
        last_update,
        start,
        previous,
        next_,
        client_version,
    )
