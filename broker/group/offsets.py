"""Committed offsets in memory, and the records that persist them.

The store is changed only by the offset manager's replay of ``__consumer_offsets`` records
(``OffsetMetadataManager.replay`` and ``replay_end_transaction_marker``, at start-up and once
the coordinator runtime has the records durable), so memory always equals a replay of the log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from tidelog.broker.coordinator.log import KeyValue
from tidelog.broker.group.results import CommitPartition
from tidelog.broker.group.state import ClassicGroup, GroupState
from tidelog.protocol.internal_topics.consumer_offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None
    #: The offset of the record in ``__consumer_offsets`` (Kafka's recordOffset): of a
    #: transactional commit and a plain one, the later record wins.
    record_offset: int = -1

    @staticmethod
    def from_record(value: OffsetCommitValue, record_offset: int = -1) -> CommittedOffset:
        """What an offset-commit record of ``__consumer_offsets`` says (expire -1: none)."""
        return CommittedOffset(
            value.offset,
            value.leader_epoch,
            value.metadata,
            value.commit_timestamp,
            value.expire_timestamp if value.expire_timestamp >= 0 else None,
            record_offset,
        )


class OffsetStore:
    """group -> (topic, partition) -> committed offset."""

    def __init__(self) -> None:
        self._by_group: dict[str, dict[TopicPartition, CommittedOffset]] = {}

    def get(self, group_id: str, topic: str, partition: int) -> CommittedOffset | None:
        return self._by_group.get(group_id, {}).get((topic, partition))

    def group(self, group_id: str) -> dict[TopicPartition, CommittedOffset]:
        return self._by_group.get(group_id, {})

    def group_ids(self) -> list[str]:
        return list(self._by_group)

    def put(self, group_id: str, topic: str, partition: int, value: CommittedOffset) -> None:
        self._by_group.setdefault(group_id, {})[(topic, partition)] = value

    def remove(self, group_id: str, topic: str, partition: int) -> bool:
        offsets = self._by_group.get(group_id)
        if offsets is None or offsets.pop((topic, partition), None) is None:
            return False
        if not offsets:
            del self._by_group[group_id]
        return True

    def remove_group(self, group_id: str) -> None:
        self._by_group.pop(group_id, None)

    def expired(
        self,
        group: ClassicGroup,
        now_ms: int,
        retention_ms: int,
    ) -> tuple[list[TopicPartition], bool]:
        """Offsets of ``group`` past retention, and whether that is all of them.

        Kafka's rule (KIP-211): an Empty group's offsets expire ``retention`` after the group
        became empty (or after their commit, when that time is unknown); a Stable consumer
        group's offsets of topics it no longer subscribes to expire ``retention`` after their
        commit; a group without a protocol (commits only) expires by commit time; an offset
        committed with an explicit retention (v2-v4) expires at its own expire time.
        """
        offsets = self._by_group.get(group.group_id)
        if not offsets:
            return [], True
        base: Callable[[CommittedOffset], int] | None
        if group.protocol_type:
            if group.is_empty:
                state_ts = group.state_timestamp_ms
                base = (lambda o: state_ts) if state_ts is not None else _commit_ts
            elif (
                group.uses_consumer_protocol()
                and group.subscribed_topics is not None
                and group.state is GroupState.STABLE
            ):
                base = _commit_ts
            else:
                base = None
        else:
            base = _commit_ts
        if base is None:
            return [], False
        expired: list[TopicPartition] = []
        all_expired = True
        for (topic, partition), o in offsets.items():
            if group.is_subscribed_to(topic):
                all_expired = False
                continue
            if o.expire_timestamp_ms is not None:
                is_expired = now_ms >= o.expire_timestamp_ms
            else:
                is_expired = now_ms - base(o) >= retention_ms
            if is_expired:
                expired.append((topic, partition))
            else:
                all_expired = False
        return expired, all_expired


def _commit_ts(o: CommittedOffset) -> int:
    return o.commit_timestamp_ms


# ---------------------------------------------------------------- records


def offset_commit_records(
    group_id: str, partitions: Iterable[CommitPartition], now_ms: int, expire_ms: int | None
) -> list[KeyValue]:
    """The ``__consumer_offsets`` records of committing ``partitions`` for ``group_id``."""
    expire = -1 if expire_ms is None else expire_ms
    return [
        (
            encode_offset_commit_key(OffsetCommitKey(group_id, p.topic, p.partition)),
            encode_offset_commit_value(
                OffsetCommitValue(p.offset, p.metadata or "", now_ms, p.leader_epoch, expire)
            ),
        )
        for p in partitions
    ]


def offset_tombstone(group_id: str, topic: str, partition: int) -> KeyValue:
    return (encode_offset_commit_key(OffsetCommitKey(group_id, topic, partition)), None)


def group_tombstone(group_id: str) -> KeyValue:
    return (encode_group_metadata_key(GroupMetadataKey(group_id)), None)


def group_metadata_record(group: ClassicGroup, assignment: dict[str, bytes]) -> KeyValue:
    """The group as Kafka stores it: members with their subscription (the metadata of the
    selected protocol) and their assignment."""
    members = tuple(
        MemberMetadata(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout_ms,
            m.session_timeout_ms,
            m.metadata(group.protocol_name),
            assignment.get(m.member_id, b""),
        )
        for m in group.members.values()
    )
    value = GroupMetadataValue(
        protocol_type=group.protocol_type or "",
        generation=group.generation_id,
        protocol=group.protocol_name,
        leader=group.leader_id,
        current_state_timestamp=(
            group.state_timestamp_ms if group.state_timestamp_ms is not None else -1
        ),
        members=members,
    )
    return (
        encode_group_metadata_key(GroupMetadataKey(group.group_id)),
        encode_group_metadata_value(value),
    )


def empty_group_metadata_record(group: ClassicGroup) -> KeyValue:
    value = GroupMetadataValue(
        protocol_type="",
        generation=0,
        protocol=None,
        leader=None,
        current_state_timestamp=(
            group.state_timestamp_ms if group.state_timestamp_ms is not None else -1
        ),
        members=(),
    )
    return (
        encode_group_metadata_key(GroupMetadataKey(group.group_id)),
        encode_group_metadata_value(value),
    )
