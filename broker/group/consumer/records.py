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
The encoding itself (both forms) is the ``RecordWriter``/``RecordReader`` of
``protocol/internal_topics/consumer_offsets.py``, shared by every record type of the topic.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tidelog.protocol.internal_topics.consumer_offsets import (
    RecordReader,
    RecordWriter,
    SchemaError,
)

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


def encode_key(key: ConsumerKey) -> bytes:
    w = RecordWriter()
    w.i16(key.version)
    w.string(key.group_id)
    if key.version in MEMBER_KEY_VERSIONS:
        if key.member_id is None:
            raise SchemaError(f"key version {key.version} needs a member id")
        w.string(key.member_id)
    return bytes(w.buf)


def encode_epoch_value(epoch: int) -> bytes:
    """ConsumerGroupMetadataValue / ConsumerGroupTargetAssignmentMetadataValue (same shape)."""
    w = RecordWriter(flexible=True)
    w.i16(0)
    w.i32(epoch)
    w.no_tags()
    return bytes(w.buf)


def encode_partition_metadata_value(topics: Sequence[TopicMetadata]) -> bytes:
    w = RecordWriter(flexible=True)
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
    w = RecordWriter(flexible=True)
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
    w = RecordWriter(flexible=True)
    w.i16(0)
    w.topic_partitions(assignment)
    w.no_tags()
    return bytes(w.buf)


def encode_current_assignment_value(v: CurrentAssignmentValue) -> bytes:
    w = RecordWriter(flexible=True)
    w.i16(0)
    w.i32(v.member_epoch)
    w.i32(v.previous_member_epoch)
    w.i8(v.state)
    w.topic_partitions(v.assigned)
    w.topic_partitions(v.pending_revocation)
    w.no_tags()
    return bytes(w.buf)


# ---------------------------------------------------------------- reading


def value_reader(data: bytes) -> RecordReader:
    """A reader of a consumer, share or streams group record's value: version 0, then the
    flexible form."""
    r = RecordReader(data, flexible=True)
    version = r.i16()
    if version != 0:
        raise SchemaError(f"unknown group record value version {version}")
    return r


def decode_key(data: bytes, versions: frozenset[int] = CONSUMER_KEY_VERSIONS) -> ConsumerKey:
    """A consumer-group key (or, with the share groups' ``versions``, a share-group key)."""
    r = RecordReader(data)
    version = r.i16()
    if version not in versions:
        raise SchemaError(f"not a key version of this group type: {version}")
    group_id = r.string()
    member_id = r.string() if version in MEMBER_KEY_VERSIONS else None
    return ConsumerKey(version, group_id, member_id)


def key_version(data: bytes) -> int:
    return int(_I16.unpack_from(data, 0)[0]) if len(data) >= 2 else -1


def decode_epoch_value(data: bytes) -> int:
    r = value_reader(data)
    epoch = r.i32()
    r.tags()
    return epoch


def decode_partition_metadata_value(data: bytes) -> list[TopicMetadata]:
    r = value_reader(data)
    out = []
    for _ in range(r.array_len()):
        topic_id = r.uuid_()
        name = r.string()
        count = r.i32()
        for _ in range(r.array_len()):
            r.i32()
            for _ in range(r.array_len()):
                r.nullable_string()
            r.tags()
        r.tags()
        out.append(TopicMetadata(topic_id, name, count))
    r.tags()
    return out


def decode_member_metadata_value(data: bytes) -> MemberMetadataValue:
    r = value_reader(data)
    instance_id = r.nullable_string()
    rack_id = r.nullable_string()
    client_id = r.string()
    client_host = r.string()
    names = tuple(r.string() for _ in range(r.array_len()))
    regex = r.nullable_string()
    rebalance_timeout = r.i32()
    assignor = r.nullable_string()
    r.tags()
    return MemberMetadataValue(
        instance_id, rack_id, client_id, client_host, names, regex, rebalance_timeout, assignor
    )


def decode_target_member_value(data: bytes) -> dict[uuid.UUID, frozenset[int]]:
    r = value_reader(data)
    out = r.topic_partitions()
    r.tags()
    return out


def decode_current_assignment_value(data: bytes) -> CurrentAssignmentValue:
    r = value_reader(data)
    epoch = r.i32()
    previous = r.i32()
    state = r.i8()
    assigned = r.topic_partitions()
    pending = r.topic_partitions()
    r.tags()
    return CurrentAssignmentValue(epoch, previous, state, assigned, pending)
