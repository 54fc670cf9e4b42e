"""Kafka 4's ``__consumer_offsets`` records of share groups (KIP-932), byte for byte.

From apache/kafka ``group-coordinator/src/main/resources/common/message/ShareGroup*.json``
(Kafka 4.4). A key is the int16 record type followed by int16-length strings; a value is an
int16 value version (0) and the flexible encoding of version 0 (see
``broker/group/consumer/records.py``, whose ``RecordWriter``/``RecordReader`` these use). A null
value is a tombstone.

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
restart: group epoch, subscriptions, target and current assignments, member epochs) and
``replay`` applies one record to the share groups, at load.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from tidelog.broker.coordinator.log import KeyValue
from tidelog.broker.group.consumer.records import (
    ConsumerKey,
    RecordReader,
    RecordWriter,
    encode_target_member_value,  # the same value shape as ConsumerGroupTargetAssignmentMember
)
from tidelog.broker.group.consumer.records import decode_key as decode_consumer_key
from tidelog.broker.group.consumer.records import encode_key as encode_consumer_key
from tidelog.protocol.internal_topics.consumer_offsets import SchemaError

__all__ = (
    "SHARE_KEY_VERSIONS",
    "ShareKey",
    "decode_key",
    "group_records",
    "metadata_hash",
    "replay",
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
    w = RecordWriter()
    w.i16(0)
    w.i32(epoch)
    if hash_ is not None:
        w.i64(hash_)
    w.no_tags()
    return bytes(w.buf)


def _member_value(
    rack_id: str | None, client_id: str, client_host: str, subscribed: tuple[str, ...]
) -> bytes:
    w = RecordWriter()
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
    w = RecordWriter()
    w.i16(0)
    w.i32(epoch)
    w.i32(previous_epoch)
    w.i8(_STABLE)
    w.topic_partitions(assignment)
    w.no_tags()
    return bytes(w.buf)


def _reader(data: bytes) -> RecordReader:
    r = RecordReader(data)
    version = r.i16()
    if version != 0:
        raise SchemaError(f"unknown share group value version {version}")
    return r


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


# ---------------------------------------------------------------- replay


@dataclass(slots=True)
class LoadedMember:
    member_epoch: int = 0
    previous_member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed: tuple[str, ...] = ()
    assignment: dict[uuid.UUID, frozenset[int]] | None = None
    has_metadata: bool = False


@dataclass(slots=True)
class LoadedGroup:
    group_epoch: int = 0
    metadata_hash: int = 0
    assignment_epoch: int = 0
    members: dict[str, LoadedMember] | None = None
    has_metadata: bool = False


def replay(groups: dict[str, LoadedGroup], key: ShareKey, value: bytes | None) -> None:
    """Apply one share-group record to ``groups`` (the state being loaded)."""
    group = groups.get(key.group_id)
    if key.version == METADATA_KEY:
        if value is None:
            groups.pop(key.group_id, None)
            return
        r = _reader(value)
        group = groups.setdefault(key.group_id, LoadedGroup())
        group.group_epoch = r.i32()
        group.metadata_hash = r.i64()
        group.has_metadata = True
        return
    if key.version == TARGET_ASSIGNMENT_METADATA_KEY:
        if value is not None:
            group = groups.setdefault(key.group_id, LoadedGroup())
            group.assignment_epoch = _reader(value).i32()
        return
    member_id = key.member_id or ""
    if value is None:
        if group is not None and group.members is not None:
            member = group.members.get(member_id)
            if member is not None and key.version == MEMBER_METADATA_KEY:
                del group.members[member_id]
        return
    group = groups.setdefault(key.group_id, LoadedGroup())
    if group.members is None:
        group.members = {}
    member = group.members.setdefault(member_id, LoadedMember())
    r = _reader(value)
    if key.version == MEMBER_METADATA_KEY:
        member.rack_id = r.string()
        member.client_id = r.required_string()
        member.client_host = r.required_string()
        member.subscribed = tuple(r.required_string() for _ in range(r.array_len()))
        member.has_metadata = True
    elif key.version == CURRENT_MEMBER_ASSIGNMENT_KEY:
        member.member_epoch = r.i32()
        member.previous_member_epoch = r.i32()
        r.i8()
        member.assignment = r.topic_partitions()
    # TARGET_ASSIGNMENT_MEMBER_KEY: the target equals the current assignment (no revocation
    # phase in share groups); the current one is what a member is given back.
