"""Records of ``__share_group_state``, as Kafka's share coordinator writes them.

One record per write of a share partition's state; the topic is compacted, so the last
snapshot of a key is the state. A share partition (group, topic id, partition) lives in
partition ``abs(hashCode("<group>:<topic id>:<partition>")) % num partitions`` (Java's
``String.hashCode`` of ``SharePartitionKey.asCoordinatorKey()``).

Key (ShareSnapshotKey, coordinator record type 0; ShareUpdateKey is type 1, same fields)::

    type        int16   0 (snapshot) or 1 (update)
    group_id    string  int16 length + UTF-8
    topic_id    uuid    16 bytes
    partition   int32

Value (ShareSnapshotValue / ShareUpdateValue version 0, flexible: compact arrays and a tagged
field section at the end of each struct)::

    version          int16   0
    snapshot_epoch   uint16
    state_epoch      int32   (snapshot only)
    leader_epoch     int32
    start_offset     int64   (ShareUpdateValue: -1 when unchanged)
    state_batches    compact array of
        first_offset    int64
        last_offset     int64
        delivery_state  int8   0 available, 2 acknowledged, 4 archived
        delivery_count  int16

A null value (tombstone) removes the share partition's state (DeleteShareGroupState).
Damage raises ``ShareStateSchemaError``.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from tidelog.protocol.errors import FrameDecodeError
from tidelog.protocol.fast.common import encode_uvarint, uvarint

__all__ = (
    "SNAPSHOT",
    "UPDATE",
    "ShareStateKey",
    "ShareStateSchemaError",
    "ShareStateValue",
    "StateBatchRecord",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "partition_for",
)

SNAPSHOT = 0
UPDATE = 1
_BATCH = struct.Struct(">qqbh")


class ShareStateSchemaError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class ShareStateKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int
    record_type: int = SNAPSHOT


@dataclass(frozen=True, slots=True)
class StateBatchRecord:
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareStateValue:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatchRecord, ...]


def java_string_hash(text: str) -> int:
    h = 0
    for unit in struct.unpack(f">{len(text.encode('utf-16-be')) // 2}H", text.encode("utf-16-be")):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, topic_id: uuid.UUID, partition: int, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode()) % n`` (abs of MIN_VALUE is 0 there)."""
    h = java_string_hash(f"{group_id}:{_java_uuid(topic_id)}:{partition}")
    return (0 if h == -(2**31) else abs(h)) % num_partitions


def _java_uuid(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString()``: URL-safe base64 without padding."""
    import base64

    return base64.urlsafe_b64encode(topic_id.bytes).decode("ascii").rstrip("=")


def encode_key(key: ShareStateKey) -> bytes:
    group = key.group_id.encode()
    return (
        struct.pack(">hh", key.record_type, len(group))
        + group
        + key.topic_id.bytes
        + struct.pack(">i", key.partition)
    )


def decode_key(data: bytes) -> ShareStateKey:
    try:
        record_type, length = struct.unpack_from(">hh", data, 0)
        if record_type not in (SNAPSHOT, UPDATE) or length < 0 or 4 + length + 20 != len(data):
            raise ShareStateSchemaError(f"not a share state key: {data!r}")
        group = data[4 : 4 + length].decode()
        topic_id = uuid.UUID(bytes=bytes(data[4 + length : 20 + length]))
        (partition,) = struct.unpack_from(">i", data, 20 + length)
    except (struct.error, UnicodeDecodeError) as exc:
        raise ShareStateSchemaError(str(exc)) from exc
    return ShareStateKey(group, topic_id, partition, record_type)


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    try:
        return uvarint("__share_group_state", data, pos, len(data))
    except FrameDecodeError as exc:
        raise ShareStateSchemaError(str(exc)) from exc


def encode_value(value: ShareStateValue, record_type: int = SNAPSHOT) -> bytes:
    parts = [struct.pack(">h", 0)]
    if record_type == SNAPSHOT:
        parts.append(
            struct.pack(
                ">Hii", value.snapshot_epoch & 0xFFFF, value.state_epoch, value.leader_epoch
            )
        )
    else:
        parts.append(struct.pack(">Hi", value.snapshot_epoch & 0xFFFF, value.leader_epoch))
    parts.append(struct.pack(">q", value.start_offset))
    parts.append(encode_uvarint(len(value.state_batches) + 1))
    for b in value.state_batches:
        parts.append(_BATCH.pack(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count))
        parts.append(b"\x00")
    parts.append(b"\x00")
    return b"".join(parts)


def decode_value(data: bytes, record_type: int = SNAPSHOT) -> ShareStateValue:
    try:
        (version,) = struct.unpack_from(">h", data, 0)
        if version != 0:
            raise ShareStateSchemaError(f"unknown share state value version {version}")
        if record_type == SNAPSHOT:
            snapshot_epoch, state_epoch, leader_epoch = struct.unpack_from(">Hii", data, 2)
            pos = 12
        else:
            snapshot_epoch, leader_epoch = struct.unpack_from(">Hi", data, 2)
            state_epoch, pos = -1, 8
        (start_offset,) = struct.unpack_from(">q", data, pos)
        count, pos = _read_uvarint(data, pos + 8)
        batches = []
        for _ in range(max(count - 1, 0)):
            first, last, state, delivered = _BATCH.unpack_from(data, pos)
            pos += _BATCH.size
            pos = _skip_tags(data, pos)
            batches.append(StateBatchRecord(first, last, state, delivered))
        pos = _skip_tags(data, pos)
    except struct.error as exc:
        raise ShareStateSchemaError(str(exc)) from exc
    if pos != len(data):
        raise ShareStateSchemaError(f"{len(data) - pos} bytes after the share state value")
    return ShareStateValue(snapshot_epoch, state_epoch, leader_epoch, start_offset, tuple(batches))


def _skip_tags(data: bytes, pos: int) -> int:
    count, pos = _read_uvarint(data, pos)
    for _ in range(count):
        _tag, pos = _read_uvarint(data, pos)
        size, pos = _read_uvarint(data, pos)
        pos += size
    if pos > len(data):
        raise ShareStateSchemaError("tagged fields run past the end")
    return pos
