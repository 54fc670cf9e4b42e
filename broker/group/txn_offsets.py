"""Transactional offset commits (TxnOffsetCommit): invisible until their transaction commits.

As Kafka's GroupMetadataManager does for a transactional producer: the offsets are appended to
the group's ``__consumer_offsets`` partition at once, as a *transactional* batch carrying the
producer id and epoch (records as an OffsetCommit writes them), and held as pending in
memory. OffsetFetch does not see them; with ``require_stable`` it answers
UNSTABLE_OFFSET_COMMIT for a partition that has one pending. When the transaction ends, the
transaction coordinator writes its marker to that partition and calls ``complete``: COMMIT
makes the pending offsets the group's committed offsets, ABORT drops them.

Replay at start-up (``resolve_transactional``, used by the group's log reader): records of
transactional batches are held per producer until that producer's marker; COMMIT releases
them into the replay at the marker's place, ABORT drops them, and what has no marker yet is
pending again (``stage_loaded``).

Hooks into the group coordinator: its offset store, its member validation
(``_validate_offset_commit``) and ``partition_for``; nothing else changes there.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from tidelog.broker.group.config import OFFSETS_TOPIC
from tidelog.broker.group.log import LogRecord
from tidelog.broker.group.offsets import CommittedOffset, offset_commit_records
from tidelog.broker.group.rebalance import append_error
from tidelog.broker.group.results import CommitPartition, PartitionError
from tidelog.broker.group.state import ClassicGroup
from tidelog.protocol.errors import error_code_for
from tidelog.protocol.internal_topics.consumer_offsets import (
    OffsetCommitKey,
    SchemaError,
    decode_key,
    decode_offset_commit_value,
)
from tidelog.storage import StorageError
from tidelog.storage.record_codec import DecodedBatch, NewRecord, encode_batch, iter_batches

if TYPE_CHECKING:
    from tidelog.broker.app import Broker
    from tidelog.broker.group.coordinator import GroupCoordinator

__all__ = ["TxnOffsets", "resolve_transactional"]

log = logging.getLogger("tidelog.group")

_Key = tuple[str, str, int]  # group, topic, partition


def resolve_transactional(
    data: bytes, start_offset: int, held: dict[int, list[LogRecord]], out: list[LogRecord]
) -> None:
    """Append the replayable records of ``data`` to ``out`` (see the module docstring)."""
    for batch in iter_batches(data):
        if not isinstance(batch, DecodedBatch):
            out.extend(LogRecord(r.offset, r.key, r.value) for r in batch.records)
            continue
        if batch.is_control:
            records = held.pop(batch.producer_id, [])
            if batch.records and batch.records[0].control_type == 1:
                out.extend(records)
            continue
        kept = [
            LogRecord(r.offset, r.key, r.value) for r in batch.records if r.offset >= start_offset
        ]
        if batch.is_transactional and batch.producer_id >= 0:
            held.setdefault(batch.producer_id, []).extend(kept)
        else:
            out.extend(kept)


class TxnOffsets:
    """Pending transactional offsets by producer id."""

    def __init__(self, broker: Broker, groups: GroupCoordinator) -> None:
        self._broker = broker
        self._groups = groups
        self._pending: dict[int, dict[_Key, CommittedOffset]] = {}

    def has_pending(self, group_id: str, topic: str, partition: int) -> bool:
        key = (group_id, topic, partition)
        return any(key in offsets for offsets in self._pending.values())

    def stage_loaded(self, held: dict[int, list[LogRecord]]) -> None:
        for producer_id, records in held.items():
            for record in records:
                if record.key is None or record.value is None:
                    continue
                try:
                    key = decode_key(record.key)
                    if not isinstance(key, OffsetCommitKey):
                        continue
                    value = decode_offset_commit_value(record.value)
                except SchemaError:
                    continue
                self._pending.setdefault(producer_id, {})[(key.group, key.topic, key.partition)] = (
                    CommittedOffset.from_record(value)
                )

    def complete(self, producer_id: int, commit: bool) -> None:
        """The producer's marker was written to ``__consumer_offsets``."""
        offsets = self._pending.pop(producer_id, {})
        if not commit:
            return
        for (group_id, topic, partition), value in offsets.items():
            self._groups.offsets.put(group_id, topic, partition, value)
            if group_id not in self._groups.groups:
                self._groups.groups[group_id] = ClassicGroup(group_id, self._broker.clock())

    async def commit(
        self,
        *,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        partitions: Sequence[CommitPartition],
        partition_exists: Callable[[str, int], bool],
    ) -> list[PartitionError]:
        groups = self._groups

        def all_(error: ErrorCode) -> list[PartitionError]:
            return [PartitionError(p.topic, p.partition, error) for p in partitions]

        error = groups.metadata_log.inactive_error()
        if error is not None:
            return all_(error)
        group = groups.groups.get(group_id)
        if group is not None and (generation_id >= 0 or member_id or group_instance_id):
            error = groups._validate_offset_commit(
                group, member_id, group_instance_id, generation_id
            )
            if error is not ErrorCode.none:
                return all_(error)
        now = self._broker.clock()
        errors: dict[tuple[str, int], ErrorCode] = {}
        accepted: list[CommitPartition] = []
        for p in partitions:
            if not partition_exists(p.topic, p.partition):
                errors[(p.topic, p.partition)] = ErrorCode.unknown_topic_or_partition
            elif (
                p.metadata is not None and len(p.metadata) > groups.config.offset_metadata_max_bytes
            ):
                errors[(p.topic, p.partition)] = ErrorCode.offset_metadata_too_large
            else:
                accepted.append(p)
        if accepted:
            write_error = await self._append(group_id, producer_id, producer_epoch, accepted, now)
            if write_error is None:
                pending = self._pending.setdefault(producer_id, {})
                for p in accepted:
                    pending[(group_id, p.topic, p.partition)] = CommittedOffset.from_commit(
                        p, now, None
                    )
            for p in accepted:
                errors[(p.topic, p.partition)] = write_error or ErrorCode.none
        return [
            PartitionError(p.topic, p.partition, errors[(p.topic, p.partition)]) for p in partitions
        ]

    async def _append(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[CommitPartition],
        now: int,
    ) -> ErrorCode | None:
        broker = self._broker
        partition = self._groups.partition_for(group_id)
        partition_log = broker.topics.get_log(OFFSETS_TOPIC, partition)
        if partition_log is None:
            return ErrorCode.coordinator_not_available
        records = offset_commit_records(group_id, partitions, now, None)
        batch = encode_batch(
            [NewRecord(key=k, value=v, timestamp=now) for k, v in records],
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=0,
            is_transactional=True,
        )
        hw_before = partition_log.high_watermark
        try:
            info = partition_log.append(batch, now_ms=now, from_coordinator=True)
        except StorageError as exc:
            return append_error(error_code_for(exc.error_name))
        broker.after_append(partition_log, hw_before)
        target = info.last_offset + 1
        timeout_s = self._groups.config.offsets_commit_timeout_ms / 1000
        try:
            covered = await broker.partitions.wait_until(
                (OFFSETS_TOPIC, partition),
                lambda: partition_log.high_watermark >= target,
                timeout_s,
            )
        except asyncio.CancelledError:
            raise
        return None if covered else ErrorCode.request_timed_out
