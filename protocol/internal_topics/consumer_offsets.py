"""Kafka's record schemas for ``__consumer_offsets``, byte for byte.

Every record of the internal topic has a key and a value, each starting with an int16 version:

==================  =======================================================================
key version 0, 1    OffsetCommitKey: group string, topic string, partition int32
key version 2       GroupMetadataKey: group string
OffsetCommitValue   v0: offset i64, metadata str, commit_ts i64
                    v1: ... commit_ts i64, expire_ts i64 (written when a v2-v4 commit names a
                    retention time)
                    v3: offset i64, leader_epoch i32, metadata str, commit_ts i64 (what we write)
                    v4: v3 as a flexible version (compact strings, tagged fields)
GroupMetadataValue  protocol_type str, generation i32, protocol str?, leader str?,
                    current_state_timestamp i64 (v2+), members[]: member_id str,
                    group_instance_id str? (v3+), client_id str, client_host str,
                    rebalance_timeout i32 (v1+), session_timeout i32, subscription bytes,
                    assignment bytes. We write v3; v4 is the flexible form.
==================  =======================================================================

A null value is a tombstone (an offset deleted, a group deleted). Strings are int16-length
UTF-8 (-1 = null), bytes are int32-length, arrays int32-counted, in the non-flexible versions
(from apache/kafka group-coordinator/src/main/resources/common/message/*.json).

A group's records all live in one partition: ``abs(groupId.hashCode()) % partitions`` with
Java's ``String.hashCode`` and ``Utils.abs`` (``n & 0x7fffffff``).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tidelog.protocol.errors import FrameDecodeError
from tidelog.protocol.fast.common import uvarint as wire_uvarint

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class SchemaError(ValueError):
    """A key or value that does not follow the schema."""


def java_string_hashcode(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units, 32-bit signed overflow)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition of a group, as Kafka computes it."""
    return (java_string_hashcode(group_id) & 0x7FFFFFFF) % num_partitions


# ---------------------------------------------------------------- values


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    expire_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadata, ...]


# ---------------------------------------------------------------- writing


class RecordWriter:
    """Kafka's coordinator record encoding, for every record type of ``__consumer_offsets``
    (the classic ones here, the consumer, streams and share groups' in
    ``broker/group/consumer/records.py``, ``broker/group/streams/records.py`` and
    ``broker/share/records.py``): keys and the classic values are non-flexible (int16-length
    strings, int32-length bytes and arrays); ``flexible`` writes the flexible form of the newer
    values (compact strings, bytes and arrays: unsigned varint length + 1, 0 = null; each
    struct ends with its tagged fields, ``no_tags``, since tidelog writes none)."""

    __slots__ = ("buf", "flexible")

    def __init__(self, *, flexible: bool = False) -> None:
        self.buf = bytearray()
        self.flexible = flexible

    def i8(self, v: int) -> None:
        self.buf += struct.pack(">b", v)

    def i16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def i32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def i64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def uvarint(self, v: int) -> None:
        while v > 0x7F:
            self.buf.append((v & 0x7F) | 0x80)
            v >>= 7
        self.buf.append(v)

    def string(self, v: str | None) -> None:
        """A nullable string."""
        if v is None:
            if self.flexible:
                self.uvarint(0)
            else:
                self.i16(-1)
            return
        raw = v.encode("utf-8")
        if self.flexible:
            self.uvarint(len(raw) + 1)
        elif len(raw) > 0x7FFF:
            raise SchemaError(f"string of {len(raw)} bytes is too long for an int16 length")
        else:
            self.i16(len(raw))
        self.buf += raw

    def bytes_(self, v: bytes) -> None:
        if self.flexible:
            self.uvarint(len(v) + 1)
        else:
            self.i32(len(v))
        self.buf += v

    def array_len(self, n: int) -> None:
        if self.flexible:
            self.uvarint(n + 1)
        else:
            self.i32(n)

    def uuid_(self, v: uuid.UUID) -> None:
        self.buf += v.bytes

    def no_tags(self) -> None:
        """An empty tagged-field section (flexible forms only)."""
        if self.flexible:
            self.buf.append(0)

    def tagged_fields(self, fields: Sequence[tuple[int, bytes]]) -> None:
        """A tagged-field section of ``fields`` (tag, bytes), in tag order (flexible forms)."""
        self.uvarint(len(fields))
        for tag, data in fields:
            self.uvarint(tag)
            self.uvarint(len(data))
            self.buf += data

    def topic_partitions(self, assignment: Mapping[uuid.UUID, Iterable[int]]) -> None:
        """An assignment (topic id -> partitions) as the newer groups' records carry it:
        topics in id order, each with its partitions in order."""
        items = sorted(assignment.items(), key=lambda kv: kv[0].bytes)
        self.array_len(len(items))
        for topic_id, partitions in items:
            self.uuid_(topic_id)
            parts = sorted(partitions)
            self.array_len(len(parts))
            for p in parts:
                self.i32(p)
            self.no_tags()


def encode_offset_commit_key(key: OffsetCommitKey) -> bytes:
    w = RecordWriter()
    w.i16(OFFSET_COMMIT_KEY_VERSION)
    w.string(key.group)
    w.string(key.topic)
    w.i32(key.partition)
    return bytes(w.buf)


def encode_group_metadata_key(key: GroupMetadataKey) -> bytes:
    w = RecordWriter()
    w.i16(GROUP_METADATA_KEY_VERSION)
    w.string(key.group)
    return bytes(w.buf)


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    """Version 3, or version 1 when the commit carries an explicit expire timestamp (as Kafka)."""
    w = RecordWriter()
    if value.expire_timestamp >= 0:
        w.i16(OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY)
        w.i64(value.offset)
        w.string(value.metadata)
        w.i64(value.commit_timestamp)
        w.i64(value.expire_timestamp)
    else:
        w.i16(OFFSET_COMMIT_VALUE_VERSION)
        w.i64(value.offset)
        w.i32(value.leader_epoch)
        w.string(value.metadata)
        w.i64(value.commit_timestamp)
    return bytes(w.buf)


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    """Version 3."""
    w = RecordWriter()
    w.i16(GROUP_METADATA_VALUE_VERSION)
    w.string(value.protocol_type)
    w.i32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    w.i64(value.current_state_timestamp)
    w.i32(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.i32(m.rebalance_timeout)
        w.i32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return bytes(w.buf)


# ---------------------------------------------------------------- reading


class RecordReader:
    """Reads what ``RecordWriter`` writes, in the same two forms (``flexible`` for the newer
    values); every length is checked against what is left of the record before it is used."""

    __slots__ = ("data", "flexible", "pos")

    def __init__(self, data: bytes, pos: int = 0, *, flexible: bool = False) -> None:
        self.data = data
        self.pos = pos
        self.flexible = flexible

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise SchemaError(f"needs {n} bytes at {self.pos}, {len(self.data) - self.pos} left")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def i8(self) -> int:
        return int(struct.unpack(">b", self._take(1))[0])

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def uvarint(self) -> int:
        """An unsigned varint (flexible forms): protocol's one wire varint reader."""
        try:
            value, self.pos = wire_uvarint("record", self.data, self.pos, len(self.data))
        except FrameDecodeError as exc:
            raise SchemaError(str(exc)) from None
        return value

    def nullable_string(self) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.i16()
        if n < 0:
            return None
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as e:
            raise SchemaError(f"string is not UTF-8: {e}") from None

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise SchemaError(f"null where a string is required at {self.pos}")
        return s

    def bytes_(self) -> bytes:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            raise SchemaError("null where bytes are required")
        return self._take(n)

    def array_len(self) -> int:
        """An array's length, at most the bytes left; a null array of the flexible form reads
        as empty (the newer groups' records), of the non-flexible form is an error."""
        if self.flexible:
            n = max(self.uvarint() - 1, 0)
        else:
            n = self.i32()
            if n < 0:
                raise SchemaError("null array")
        if n > len(self.data) - self.pos:
            raise SchemaError(f"array of {n} items is longer than the record")
        return n

    def nullable_array_len(self) -> int:
        """An array's length, negative for a null array (both forms), at most the bytes left."""
        n = self.uvarint() - 1 if self.flexible else self.i32()
        if n > len(self.data) - self.pos:
            raise SchemaError(f"array of {n} items is longer than the record")
        return n

    def uuid_(self) -> uuid.UUID:
        return uuid.UUID(bytes=self._take(16))

    def tags(self) -> None:
        """Skip a tagged-field section (flexible forms only)."""
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()  # tag
                self._take(self.uvarint())

    def tagged_fields(self) -> dict[int, bytes]:
        """A tagged-field section (flexible forms only): tag -> its bytes."""
        found: dict[int, bytes] = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            found[tag] = self._take(self.uvarint())
        return found

    def topic_partitions(self) -> dict[uuid.UUID, frozenset[int]]:
        """What ``RecordWriter.topic_partitions`` writes."""
        out: dict[uuid.UUID, frozenset[int]] = {}
        for _ in range(self.array_len()):
            topic_id = self.uuid_()
            out[topic_id] = frozenset(self.i32() for _ in range(self.array_len()))
            self.tags()
        return out


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey:
    """Decode a record key; raises ``SchemaError`` for other key versions."""
    r = RecordReader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetCommitKey(r.string(), r.string(), r.i32())
    if version == 2:
        return GroupMetadataKey(r.string())
    raise SchemaError(f"unknown __consumer_offsets key version {version}")


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    r = RecordReader(data)
    version = r.i16()
    if not 0 <= version <= 4:
        raise SchemaError(f"unknown OffsetCommitValue version {version}")
    r.flexible = version >= 4
    offset = r.i64()
    leader_epoch = r.i32() if version >= 3 else -1
    metadata = r.string()
    commit_ts = r.i64()
    expire_ts = r.i64() if version == 1 else -1
    r.tags()
    return OffsetCommitValue(offset, metadata, commit_ts, leader_epoch, expire_ts)


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    r = RecordReader(data)
    version = r.i16()
    if not 0 <= version <= 4:
        raise SchemaError(f"unknown GroupMetadataValue version {version}")
    r.flexible = version >= 4
    protocol_type = r.string()
    generation = r.i32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    state_ts = r.i64() if version >= 2 else -1
    members: list[MemberMetadata] = []
    for _ in range(r.array_len()):
        member_id = r.string()
        instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.tags()
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout
        members.append(
            MemberMetadata(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
            )
        )
    r.tags()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))


def subscribed_topics(subscription: bytes) -> frozenset[str] | None:
    """Topics of a ``consumer`` protocol subscription (ConsumerProtocolSubscription v0-3: the
    version, then the topic array comes first), or None when it does not parse."""
    try:
        r = RecordReader(subscription)
        if r.i16() < 0:
            return None
        return frozenset(r.string() for _ in range(r.array_len()))
    except SchemaError:
        return None


def all_subscribed_topics(subscriptions: Sequence[bytes]) -> frozenset[str] | None:
    """The union of several members' subscriptions; None if any does not parse."""
    topics: set[str] = set()
    for sub in subscriptions:
        parsed = subscribed_topics(sub)
        if parsed is None:
            return None
        topics |= parsed
    return frozenset(topics)
