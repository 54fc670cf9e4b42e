"""Consumer-group state as Kafka 4's ``__consumer_offsets`` records, and back (replay).

The builders turn the in-memory state of ``model`` into (key, value) records in the byte
layouts of ``records``; ``apply_record`` applies one record read back at start-up, in log
order (a member metadata tombstone removes the member; a group metadata tombstone the group).
"""

from __future__ import annotations

from dataclasses import replace

from tidelog.broker.coordinator.log import KeyValue
from tidelog.broker.group.consumer import records as rec
from tidelog.broker.group.consumer.model import ConsumerGroup, ConsumerMember, Partitions

__all__ = [
    "apply_record",
    "current_assignment_record",
    "epoch_record",
    "member_metadata_record",
    "partition_metadata_record",
    "target_member_record",
    "tombstone",
]


def tombstone(key_version: int, group_id: str, member_id: str | None = None) -> KeyValue:
    return rec.encode_key(rec.ConsumerKey(key_version, group_id, member_id)), None


def epoch_record(key_version: int, group_id: str, epoch: int) -> KeyValue:
    return rec.encode_key(rec.ConsumerKey(key_version, group_id)), rec.encode_epoch_value(epoch)


def partition_metadata_record(group: ConsumerGroup) -> KeyValue:
    topics = [
        rec.TopicMetadata(tid, name, n)
        for name, (tid, n) in sorted(group.subscribed_metadata.items())
    ]
    return (
        rec.encode_key(rec.ConsumerKey(rec.PARTITION_METADATA_KEY, group.group_id)),
        rec.encode_partition_metadata_value(topics),
    )


def member_metadata_record(group_id: str, m: ConsumerMember) -> KeyValue:
    value = rec.MemberMetadataValue(
        m.instance_id,
        m.rack_id,
        m.client_id,
        m.client_host,
        m.subscribed_topic_names,
        m.subscribed_topic_regex,
        m.rebalance_timeout_ms,
        m.server_assignor,
    )
    return (
        rec.encode_key(rec.ConsumerKey(rec.MEMBER_METADATA_KEY, group_id, m.member_id)),
        rec.encode_member_metadata_value(value),
    )


def target_member_record(group_id: str, member_id: str, parts: Partitions) -> KeyValue:
    return (
        rec.encode_key(rec.ConsumerKey(rec.TARGET_ASSIGNMENT_MEMBER_KEY, group_id, member_id)),
        rec.encode_target_member_value(parts),
    )


def current_assignment_record(group_id: str, m: ConsumerMember) -> KeyValue:
    value = rec.CurrentAssignmentValue(
        m.member_epoch, m.previous_member_epoch, m.state, m.assigned, m.pending_revocation
    )
    return (
        rec.encode_key(rec.ConsumerKey(rec.CURRENT_MEMBER_ASSIGNMENT_KEY, group_id, m.member_id)),
        rec.encode_current_assignment_value(value),
    )


def apply_record(groups: dict[str, ConsumerGroup], k: rec.ConsumerKey, value: bytes | None) -> None:
    """Apply one decoded record (start-up replay): groups, members, epochs, targets."""
    group = groups.get(k.group_id)
    if k.version == rec.METADATA_KEY:
        if value is None:
            groups.pop(k.group_id, None)
            return
        group = group or groups.setdefault(k.group_id, ConsumerGroup(k.group_id))
        group.group_epoch = rec.decode_epoch_value(value)
        return
    if group is None:
        if value is None:
            return
        group = groups.setdefault(k.group_id, ConsumerGroup(k.group_id))
    mid = k.member_id or ""
    if k.version == rec.PARTITION_METADATA_KEY:
        group.subscribed_metadata = (
            {}
            if value is None
            else {
                t.topic_name: (t.topic_id, t.num_partitions)
                for t in rec.decode_partition_metadata_value(value)
            }
        )
    elif k.version == rec.TARGET_ASSIGNMENT_METADATA_KEY:
        group.assignment_epoch = 0 if value is None else rec.decode_epoch_value(value)
    elif k.version == rec.TARGET_ASSIGNMENT_MEMBER_KEY:
        if value is None:
            group.target.pop(mid, None)
        else:
            group.target[mid] = rec.decode_target_member_value(value)
    elif k.version == rec.MEMBER_METADATA_KEY:
        if value is None:
            group.members.pop(mid, None)
            return
        v = rec.decode_member_metadata_value(value)
        base = group.members.get(mid, ConsumerMember(member_id=mid))
        group.members[mid] = replace(
            base,
            instance_id=v.instance_id,
            rack_id=v.rack_id,
            client_id=v.client_id,
            client_host=v.client_host,
            subscribed_topic_names=v.subscribed_topic_names,
            subscribed_topic_regex=v.subscribed_topic_regex,
            rebalance_timeout_ms=v.rebalance_timeout_ms,
            server_assignor=v.server_assignor,
        )
    elif k.version == rec.CURRENT_MEMBER_ASSIGNMENT_KEY:
        if value is None:
            return  # the member metadata tombstone removes the member
        c = rec.decode_current_assignment_value(value)
        base = group.members.get(mid, ConsumerMember(member_id=mid))
        group.members[mid] = replace(
            base,
            member_epoch=c.member_epoch,
            previous_member_epoch=c.previous_member_epoch,
            state=c.state,
            assigned=c.assigned,
            pending_revocation=c.pending_revocation,
        )
