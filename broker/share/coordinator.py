"""The share coordinator: share partitions, share sessions, ShareFetch and ShareAcknowledge.

One object per broker (``broker.share_groups``), on the event loop thread. Membership is
``groups.ShareGroups``; each (group, topic id, partition) has a ``partition.SharePartition``,
created when the partition is first assigned to the group (or first fetched), its start offset
chosen by the group's ``share.auto.offset.reset`` (latest: the HW; earliest: the log start),
or restored from ``__share_group_state`` at start-up. Log reads run in a worker thread
(``reader.read_batches``); the state changes run on the loop, so two fetches never acquire
the same record. After every acknowledgement, release or lock expiry the changed partitions'
state is written (``persister``) before the answer goes out.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from tidelog.broker.share.groups import ShareGroups
from tidelog.broker.share.partition import AcquiredRange, SharePartition
from tidelog.broker.share.reader import LogRead, read_batches
from tidelog.broker.share.sessions import ShareSession, ShareSessions

if TYPE_CHECKING:
    from tidelog.broker.handlers.base import BrokerView

__all__ = ("AckBatch", "FetchedPartition", "PartitionKey", "ShareCoordinator")

PartitionKey = tuple[str, uuid.UUID, int]
TopicIdPartition = tuple[uuid.UUID, int]


@dataclass(frozen=True, slots=True)
class AckBatch:
    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]


@dataclass(slots=True)
class FetchedPartition:
    topic_id: uuid.UUID
    partition: int
    error: ErrorCode = ErrorCode.none
    ack_error: ErrorCode | None = None
    records: bytes = b""
    acquired: list[AcquiredRange] = field(default_factory=list)


class ShareCoordinator:
    def __init__(
        self,
        broker: BrokerView,
        groups: ShareGroups,
        now_ms: Callable[[], int],
        write_state: Callable[
            [Sequence[tuple[PartitionKey, SharePartition | None]]], Awaitable[None]
        ],
    ) -> None:
        self.broker = broker
        self.groups = groups
        self.now_ms = now_ms
        self.write_state = write_state
        self.partitions: dict[PartitionKey, SharePartition] = {}
        self.sessions = ShareSessions(broker.config.get_int("group.share.max.share.sessions"))

    # -- configuration -------------------------------------------------------------------------
    def _group_config(self, group_id: str) -> dict[str, int | str]:
        return self.broker.dynamic_configs.group_config(group_id)

    def lock_duration_ms(self, group_id: str) -> int:
        return int(self._group_config(group_id)["share.record.lock.duration.ms"])

    # -- share partitions ----------------------------------------------------------------------
    def share_partition(
        self, group_id: str, topic_id: uuid.UUID, partition: int
    ) -> SharePartition | None:
        """The share partition, created (start offset per share.auto.offset.reset) on first
        use; None when the topic partition does not exist."""
        key = (group_id, topic_id, partition)
        found = self.partitions.get(key)
        if found is not None:
            return found
        info = self.broker.topics.by_id(topic_id)
        if info is None:
            return None
        log = self.broker.topics.get_log(info.name, partition)
        if log is None:
            return None
        config = self._group_config(group_id)
        earliest = str(config["share.auto.offset.reset"]).lower() == "earliest"
        start = log.log_start_offset if earliest else log.high_watermark
        created = self.new_share_partition(group_id, start, 0)
        self.partitions[key] = created
        return created

    def new_share_partition(
        self, group_id: str, start_offset: int, state_epoch: int
    ) -> SharePartition:
        config = self._group_config(group_id)
        return SharePartition(
            start_offset,
            delivery_count_limit=int(config["share.delivery.count.limit"]),
            max_in_flight=self.broker.config.get_int("group.share.partition.max.record.locks"),
            state_epoch=state_epoch,
        )

    def on_assigned(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        self.share_partition(group_id, topic_id, partition)

    def on_member_gone(self, group_id: str, member_id: str) -> None:
        session = self.sessions.close(group_id, member_id)
        self._release(group_id, member_id, None if session is None else session.partitions)

    def connection_closed(self, host: str, port: int) -> None:
        """A client connection closed: the share sessions last used on it end."""
        for session in self.sessions.on_connection(host, port):
            self.sessions.close(session.group_id, session.member_id)
            self._release(session.group_id, session.member_id, list(session.partitions))

    def on_member_gone_session(
        self, group_id: str, member_id: str, partitions: Iterable[TopicIdPartition]
    ) -> None:
        """A share session closed: the member's acquired records of it are released."""
        self._release(group_id, member_id, list(partitions))

    def _release(
        self, group_id: str, member_id: str, only: Iterable[TopicIdPartition] | None
    ) -> None:
        changed = []
        wanted = None if only is None else set(only)
        for (g, tid, p), sp in self.partitions.items():
            if g != group_id or (wanted is not None and (tid, p) not in wanted):
                continue
            if sp.release_member(member_id):
                changed.append(((g, tid, p), sp))
                self._wake(tid, p)
        if changed:
            self.broker.spawn(self.write_state(changed))

    def _wake(self, topic_id: uuid.UUID, partition: int) -> None:
        info = self.broker.topics.by_id(topic_id)
        if info is not None:
            self.broker.partitions.notify(info.name, partition)

    def expire_locks(
        self, keys: Iterable[PartitionKey]
    ) -> list[tuple[PartitionKey, SharePartition]]:
        now = self.now_ms()
        changed = []
        for key in keys:
            sp = self.partitions.get(key)
            if sp is not None and sp.expire_locks(now):
                changed.append((key, sp))
        return changed

    # -- acknowledgements ----------------------------------------------------------------------
    def acknowledge(
        self,
        group_id: str,
        member_id: str,
        topic_id: uuid.UUID,
        partition: int,
        batches: Sequence[AckBatch],
        changed: dict[PartitionKey, SharePartition],
    ) -> ErrorCode:
        key = (group_id, topic_id, partition)
        sp = self.partitions.get(key)
        if sp is None:
            if self.broker.topics.by_id(topic_id) is None:
                return ErrorCode.unknown_topic_id
            return ErrorCode.invalid_record_state
        now = self.now_ms()
        sp.expire_locks(now)
        lock_ms = self.lock_duration_ms(group_id)
        error = ErrorCode.none
        for b in batches:
            code = sp.acknowledge(
                member_id, b.first_offset, b.last_offset, b.acknowledge_types, now, lock_ms
            )
            if code is not ErrorCode.none:
                error = code
        changed[key] = sp
        self._wake(topic_id, partition)
        return error

    async def persist(self, changed: dict[PartitionKey, SharePartition]) -> None:
        if changed:
            await self.write_state(list(changed.items()))

    # -- fetching ------------------------------------------------------------------------------
    async def fetch(
        self,
        session: ShareSession,
        max_records: int,
        max_bytes: int,
        max_wait_ms: int,
    ) -> list[FetchedPartition]:
        """Acquire records for the session's member from its partitions, waiting up to
        ``max_wait_ms`` for any (new data, a release or a lock expiry wakes the wait)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait_ms / 1000.0
        while True:
            out = await self._fetch_once(session, max_records, max_bytes)
            remaining = deadline - loop.time()
            if any(f.acquired or f.error is not ErrorCode.none for f in out) or remaining <= 0:
                return out
            if self.broker.stopping:
                return out
            wait_s = remaining
            next_lock = self._next_lock_deadline_ms(session)
            if next_lock is not None:
                wait_s = min(wait_s, max(next_lock - self.now_ms(), 0) / 1000.0 + 0.001)
            names = []
            for tid, p in session.partitions:
                info = self.broker.topics.by_id(tid)
                if info is not None:
                    names.append((info.name, p))
            await self.broker.partitions.wait_any(names, wait_s)

    def _next_lock_deadline_ms(self, session: ShareSession) -> int | None:
        deadlines = []
        for tid, p in session.partitions:
            sp = self.partitions.get((session.group_id, tid, p))
            if sp is not None:
                d = sp.next_lock_deadline_ms()
                if d is not None:
                    deadlines.append(d)
        return min(deadlines) if deadlines else None

    async def _fetch_once(
        self, session: ShareSession, max_records: int, max_bytes: int
    ) -> list[FetchedPartition]:
        group_id = session.group_id
        config = self._group_config(group_id)
        read_committed = str(config["share.isolation.level"]) == "read_committed"
        lock_ms = int(config["share.record.lock.duration.ms"])
        out: list[FetchedPartition] = []
        expired: dict[PartitionKey, SharePartition] = {}
        budget_records = max_records
        budget_bytes = max_bytes
        for tid, p in list(session.partitions):
            result = FetchedPartition(tid, p)
            out.append(result)
            info = self.broker.topics.by_id(tid)
            if info is None:
                result.error = ErrorCode.unknown_topic_id
                continue
            log = self.broker.topics.get_log(info.name, p)
            sp = self.share_partition(group_id, tid, p)
            if log is None or sp is None:
                result.error = ErrorCode.unknown_topic_or_partition
                continue
            if budget_records <= 0 or budget_bytes <= 0:
                continue
            key = (group_id, tid, p)
            # Kafka divergence: Kafka runs a timer per acquisition lock; tidelog expires locks
            # when the partition is next fetched or acknowledged (a waiting fetch wakes at the
            # next lock deadline), so an expired record is available to the next fetch either way.
            if sp.expire_locks(self.now_ms()):
                expired[key] = sp
            sp.move_start_to(log.log_start_offset)
            offset = sp.next_fetch_offset()
            bound = log.last_stable_offset if read_committed else log.high_watermark
            if offset is None or offset >= bound:
                continue
            read: LogRead = await self.broker.run_blocking(
                read_batches, log, offset, budget_bytes, read_committed
            )
            if not read.batches:
                continue
            ranges, sent = sp.acquire(
                session.member_id,
                [b for b, _pos, _size in read.batches],
                budget_records,
                self.now_ms(),
                lock_ms,
            )
            if any(b.skip for b, _pos, _size in read.batches):
                expired[key] = sp  # archived control / aborted records are state too
            if ranges:
                result.acquired = ranges
                result.records = read.records_of(sent)
                budget_records -= sum(r.last_offset - r.first_offset + 1 for r in ranges)
                budget_bytes -= len(result.records)
        if expired:
            await self.write_state(list(expired.items()))
        return out

    # -- admin ---------------------------------------------------------------------------------
    def group_partitions(self, group_id: str) -> dict[TopicIdPartition, SharePartition]:
        return {(tid, p): sp for (g, tid, p), sp in self.partitions.items() if g == group_id}

    def metric_totals(self) -> dict[str, Any]:
        totals: dict[str, dict[str, int]] = {}
        for (g, _tid, _p), sp in self.partitions.items():
            t = totals.setdefault(
                g,
                {
                    "acquired": 0,
                    "redelivered": 0,
                    "archived": 0,
                    "accept": 0,
                    "release": 0,
                    "reject": 0,
                    "in_flight_locks": 0,
                },
            )
            t["acquired"] += sp.acquired_total
            t["redelivered"] += sp.redelivered_total
            t["archived"] += sp.archived_total
            for kind, n in sp.acknowledged_total.items():
                t[kind] += n
            t["in_flight_locks"] += sp.acquired_count()
        return totals
