"""Committed offsets: Kafka's ``OffsetMetadataManager`` (classic, consumer and simple groups).

The one home of committed *and* pending transactional offsets. State changes only by replaying
``__consumer_offsets`` records (``replay``, ``replay_end_transaction_marker``): the coordinator
runtime (``broker/coordinator/runtime.py``) calls them once a write is durable, and the load at
start-up calls the same functions over the log, so live and loaded offsets cannot disagree.

OffsetCommit (``commit_offsets``): the commit is validated against the group
(``validate_offset_commit``, Kafka's ClassicGroup.validateOffsetCommit; a KIP-848 consumer group
validates its own), its partitions are checked (``check_partitions``: the partition exists, the
metadata fits ``offset.metadata.max.bytes``), the records are written to the group's
``__consumer_offsets`` partition and the answer waits until they are durable and replayed
(``offsets.commit.timeout.ms`` at most: REQUEST_TIMED_OUT, answered COORDINATOR_NOT_AVAILABLE
as Kafka normalizes it).

TxnOffsetCommit (``commit_transactional_offsets``): validated as Kafka's
GroupMetadataManager.validateTransactionalOffsetCommit does (classic group: member and
generation; consumer group: member id and member epoch), written as a *transactional* batch
carrying the producer id and epoch; its replay makes the offsets pending for that producer id
(``pending_transactional_offsets``). They become committed - or vanish - only by replaying the
transaction's marker: the transaction coordinator asks ``complete_transaction`` to write the
COMMIT/ABORT control record to the partition, and its replay (Kafka's
``replayEndTransactionMarker``) moves the producer's pending offsets into the committed ones
(where no later plain commit exists) or drops them. A restart replays the same records and
markers, so offsets pending at a crash are pending again and the marker written after it
commits them at once.

OffsetFetch (``fetch_offsets``): committed offsets only; with ``require_stable`` a partition
with a pending transactional offset answers UNSTABLE_OFFSET_COMMIT (the consumer retries until
the transaction ends), as Kafka does. OffsetDelete (``delete_offsets``), the tombstones of
deleted topics (``on_partitions_deleted``) and the periodic expiry (``expire_offsets``, every
``offsets.retention.check.interval.ms``: offsets past retention are tombstoned, an Empty group
left without offsets is dropped).

Threading: event loop only.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from tidelog.broker.coordinator.log import NO_PRODUCER_ID, CoordinatorLogError, KeyValue
from tidelog.broker.group.config import GroupConfig
from tidelog.broker.group.metadata_log import GroupMetadataLog
from tidelog.broker.group.offsets import (
    CommittedOffset,
    OffsetStore,
    TopicPartition,
    group_tombstone,
    offset_commit_records,
    offset_tombstone,
)
from tidelog.broker.group.rebalance import Rebalancer, append_error
from tidelog.broker.group.results import (
    CommitPartition,
    OffsetDeleteResult,
    OffsetFetchResult,
    PartitionError,
    PartitionOffset,
    TopicOffsets,
)
from tidelog.broker.group.state import ClassicGroup, GroupState
from tidelog.broker.group.timer import Timer
from tidelog.protocol.internal_topics.consumer_offsets import OffsetCommitKey, OffsetCommitValue

if TYPE_CHECKING:
    from tidelog.broker.group.consumer.coordinator import ConsumerGroups
    from tidelog.broker.group.streams.coordinator import StreamsGroups

__all__ = ("OffsetMetadataManager",)

log = logging.getLogger("tidelog.group")

_EXPIRE_KEY = "expire-offsets"
#: (group, topic, partition)
_Key = tuple[str, str, int]
_LIVE = (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE, GroupState.STABLE)


class OffsetMetadataManager:
    """The offset requests of the group coordinator (see the module). ``groups`` is the
    coordinator's dict, shared with its other parts; ``drop_group`` forgets a group (its
    timers, offsets and entry)."""

    def __init__(
        self,
        config: GroupConfig,
        groups: dict[str, ClassicGroup],
        store: OffsetStore,
        metadata_log: GroupMetadataLog,
        rebalancer: Rebalancer,
        timer: Timer,
        drop_group: Callable[[ClassicGroup], None],
        partition_exists: Callable[[str, int], bool] | None = None,
    ) -> None:
        self.config = config
        self.groups = groups
        self.store = store
        self.metadata_log = metadata_log
        self.rebalancer = rebalancer
        self.timer = timer
        self._drop_group = drop_group
        #: OffsetCommit answers UNKNOWN_TOPIC_OR_PARTITION where this says no.
        self.partition_exists = partition_exists
        #: KIP-848 consumer groups (``broker/group/consumer``), once installed.
        self.consumer_groups: ConsumerGroups | None = None
        #: KIP-1071 streams groups (``broker/group/streams``), once installed.
        self.streams_groups: StreamsGroups | None = None
        #: Kafka's pendingTransactionalOffsets: producer id -> the offsets its open
        #: transaction committed, replayed from its transactional batches.
        self.pending_transactional_offsets: dict[int, dict[_Key, CommittedOffset]] = {}

    # ------------------------------------------------------------ replay

    def replay(
        self,
        record_offset: int,
        producer_id: int,
        key: OffsetCommitKey,
        value: OffsetCommitValue | None,
    ) -> None:
        """Apply one offset-commit record (Kafka's OffsetMetadataManager.replay): a plain
        commit is committed at once, a transactional one pending for its producer; a
        tombstone removes the committed offset and any pending one of that partition."""
        group_id, topic, partition = key.group, key.topic, key.partition
        if value is None:
            self.store.remove(group_id, topic, partition)
            for pending in self.pending_transactional_offsets.values():
                pending.pop((group_id, topic, partition), None)
            return
        self._ensure_simple_group(group_id)
        committed = CommittedOffset.from_record(value, record_offset)
        if producer_id == NO_PRODUCER_ID:
            self.store.put(group_id, topic, partition, committed)
        else:
            pending = self.pending_transactional_offsets.setdefault(producer_id, {})
            pending[(group_id, topic, partition)] = committed

    def replay_end_transaction_marker(self, producer_id: int, commit: bool) -> None:
        """Kafka's replayEndTransactionMarker: COMMIT makes the producer's pending offsets
        committed (unless a later plain commit of the partition is there), ABORT drops them."""
        pending = self.pending_transactional_offsets.pop(producer_id, None)
        if not pending or not commit:
            return
        for (group_id, topic, partition), offset in pending.items():
            existing = self.store.get(group_id, topic, partition)
            if existing is None or offset.record_offset > existing.record_offset:
                self._ensure_simple_group(group_id)
                self.store.put(group_id, topic, partition, offset)

    def has_pending_transactional_offsets(self, group_id: str, topic: str, partition: int) -> bool:
        key = (group_id, topic, partition)
        return any(key in offsets for offsets in self.pending_transactional_offsets.values())

    def modern_group(self, group_id: str) -> ConsumerGroups | StreamsGroups | None:
        """The consumer (KIP-848) or streams (KIP-1071) groups that own ``group_id``, or None."""
        for groups in (self.consumer_groups, self.streams_groups):
            if groups is not None and groups.owns(group_id):
                return groups
        return None

    def _ensure_simple_group(self, group_id: str) -> None:
        """Kafka: offsets of a group nobody manages make a "simple" group (empty, classic,
        no protocol type); a consumer group's offsets stay the consumer group's."""
        if group_id in self.groups:
            return
        if self.modern_group(group_id) is not None:
            return
        self.groups[group_id] = ClassicGroup(group_id, self.metadata_log.now())

    def validate_offset_commit(
        self, group: ClassicGroup, member_id: str, instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        """Kafka's ClassicGroup.validateOffsetCommit."""
        if group.is_in(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        if generation_id < 0 and group.is_empty:
            return ErrorCode.none  # admin client or a consumer without group management
        if generation_id >= 0 or member_id or instance_id is not None:
            error = group.validate_member(member_id, instance_id)
            if error is not ErrorCode.none:
                return error
            if generation_id != group.generation_id:
                return ErrorCode.illegal_generation
        elif not group.is_empty:
            return ErrorCode.unknown_member_id
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def check_partitions(
        self,
        partitions: Sequence[CommitPartition],
        partition_exists: Callable[[str, int], bool] | None,
    ) -> tuple[dict[TopicPartition, ErrorCode], list[CommitPartition]]:
        """The partitions of a commit refused (UNKNOWN_TOPIC_OR_PARTITION where
        ``partition_exists`` says no, OFFSET_METADATA_TOO_LARGE) and those accepted, in order."""
        errors: dict[TopicPartition, ErrorCode] = {}
        accepted: list[CommitPartition] = []
        for p in partitions:
            if partition_exists is not None and not partition_exists(p.topic, p.partition):
                errors[(p.topic, p.partition)] = ErrorCode.unknown_topic_or_partition
            elif p.metadata is not None and len(p.metadata) > self.config.offset_metadata_max_bytes:
                errors[(p.topic, p.partition)] = ErrorCode.offset_metadata_too_large
            else:
                accepted.append(p)
        return errors, accepted

    async def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        partitions: Sequence[CommitPartition],
        *,
        group_instance_id: str | None = None,
        retention_ms: int = -1,
        api_version: int = 8,
    ) -> list[PartitionError]:
        def all_(error: ErrorCode) -> list[PartitionError]:
            return [PartitionError(p.topic, p.partition, error) for p in partitions]

        error = self.metadata_log.inactive_error()
        if error is not None:
            return all_(error)
        modern = self.modern_group(group_id)
        if modern is not None:
            error = modern.validate_offset_commit(group_id, member_id, generation_id, api_version)
            if error is not ErrorCode.none:
                return all_(error)
            return await self._commit_accepted(group_id, partitions, retention_ms)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return all_(
                    ErrorCode.group_id_not_found
                    if api_version >= 9
                    else ErrorCode.illegal_generation
                )
            group = ClassicGroup(
                group_id, self.metadata_log.now()
            )  # a "simple" group: commits only
            self.groups[group_id] = group
        error = self.validate_offset_commit(group, member_id, group_instance_id, generation_id)
        if error is not ErrorCode.none:
            return all_(error)
        member = group.members.get(member_id)
        if member is not None and group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            self.rebalancer.reschedule_heartbeat(group, member)
        return await self._commit_accepted(group_id, partitions, retention_ms)

    async def _commit_accepted(
        self, group_id: str, partitions: Sequence[CommitPartition], retention_ms: int
    ) -> list[PartitionError]:
        """Write the commits of a validated request (classic or consumer group)."""
        now = self.metadata_log.now()
        expire = now + retention_ms if retention_ms >= 0 else None
        errors, accepted = self.check_partitions(partitions, self.partition_exists)
        if accepted:
            records = offset_commit_records(group_id, accepted, now, expire)
            write_error = await self._write(group_id, records)
            for p in accepted:
                errors[(p.topic, p.partition)] = write_error or ErrorCode.none
        return [
            PartitionError(p.topic, p.partition, errors[(p.topic, p.partition)]) for p in partitions
        ]

    async def _write(
        self,
        group_id: str,
        records: Sequence[KeyValue],
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = -1,
    ) -> ErrorCode | None:
        """Write offset records; None once durable and replayed, else the error to answer."""
        try:
            waiter = self.metadata_log.write(
                group_id,
                records,
                replay=True,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
            )
        except CoordinatorLogError as e:
            return append_error(e.error)
        return await self.await_hw(group_id, waiter)

    async def await_hw(self, group_id: str, waiter: Awaitable[None]) -> ErrorCode | None:
        error = await self.metadata_log.wait(group_id, waiter)
        if error is None or error is ErrorCode.request_timed_out:
            return error  # the write timeout answers REQUEST_TIMED_OUT, as before
        return append_error(error)

    # ------------------------------------------------------------ TxnOffsetCommit

    def validate_transactional_offset_commit(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
    ) -> ErrorCode:
        """Kafka's validateTransactionalOffsetCommit.

        A consumer group checks the member and its epoch: UNKNOWN_MEMBER_ID, and
        ILLEGAL_GENERATION for another epoch (Kafka maps ConsumerGroup.validateOffsetCommit's
        STALE_MEMBER_EPOCH so for TxnOffsetCommit). A classic group checks its member and
        generation (ClassicGroup.validateOffsetCommit: UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
        ILLEGAL_GENERATION). An unknown group with a generation is ILLEGAL_GENERATION; without
        member and generation anything goes (a producer not in the group)."""
        modern = self.modern_group(group_id)
        if modern is not None:
            error: ErrorCode = modern.validate_transactional_offset_commit(
                group_id, member_id, generation_id
            )
            return error
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.illegal_generation if generation_id >= 0 else ErrorCode.none
        if generation_id < 0 and not member_id and group_instance_id is None:
            return ErrorCode.none
        return self.validate_offset_commit(group, member_id, group_instance_id, generation_id)

    async def commit_transactional_offsets(
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
        """TxnOffsetCommit: the offsets, written as a transactional batch of the producer, are
        pending until the transaction's marker is replayed (see the module)."""

        def all_(error: ErrorCode) -> list[PartitionError]:
            return [PartitionError(p.topic, p.partition, error) for p in partitions]

        error = self.metadata_log.inactive_error()
        if error is not None:
            return all_(error)
        error = self.validate_transactional_offset_commit(
            group_id, member_id, group_instance_id, generation_id
        )
        if error is not ErrorCode.none:
            return all_(error)
        now = self.metadata_log.now()
        errors, accepted = self.check_partitions(partitions, partition_exists)
        if accepted:
            records = offset_commit_records(group_id, accepted, now, None)
            write_error = await self._write(group_id, records, producer_id, producer_epoch)
            for p in accepted:
                errors[(p.topic, p.partition)] = write_error or ErrorCode.none
        return [
            PartitionError(p.topic, p.partition, errors[(p.topic, p.partition)]) for p in partitions
        ]

    # ------------------------------------------------------------ OffsetFetch

    def fetch_offsets(
        self,
        group_id: str,
        topics: Sequence[tuple[str, Sequence[int]]] | None,
        require_stable: bool = False,
    ) -> OffsetFetchResult:
        """Committed offsets of the partitions asked for (-1 where none), or of every
        partition the group has offsets for when ``topics`` is None; ``require_stable``:
        UNSTABLE_OFFSET_COMMIT where a transactional commit is pending."""
        result = self._fetch_committed(group_id, topics)
        if not require_stable or result.error is not ErrorCode.none:
            return result
        if not any(p for p in self.pending_transactional_offsets.values()):
            return result
        return OffsetFetchResult(
            result.error,
            tuple(
                TopicOffsets(
                    t.topic,
                    tuple(
                        PartitionOffset(p.partition, error=ErrorCode.unstable_offset_commit)
                        if self.has_pending_transactional_offsets(group_id, t.topic, p.partition)
                        else p
                        for p in t.partitions
                    ),
                )
                for t in result.topics
            ),
        )

    def _fetch_committed(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]] | None
    ) -> OffsetFetchResult:
        error = self.metadata_log.inactive_error()
        if error is not None:
            return OffsetFetchResult(error)
        group = self.groups.get(group_id)
        dead = group is None or group.is_in(GroupState.DEAD)
        if self.modern_group(group_id) is not None:
            dead = False
        if topics is None:
            if dead:
                return OffsetFetchResult(ErrorCode.none)
            by_topic: dict[str, list[PartitionOffset]] = {}
            for (topic, partition), o in sorted(self.store.group(group_id).items()):
                by_topic.setdefault(topic, []).append(
                    PartitionOffset(partition, o.offset, o.leader_epoch, o.metadata)
                )
            return OffsetFetchResult(
                ErrorCode.none,
                tuple(TopicOffsets(t, tuple(ps)) for t, ps in by_topic.items()),
            )
        out: list[TopicOffsets] = []
        for topic, partitions in topics:
            parts: list[PartitionOffset] = []
            for partition in partitions:
                c = None if dead else self.store.get(group_id, topic, partition)
                if c is None:
                    parts.append(PartitionOffset(partition))
                else:
                    parts.append(PartitionOffset(partition, c.offset, c.leader_epoch, c.metadata))
            out.append(TopicOffsets(topic, tuple(parts)))
        return OffsetFetchResult(ErrorCode.none, tuple(out))

    async def delete_offsets(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]]
    ) -> OffsetDeleteResult:
        error = self.metadata_log.inactive_error()
        if error is not None:
            return OffsetDeleteResult(error)
        if not group_id:
            return OffsetDeleteResult(ErrorCode.invalid_group_id)
        group = self.groups.get(group_id)
        consumer = self.modern_group(group_id)
        is_subscribed: Callable[[str], bool]
        if group is None and consumer is not None:
            is_subscribed = lambda topic: bool(consumer.is_subscribed(group_id, topic))  # noqa: E731
        elif group is None or group.is_in(GroupState.DEAD):
            return OffsetDeleteResult(ErrorCode.group_id_not_found)
        elif group.is_in(*_LIVE) and not group.uses_consumer_protocol():
            return OffsetDeleteResult(ErrorCode.non_empty_group)
        else:
            is_subscribed = group.is_subscribed_to
        results: list[PartitionError] = []
        doomed: list[tuple[str, int]] = []
        for topic, partitions in topics:
            subscribed = is_subscribed(topic)
            for partition in partitions:
                if subscribed:
                    results.append(
                        PartitionError(topic, partition, ErrorCode.group_subscribed_to_topic)
                    )
                    continue
                results.append(PartitionError(topic, partition, ErrorCode.none))
                if self.store.get(group_id, topic, partition) is not None:
                    doomed.append((topic, partition))
        if doomed:
            tombstones = [offset_tombstone(group_id, t, p) for t, p in doomed]
            write_error = await self._write(group_id, tombstones)
            if write_error is not None:
                return OffsetDeleteResult(write_error)
        return OffsetDeleteResult(ErrorCode.none, tuple(results))

    def on_partitions_deleted(self, partitions: Sequence[tuple[str, int]]) -> int:
        """Topics were deleted: tombstone every group's offsets of those partitions (Kafka's
        onPartitionsDeleted). Called by the DeleteTopics handler; returns the records written."""
        if self.metadata_log.status != "active":
            return 0
        doomed = set(partitions)
        written = 0
        for group_id in self.store.group_ids():
            tps = sorted(tp for tp in self.store.group(group_id) if tp in doomed)
            if not tps:
                continue
            try:
                waiter = self.metadata_log.write(
                    group_id, [offset_tombstone(group_id, t, p) for t, p in tps], replay=True
                )
            except CoordinatorLogError as e:
                log.warning("group %s: forgetting deleted partitions failed: %s", group_id, e)
                continue
            self.metadata_log.track(group_id, waiter, None)
            for t, p in tps:
                self.store.remove(group_id, t, p)
            written += len(tps)
        return written

    # ------------------------------------------------------------ expiry

    def schedule_expiration(self) -> None:
        self.timer.schedule(
            _EXPIRE_KEY,
            self.config.offsets_retention_check_interval_ms,
            self._run_expiration,
        )

    def _run_expiration(self) -> None:
        self.expire_offsets()

    def expire_offsets(self) -> int:
        """Tombstone offsets past retention; drop Empty groups left without offsets.
        Returns how many records were written. Runs every offsets.retention.check.interval.ms."""
        written = 0
        if self.metadata_log.status == "active":
            now = self.metadata_log.now()
            for group in list(self.groups.values()):
                expired, all_expired = self.store.expired(
                    group, now, self.config.offsets_retention_ms
                )
                records = [offset_tombstone(group.group_id, t, p) for t, p in expired]
                drop = all_expired and group.is_empty
                if drop:
                    records.append(group_tombstone(group.group_id))
                if not records:
                    continue
                try:
                    waiter = self.metadata_log.write(group.group_id, records, replay=True)
                except CoordinatorLogError as e:
                    log.warning("group %s: expiring offsets failed: %s", group.group_id, e)
                    continue
                self.metadata_log.track(group.group_id, waiter, None)
                written += len(records)
                for t, p in expired:
                    self.store.remove(group.group_id, t, p)
                if drop:
                    log.info("group %s: expired", group.group_id)
                    self._drop_group(group)
        self.schedule_expiration()
        return written
