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
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from kio.schema.errors import ErrorCode

from tidelog.broker.share.groups import ShareGroups
from tidelog.broker.share.offset_reset import parse_auto_offset_reset
from tidelog.broker.share.partition import AcquiredRange, SharePartition
from tidelog.broker.share.reader import LogRead, read_batches
from tidelog.broker.share.sessions import ShareSession, ShareSessions

if TYPE_CHECKING:
    from tidelog.broker.dynamic_configs import DynamicConfigs
    from tidelog.broker.purgatory import HighWatermarkWaiters
    from tidelog.broker.topics import Topics
    from tidelog.config import BrokerConfig
    from tidelog.storage import PartitionLog

__all__ = ("AckBatch", "FetchedPartition", "PartitionKey", "ShareCoordinator", "ShareHost")

T = TypeVar("T")

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


class ShareHost(Protocol):
    """What the share coordinator uses of the broker (``broker.app.Broker`` implements it)."""

    config: BrokerConfig
    topics: Topics
    #: HW waiters: a share fetch's long poll, woken by a release or a lock expiry
    partitions: HighWatermarkWaiters
    dynamic_configs: DynamicConfigs

    @property
    def stopping(self) -> bool: ...

    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T: ...

    def spawn(self, coro: Any) -> Any: ...


class ShareCoordinator:
    def __init__(
        self,
        broker: ShareHost,
        groups: ShareGroups,
        now_ms: Callable[[], int],
        write_state: Callable[
            [Sequence[tuple[PartitionKey, SharePartition | None]]], Awaitable[None]
        ],
        *,
        schedule: Callable[[str, int, Callable[[], None]], None] | None = None,
        cancel: Callable[[str], None] | None = None,
    ) -> None:
        self.broker = broker
        self.groups = groups
        self.now_ms = now_ms
        self.write_state = write_state
        #: keyed timers (the group coordinator's) for the acquisition locks; None: no timers
        self.schedule = schedule
        self.cancel = cancel
        #: the lock deadline each share partition's timer is armed for
        self.lock_timers: dict[PartitionKey, int] = {}
        #: share partitions fetched from since this broker started (see ``_fetch_once``)
        self.fetch_ready: set[PartitionKey] = set()
        #: share partitions whose initial state is being written (not assigned yet)
        self.initializing: set[PartitionKey] = set()
        self.partitions: dict[PartitionKey, SharePartition] = {}
        self.sessions = ShareSessions(broker.config.get_int("group.share.max.share.sessions"))

    # -- configuration -------------------------------------------------------------------------
    def _group_config(self, group_id: str) -> dict[str, int | str]:
        return self.broker.dynamic_configs.group_config(group_id)

    def lock_duration_ms(self, group_id: str) -> int:
        return int(self._group_config(group_id)["share.record.lock.duration.ms"])

    # -- share partitions ----------------------------------------------------------------------
    async def start_offset(self, group_id: str, log: PartitionLog) -> int:
        """Where a new share partition of the group starts (``share.auto.offset.reset``)."""
        config = self._group_config(group_id)
        reset = parse_auto_offset_reset(str(config["share.auto.offset.reset"]))
        if reset is not None and reset.strategy == "earliest":
            return log.log_start_offset
        if reset is not None and reset.strategy == "by_duration":
            since_ms = self.now_ms() - reset.duration_ms
            found = await self.broker.run_blocking(log.offset_for_timestamp, since_ms)
            if found is not None and found[0] < log.high_watermark:
                return max(found[0], log.log_start_offset)
        return log.high_watermark

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
        """Initialize the share state of a subscribed partition (Kafka's
        InitializeShareGroupState): the share partition is made (start offset per
        ``share.auto.offset.reset``) and written to ``__share_group_state``; then the group
        assigns it. Runs in the background; a fetch of it meanwhile finds no records."""
        key = (group_id, topic_id, partition)
        if key in self.partitions or key in self.initializing:
            return
        self.initializing.add(key)
        self.broker.spawn(self._initialize(key))

    async def _initialize(self, key: PartitionKey) -> None:
        group_id, topic_id, partition = key
        try:
            info = self.broker.topics.by_id(topic_id)
            log = None if info is None else self.broker.topics.get_log(info.name, partition)
            if log is None:
                return
            start = await self.start_offset(group_id, log)
            if key in self.partitions:  # made meanwhile (AlterShareGroupOffsets)
                return
            sp = self.new_share_partition(group_id, start, 0)
            self.partitions[key] = sp
            await self.write_state([(key, sp)])
        finally:
            self.initializing.discard(key)
        self.groups.partitions_initialized(group_id)
        self._wake(topic_id, partition)

    def initialized(self, group_id: str, topic_id: uuid.UUID, partition: int) -> bool:
        key = (group_id, topic_id, partition)
        return key in self.partitions and key not in self.initializing

    def on_member_gone(self, group_id: str, member_id: str) -> None:
        """A member left the group (or its heartbeats stopped). As Kafka, its share session
        lives on until ShareFetch/ShareAcknowledge epoch -1 or the close of its connection: a
        closing consumer sends its leave heartbeat and its last acknowledgements at the same
        time, and those must still find the records acquired. Without a session nothing of the
        member's can still be acknowledged, so its records are released now."""
        if (group_id, member_id) not in self.sessions.sessions:
            self._release(group_id, member_id, None)

    def on_topic_deleted(self, topic_id: uuid.UUID) -> None:
        """A topic was deleted: its share partitions go, with their ``__share_group_state``
        entries (acknowledgements of their records answer UNKNOWN_TOPIC_ID, as in Kafka)."""
        gone = [key for key in self.partitions if key[1] == topic_id]
        for key in gone:
            self.drop_partition(key)
        for session in self.sessions.sessions.values():
            for tp in [tp for tp in session.partitions if tp[0] == topic_id]:
                del session.partitions[tp]
        if gone:
            self.broker.spawn(self.write_state([(key, None) for key in gone]))

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
                self.arm_lock_timer((g, tid, p), sp)
        if changed:
            self.broker.spawn(self.write_state(changed))

    def drop_partition(self, key: PartitionKey) -> None:
        """Forget a share partition (deleted topic, group or offsets); the caller writes its
        tombstone."""
        self.partitions.pop(key, None)
        self.fetch_ready.discard(key)
        self.cancel_lock_timer(key)

    # -- acquisition-lock timers ---------------------------------------------------------------
    def arm_lock_timer(self, key: PartitionKey, sp: SharePartition) -> None:
        """Arm (or move) the partition's timer to its earliest acquisition-lock deadline, so a
        record whose lock runs out is released on time even when no request comes (as Kafka's
        per-lock timer tasks)."""
        if self.schedule is None:
            return
        deadline = sp.next_lock_deadline_ms()
        if deadline is None:
            self.cancel_lock_timer(key)
            return
        if self.lock_timers.get(key) == deadline:
            return
        self.lock_timers[key] = deadline
        self.schedule(
            _lock_timer_key(key), max(deadline - self.now_ms(), 0), self._lock_timer_fired(key)
        )

    def cancel_lock_timer(self, key: PartitionKey) -> None:
        if self.lock_timers.pop(key, None) is not None and self.cancel is not None:
            self.cancel(_lock_timer_key(key))

    def _lock_timer_fired(self, key: PartitionKey) -> Callable[[], None]:
        def fire() -> None:
            self.lock_timers.pop(key, None)
            sp = self.partitions.get(key)
            if sp is None:
                return
            if sp.expire_locks(self.now_ms()):
                self._wake(key[1], key[2])
                self.broker.spawn(self.write_state([(key, sp)]))
            self.arm_lock_timer(key, sp)

        return fire

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
        config = self._group_config(group_id)
        lock_ms = int(config["share.record.lock.duration.ms"])
        renew_enabled = str(config["share.renew.acknowledge.enable"]).lower() == "true"
        error = ErrorCode.none
        for b in batches:
            code = sp.acknowledge(
                member_id,
                b.first_offset,
                b.last_offset,
                b.acknowledge_types,
                now,
                lock_ms,
                renew_enabled,
            )
            if code is not ErrorCode.none:
                error = code
        changed[key] = sp
        self._wake(topic_id, partition)
        self.arm_lock_timer(key, sp)
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
        record_limit: bool = False,
    ) -> list[FetchedPartition]:
        """Acquire records for the session's member from its partitions, waiting up to
        ``max_wait_ms`` for any (new data, a release or a lock expiry wakes the wait);
        ``record_limit``: ShareFetch v2's ``share.acquire.mode=record_limit`` (KIP-1206)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait_ms / 1000.0
        while True:
            out = await self._fetch_once(session, max_records, max_bytes, record_limit)
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
        self, session: ShareSession, max_records: int, max_bytes: int, record_limit: bool
    ) -> list[FetchedPartition]:
        group_id = session.group_id
        config = self._group_config(group_id)
        read_committed = str(config["share.isolation.level"]) == "read_committed"
        lock_ms = int(config["share.record.lock.duration.ms"])
        out: list[FetchedPartition] = []
        expired: dict[PartitionKey, SharePartition] = {}
        budget_records = max_records
        budget_bytes = max_bytes
        order = list(session.partitions)
        if order:
            # As Kafka's round-robin PartitionRotateStrategy: each fetch of a session starts
            # one partition further on, so the first partitions do not take every fetch.
            turn = (session.epoch - 1) % len(order)
            order = order[turn:] + order[:turn]
        acquired_any = False
        for tid, p in order:
            result = FetchedPartition(tid, p)
            out.append(result)
            info = self.broker.topics.by_id(tid)
            if info is None:
                result.error = ErrorCode.unknown_topic_id
                continue
            log = self.broker.topics.get_log(info.name, p)
            if log is None:
                result.error = ErrorCode.unknown_topic_or_partition
                continue
            key = (group_id, tid, p)
            if key not in self.fetch_ready:
                self.fetch_ready.add(key)
                if acquired_any:
                    # Kafka loads a share partition's state on its first fetch, asynchronously,
                    # and a share fetch completes as soon as one partition has records: the
                    # others join from the next fetch. tidelog's state is in memory already; it
                    # answers the same shape (one newly read partition's records per fetch).
                    continue
            sp = self.partitions.get(key)
            if sp is None or key in self.initializing:
                self.on_assigned(group_id, tid, p)  # its state first: records from a later fetch
                continue
            if budget_records <= 0 or budget_bytes <= 0:
                continue
            # the lock timers release expired records on time; a fetch that comes first (the
            # timer's callback may be queued behind it) does it too
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
                record_limit,
            )
            if any(b.skip for b, _pos, _size in read.batches):
                expired[key] = sp  # archived control / aborted records are state too
            if ranges:
                acquired_any = True
                self.arm_lock_timer(key, sp)
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


def _lock_timer_key(key: PartitionKey) -> str:
    return f"share-lock:{key[0]}:{key[1]}:{key[2]}"
