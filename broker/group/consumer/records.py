"""Kafka 4's ``__consumer_offsets`` records of consumer groups (KIP-848), byte for byte.

From apache/kafka ``group-coordinator/src/main/resources/common/message/ConsumerGroup*.json``
(Kafka 4.0). A key is an int16 key version followed by non-flexible fields (int16-length UTF-8
strings); a value is an int16 value version (0) followed by the flexible encoding of version 0
(compact strings and arrays: unsigned varint length + 1, 0 = null; uuid as 16 bytes; each
struct ends with an empty tagged-field section, one 0x00 byte, since tidelog writes no tagged
field). A null value is a tombstone.

=====  ==========================================  ========================================
key    key fields                                  value (version 0) fields
=====  ==========================================  ========================================
3      ConsumerGroupMetadataKey: group             Epoch i32
4      ConsumerGroupPartitionMetadataKey: group    Topics[]: TopicId uuid, TopicName str,
                                                   NumPartitions i32, PartitionMetadata[]:
                                                   (Partition i32, Racks []str) - written
                                                   empty, as Kafka 4.0 does
5      ConsumerGroupMemberMetadataKey: group,      InstanceId str?, RackId str?, ClientId str,
       member                                      ClientHost str, SubscribedTopicNames []str,
                                                   SubscribedTopicRegex str?,
                                                   RebalanceTimeoutMs i32, ServerAssignor str?
                                                   (tag 0 ClassicMemberMetadata: not written)
6      ConsumerGroupTargetAssignmentMetadataKey:   AssignmentEpoch i32
       group
7      ConsumerGroupTargetAssignmentMemberKey:     TopicPartitions[]: TopicId uuid,
       group, member                               Partitions []i32
8      ConsumerGroupCurrentMemberAssignmentKey:    MemberEpoch i32, PreviousMemberEpoch i32,
       group, member                               State i8, AssignedPartitions[] and
                                                   PartitionsPendingRevocation[]: TopicId uuid,
                                                   Partitions []i32
=====  ==========================================  ========================================

Readers skip tagged fields they do not know (later Kafka versions add some, e.g. MetadataHash).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tidelog.protocol.internal_topics.consumer_offsets import SchemaError

METADATA_KEY = 3
PARTITION_METADATA_KEY = 4
MEMBER_METADATA_KEY = 5
TARGET_ASSIGNMENT_METADATA_KEY = 6
TARGET_ASSIGNMENT_MEMBER_KEY = 7
CURRENT_MEMBER_ASSIGNMENT_KEY = 8
CONSUMER_KEY_VERSIONS = frozenset(range(3, 9))
#: The key types whose key names a member too: the consumer groups' (5, 7, 8), the share
#: groups' (10, 13, 14: ``broker/share/records.py``) and the streams groups' (19, 21, 22:
#: ``broker/group/streams/records.py``).
MEMBER_KEY_VERSIONS = frozenset(
    {MEMBER_METADATA_KEY, TARGET_ASSIGNMENT_MEMBER_KEY, CURRENT_MEMBER_ASSIGNMENT_KEY, 10, 13, 14}
    | {19, 21, 22}
)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

#: topic id -> partitions
Assignment = Mapping[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class ConsumerKey:
    """A consumer-group record key: its version (3-8), group and member (5, 7, 8 only); a
    share group's keys (10-14) have the same shape."""

    version: int
    group_id: str
    member_id: str | None = None


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: uuid.UUID
    topic_name: str
    num_partitions: int


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


@dataclass(frozen=True, slots=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: dict[uuid.UUID, frozenset[int]]
    pending_revocation: dict[uuid.UUID, frozenset[int]]


# ---------------------------------------------------------------- writing


class RecordWriter:
    """Kafka's coordinator record encoding: non-flexible keys, flexible v0 values (the share
    groups' records, ``broker/share/records.py``, use it too)."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

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

    def key_string(self, v: str) -> None:
        raw = v.encode("utf-8")
        if len(raw) > 0x7FFF:
            raise SchemaError("string too long for an int16 length")
        self.i16(len(raw))
        self.buf += raw

    def string(self, v: str | None) -> None:
        if v is None:
            self.uvarint(0)
            return
        raw = v.encode("utf-8")
        self.uvarint(len(raw) + 1)
        self.buf += raw

    def array_len(self, n: int) -> None:
        self.uvarint(n + 1)

    def uuid_(self, v: uuid.UUID) -> None:
        self.buf += v.bytes

    def no_tags(self) -> None:
        self.buf.append(0)

    def topic_partitions(self, assignment: Assignment) -> None:
        items = sorted(assignment.items(), key=lambda kv: kv[0].bytes)
        self.array_len(len(items))
        for topic_id, partitions in items:
            self.uuid_(topic_id)
            self.array_len(len(partitions))
            for p in sorted(partitions):
                self.i32(p)
            self.no_tags()


def encode_key(key: ConsumerKey) -> bytes:
    w = RecordWriter()
    w.i16(key.version)
    w.key_string(key.group_id)
    if key.version in MEMBER_KEY_VERSIONS:
        if key.member_id is None:
            raise SchemaError(f"key version {key.version} needs a member id")
        w.key_string(key.member_id)
    return bytes(w.buf)


def encode_epoch_value(epoch: int) -> bytes:
    """ConsumerGroupMetadataValue / ConsumerGroupTargetAssignmentMetadataValue (same shape)."""
    w = RecordWriter()
    w.i16(0)
    w.i32(epoch)
    w.no_tags()
    return bytes(w.buf)


def encode_partition_metadata_value(topics: Sequence[TopicMetadata]) -> bytes:
    w = RecordWriter()
    w.i16(0)
    w.array_len(len(topics))
    for t in topics:
        w.uuid_(t.topic_id)
        w.string(t.topic_name)
        w.i32(t.num_partitions)
        w.array_len(0)  # PartitionMetadata: not used since Kafka 4.0
        w.no_tags()
    w.no_tags()
    return bytes(w.buf)


def encode_member_metadata_value(v: MemberMetadataValue) -> bytes:
    w = RecordWriter()
    w.i16(0)
    w.string(v.instance_id)
    w.string(v.rack_id)
    w.string(v.client_id)
    w.string(v.client_host)
    w.array_len(len(v.subscribed_topic_names))
    for name in v.subscribed_topic_names:
        w.string(name)
    w.string(v.subscribed_topic_regex)
    w.i32(v.rebalance_timeout_ms)
    w.string(v.server_assignor)
    w.no_tags()
    return bytes(w.buf)


def encode_target_member_value(assignment: Assignment) -> bytes:
    w = RecordWriter()
    w.i16(0)
    w.topic_partitions(assignment)
    w.no_tags()
    return bytes(w.buf)


def encode_current_assignment_value(v: CurrentAssignmentValue) -> bytes:
    w = RecordWriter()
    w.i16(0)
    w.i32(v.member_epoch)
    w.i32(v.previous_member_epoch)
    w.i8(v.state)
    w.topic_partitions(v.assigned)
    w.topic_partitions(v.pending_revocation)
    w.no_tags()
    return bytes(w.buf)


# ---------------------------------------------------------------- reading


class RecordReader:
    """Reads what ``RecordWriter`` writes (lengths checked against the record's size)."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise SchemaError("record ends early")
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
        shift = value = 0
        while True:
            b = self._take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise SchemaError("varint too long")

    def key_string(self) -> str:
        n = self.i16()
        if n < 0:
            raise SchemaError("null string in a key")
        return self._take(n).decode("utf-8")

    def string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self._take(n - 1).decode("utf-8")

    def required_string(self) -> str:
        s = self.string()
        if s is None:
            raise SchemaError("null where a string is required")
        return s

    def array_len(self) -> int:
        n = self.uvarint() - 1
        if n > len(self.data):
            raise SchemaError("array longer than the record")
        return max(n, 0)

    def uuid_(self) -> uuid.UUID:
        return uuid.UUID(bytes=self._take(16))

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._take(self.uvarint())

    def topic_partitions(self) -> dict[uuid.UUID, frozenset[int]]:
        out: dict[uuid.UUID, frozenset[int]] = {}
        for _ in range(self.array_len()):
            topic_id = self.uuid_()
            out[topic_id] = frozenset(self.i32() for _ in range(self.array_len()))
            self.tags()
        return out

    def value_version(self) -> None:
        version = self.i16()
        if version != 0:
            raise SchemaError(f"unknown consumer group value version {version}")


def decode_key(data: bytes, versions: frozenset[int] = CONSUMER_KEY_VERSIONS) -> ConsumerKey:
    """A consumer-group key (or, with the share groups' ``versions``, a share-group key)."""
    r = RecordReader(data)
    version = r.i16()
    if version not in versions:
        raise SchemaError(f"not a key version of this group type: {version}")
    group_id = r.key_string()
    member_id = r.key_string() if version in MEMBER_KEY_VERSIONS else None
    return ConsumerKey(version, group_id, member_id)


def key_version(data: bytes) -> int:
    return int(_I16.unpack_from(data, 0)[0]) if len(data) >= 2 else -1


def decode_epoch_value(data: bytes) -> int:
    r = RecordReader(data)
    r.value_version()
    epoch = r.i32()
    r.tags()
    return epoch


def decode_partition_metadata_value(data: bytes) -> list[TopicMetadata]:
    r = RecordReader(data)
    r.value_version()
    out = []
    for _ in range(r.array_len()):
        topic_id = r.uuid_()
        name = r.required_string()
        count = r.i32()
        for _ in range(r.array_len()):
            r.i32()
            for _ in range(r.array_len()):
                r.string()
            r.tags()
        r.tags()
        out.append(TopicMetadata(topic_id, name, count))
    r.tags()
    return out


def decode_member_metadata_value(data: bytes) -> MemberMetadataValue:
    r = RecordReader(data)
    r.value_version()
    instance_id = r.string()
    rack_id = r.string()
    client_id = r.required_string()
    client_host = r.required_string()
    names = tuple(r.required_string() for _ in range(r.array_len()))
    regex = r.string()
    rebalance_timeout = r.i32()
    assignor = r.string()
    r.tags()
    return MemberMetadataValue(
        instance_id, rack_id, client_id, client_host, names, regex, rebalance_timeout, assignor
    )


def decode_target_member_value(data: bytes) -> dict[uuid.UUID, frozenset[int]]:
    r = RecordReader(data)
    r.value_version()
    out = r.topic_partitions()
    r.tags()
    return out


def decode_current_assignment_value(data: bytes) -> CurrentAssignmentValue:
    r = RecordReader(data)
    r.value_version()
    epoch = r.i32()
    previous = r.i32()
    state = r.i8()
    assigned = r.topic_partitions()
    pending = r.topic_partitions()
    r.tags()
    return CurrentAssignmentValue(epoch, previous, state, assigned, pending)
