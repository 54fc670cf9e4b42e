"""Kafka 4's ``__consumer_offsets`` records of share groups (KIP-932), byte for byte.

From apache/kafka ``group-coordinator/src/main/resources/common/message/ShareGroup*.json``
(Kafka 4.4). A key is the int16 record type followed by int16-length strings; a value is an
int16 value version (0) and the flexible encoding of version 0 (see
``broker/group/consumer/records.py``; written and read by the ``RecordWriter`` and
``RecordReader`` of ``protocol/internal_topics/consumer_offsets.py``). A null value is a
tombstone.

=====  =========================================  ========================================
type   key fields                                 value (version 0) fields
=====  =========================================  ========================================
10     ShareGroupMemberMetadataKey: group, member RackId str?, ClientId str, ClientHost str,
                                                  SubscribedTopicNames []str
11     ShareGroupMetadataKey: group               Epoch i32, MetadataHash i64
12     ShareGroupTargetAssignmentMetadataKey:     AssignmentEpoch i32
       group
13     ShareGroupTargetAssignmentMemberKey:       TopicPartitions[]: TopicId uuid,
       group, member                              Partitions []i32
14     ShareGroupCurrentMemberAssignmentKey:      MemberEpoch i32, PreviousMemberEpoch i32,
       group, member                              State i8, AssignedPartitions[]: TopicId
                                                  uuid, Partitions []i32
=====  =========================================  ========================================

``group_records`` gives a share group's records (the state it must come back with after a
restart: group epoch, subscriptions, target and current assignments, member epochs), ``diff``
the records that turn one into another, and the ``decode_*`` functions read the values back
for ``ShareGroups.replay`` (``broker/share/groups.py``).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from tidelog.broker.coordinator.log import KeyValue
from tidelog.broker.group.consumer.records import (
    ConsumerKey,
    encode_target_member_value,  # the same value shape as ConsumerGroupTargetAssignmentMember
    value_reader,
)
from tidelog.broker.group.consumer.records import decode_key as decode_consumer_key
from tidelog.broker.group.consumer.records import encode_key as encode_consumer_key
from tidelog.protocol.internal_topics.consumer_offsets import (
    RecordWriter,
)

__all__ = (
    "SHARE_KEY_VERSIONS",
    "ShareKey",
    "decode_current_assignment",
    "decode_epoch",
    "decode_group_metadata",
    "decode_key",
    "decode_member_metadata",
    "diff",
    "group_records",
    "metadata_hash",
)

MEMBER_METADATA_KEY = 10
METADATA_KEY = 11
TARGET_ASSIGNMENT_METADATA_KEY = 12
TARGET_ASSIGNMENT_MEMBER_KEY = 13
CURRENT_MEMBER_ASSIGNMENT_KEY = 14
SHARE_KEY_VERSIONS = frozenset(range(10, 15))
#: Kafka's MemberState.STABLE (a share member has nothing to revoke).
_STABLE = 0

#: topic id -> partitions
Assignment = Mapping[uuid.UUID, frozenset[int]]


#: A share-group key: the consumer groups' key shape (type, group, member for 10, 13, 14).
ShareKey = ConsumerKey


def encode_key(key: ShareKey) -> bytes:
    return encode_consumer_key(key)


def decode_key(data: bytes) -> ShareKey:
    return decode_consumer_key(data, SHARE_KEY_VERSIONS)


def metadata_hash(metadata: tuple[tuple[str, uuid.UUID, int], ...]) -> int:
    """A 64-bit hash of the subscribed topics' metadata (names, ids, partition counts).

    Kafka divergence: Kafka hashes the topics' full metadata (racks included) with its own
    function; tidelog's value only needs to tell whether the metadata changed."""
    text = ";".join(f"{name},{tid},{count}" for name, tid, count in metadata)
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


# ---------------------------------------------------------------- values


def _epoch_value(epoch: int, hash_: int | None = None) -> bytes:
    w = RecordWriter(flexible=True)
    w.i16(0)
    w.i32(epoch)
    if hash_ is not None:
        w.i64(hash_)
    w.no_tags()
    return bytes(w.buf)


def _member_value(
    rack_id: str | None, client_id: str, client_host: str, subscribed: tuple[str, ...]
) -> bytes:
    w = RecordWriter(flexible=True)
    w.i16(0)
    w.string(rack_id)
    w.string(client_id)
    w.string(client_host)
    w.array_len(len(subscribed))
    for name in subscribed:
        w.string(name)
    w.no_tags()
    return bytes(w.buf)


def _current_value(epoch: int, previous_epoch: int, assignment: Assignment) -> bytes:
    w = RecordWriter(flexible=True)
    w.i16(0)
    w.i32(epoch)
    w.i32(previous_epoch)
    w.i8(_STABLE)
    w.topic_partitions(assignment)
    w.no_tags()
    return bytes(w.buf)


# ---------------------------------------------------------------- a group's records


@dataclass(frozen=True, slots=True)
class MemberState:
    """What a share member is stored as."""

    member_epoch: int
    previous_member_epoch: int
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed: tuple[str, ...]
    assignment: Mapping[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class GroupState:
    """What a share group is stored as."""

    group_epoch: int
    metadata_hash: int
    assignment_epoch: int
    members: Mapping[str, MemberState]


def group_records(group_id: str, state: GroupState | None) -> dict[bytes, bytes | None]:
    """key -> value of every record that stores ``state`` (None: the group is gone, no
    records); ``diff`` turns two of these into the records to write."""
    if state is None:
        return {}
    out: dict[bytes, bytes | None] = {
        encode_key(ShareKey(METADATA_KEY, group_id)): _epoch_value(
            state.group_epoch, state.metadata_hash
        ),
        encode_key(ShareKey(TARGET_ASSIGNMENT_METADATA_KEY, group_id)): _epoch_value(
            state.assignment_epoch
        ),
    }
    for member_id, m in sorted(state.members.items()):
        out[encode_key(ShareKey(MEMBER_METADATA_KEY, group_id, member_id))] = _member_value(
            m.rack_id, m.client_id, m.client_host, m.subscribed
        )
        out[encode_key(ShareKey(TARGET_ASSIGNMENT_MEMBER_KEY, group_id, member_id))] = (
            encode_target_member_value(m.assignment)
        )
        out[encode_key(ShareKey(CURRENT_MEMBER_ASSIGNMENT_KEY, group_id, member_id))] = (
            _current_value(m.member_epoch, m.previous_member_epoch, m.assignment)
        )
    return out


def diff(before: dict[bytes, bytes | None], after: dict[bytes, bytes | None]) -> list[KeyValue]:
    """The records that turn ``before`` into ``after``: changed values, then tombstones of
    what is gone - members' records before the group's, as Kafka orders its tombstones."""
    changed = [(k, v) for k, v in after.items() if before.get(k) != v]
    gone = [k for k in before if k not in after]
    gone.sort(key=lambda k: -int.from_bytes(k[:2], "big"))  # 14, 13, 12, 11, 10
    return changed + [(k, None) for k in gone]


# ---------------------------------------------------------------- reading values


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    rack_id: str | None
    client_id: str
    host: str
    subscribed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CurrentAssignment:
    epoch: int
    previous_epoch: int
    assignment: dict[uuid.UUID, frozenset[int]]


def decode_group_metadata(data: bytes) -> tuple[int, int]:
    """ShareGroupMetadataValue: (group epoch, metadata hash)."""
    r = value_reader(data)
    return r.i32(), r.i64()


def decode_epoch(data: bytes) -> int:
    """ShareGroupTargetAssignmentMetadataValue: the assignment epoch."""
    return value_reader(data).i32()


def decode_member_metadata(data: bytes) -> MemberMetadata:
    r = value_reader(data)
    rack_id = r.nullable_string()
    client_id = r.string()
    host = r.string()
    subscribed = tuple(r.string() for _ in range(r.array_len()))
    return MemberMetadata(rack_id, client_id, host, subscribed)


def decode_current_assignment(data: bytes) -> CurrentAssignment:
    r = value_reader(data)
    epoch = r.i32()
    previous = r.i32()
    r.i8()  # State: a share member is always stable
    return CurrentAssignment(epoch, previous, r.topic_partitions())
