"""One share partition: the in-flight records of a (share group, topic partition).

As Kafka's ``SharePartition``: records between the share-partition start offset (SPSO) and the
end offset (SPEO, the next offset never acquired) are in flight, each AVAILABLE, ACQUIRED (by
one member, under an acquisition lock with a deadline), ACKNOWLEDGED or ARCHIVED; records below
the start offset are done, records from the end offset on were never delivered. Acquiring a
record counts a delivery; a release or a lock timeout makes it AVAILABLE again unless its
delivery count reached ``group.share.delivery.count.limit`` (then it is ARCHIVED). The start
offset moves past every leading ACKNOWLEDGED/ARCHIVED record.

Pure state: time comes in as ``now_ms`` arguments (the caller's clock), nothing blocks, nothing
is written; the persister (``broker/share/persister.py``) writes ``snapshot()``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum

from kio.schema.errors import ErrorCode

__all__ = (
    "AcknowledgeType",
    "AcquiredRange",
    "InFlightRecord",
    "RecordState",
    "SharePartition",
    "StateBatch",
)


class RecordState(IntEnum):
    """Kafka's ``RecordState`` ids (also the ``DeliveryState`` of ``__share_group_state``)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


@dataclass(slots=True)
class InFlightRecord:
    """Mutable on purpose: one per in-flight offset, changed in place on every transition."""

    state: RecordState
    delivery_count: int
    member_id: str | None = None
    lock_deadline_ms: int = 0


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A run of offsets with one state and delivery count (``ShareSnapshotValue.StateBatches``)."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class Batch:
    """A log batch's offsets as the reader found them: ``skip`` ones are archived, never sent
    (control batches; aborted transactional data under read_committed)."""

    base_offset: int
    last_offset: int
    skip: bool = False


class SharePartition:
    def __init__(
        self,
        start_offset: int,
        *,
        delivery_count_limit: int,
        max_in_flight: int,
        state_epoch: int = 0,
    ) -> None:
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.delivery_count_limit = delivery_count_limit
        self.max_in_flight = max_in_flight
        self.state_epoch = state_epoch
        self.records: dict[int, InFlightRecord] = {}
        #: Counters for metrics (records acquired, acknowledged by type, redelivered, archived).
        self.acquired_total = 0
        self.redelivered_total = 0
        self.archived_total = 0
        self.acknowledged_total: dict[str, int] = {"accept": 0, "release": 0, "reject": 0}

    # -- reading -------------------------------------------------------------------------------
    def acquired_count(self) -> int:
        return sum(1 for r in self.records.values() if r.state is RecordState.ACQUIRED)

    def first_available(self) -> int | None:
        """The lowest in-flight AVAILABLE offset (to re-deliver), else None."""
        for offset in range(self.start_offset, self.end_offset):
            record = self.records.get(offset)
            if record is not None and record.state is RecordState.AVAILABLE:
                return offset
        return None

    def next_fetch_offset(self) -> int | None:
        """Where the next acquisition reads from: an AVAILABLE in-flight record, else the end
        offset when the in-flight window has room, else None (``max_in_flight`` reached)."""
        offset = self.first_available()
        if offset is not None:
            return offset
        if self.end_offset - self.start_offset >= self.max_in_flight:
            return None
        return self.end_offset

    def next_lock_deadline_ms(self) -> int | None:
        deadlines = [
            r.lock_deadline_ms for r in self.records.values() if r.state is RecordState.ACQUIRED
        ]
        return min(deadlines) if deadlines else None

    # -- transitions ---------------------------------------------------------------------------
    def move_start_to(self, log_start_offset: int) -> None:
        """Records below the log start offset are gone (retention, DeleteRecords)."""
        if log_start_offset <= self.start_offset:
            return
        for offset in range(self.start_offset, min(log_start_offset, self.end_offset)):
            self.records.pop(offset, None)
        self.start_offset = log_start_offset
        self.end_offset = max(self.end_offset, log_start_offset)

    def acquire(
        self,
        member_id: str,
        batches: Sequence[Batch],
        max_records: int,
        now_ms: int,
        lock_duration_ms: int,
        record_limit: bool = False,
    ) -> tuple[list[AcquiredRange], list[Batch]]:
        """Acquire AVAILABLE and new records of ``batches`` (read from the log in offset order)
        for ``member_id``. By default (``share.acquire.mode=batch_optimized``) it stops after
        the batch that reaches ``max_records`` (it may exceed it to keep batches whole); with
        ``record_limit`` (KIP-1206) it acquires at most ``max_records`` records, the last batch
        sent whole but acquired only in part. Returns the acquired ranges and the batches to
        send."""
        deadline = now_ms + lock_duration_ms
        ranges: list[AcquiredRange] = []
        taken = 0
        sent: list[Batch] = []
        records = self.records
        for batch in batches:
            if batch.last_offset < self.start_offset:
                continue
            first = max(batch.base_offset, self.start_offset)
            if first == self.end_offset and not batch.skip:
                # The common case: records never delivered, right after the in-flight ones.
                room = self.max_in_flight - (self.end_offset - self.start_offset)
                if record_limit:
                    room = min(room, max_records - taken)
                last = min(batch.last_offset, first + room - 1)
                if last < first:
                    break
                for offset in range(first, last + 1):
                    records[offset] = InFlightRecord(RecordState.ACQUIRED, 1, member_id, deadline)
                self.end_offset = last + 1
                _add_range(ranges, first, last, 1)
                taken += last - first + 1
                sent.append(batch)
                if taken >= max_records:
                    break
                continue
            took = False
            for offset in range(first, batch.last_offset + 1):
                if record_limit and taken >= max_records:
                    break
                if offset >= self.end_offset:
                    if self.end_offset - self.start_offset >= self.max_in_flight:
                        break
                    if offset > self.end_offset:  # a hole in the log (compaction): archived
                        for hole in range(self.end_offset, offset):
                            records[hole] = InFlightRecord(RecordState.ARCHIVED, 0)
                    records[offset] = InFlightRecord(RecordState.AVAILABLE, 0)
                    self.end_offset = offset + 1
                record = records.get(offset)
                if record is None or record.state is not RecordState.AVAILABLE:
                    continue
                if batch.skip:
                    record.state = RecordState.ARCHIVED
                    self.archived_total += 1
                    continue
                record.state = RecordState.ACQUIRED
                record.member_id = member_id
                record.lock_deadline_ms = deadline
                record.delivery_count += 1
                if record.delivery_count > 1:
                    self.redelivered_total += 1
                _add_range(ranges, offset, offset, record.delivery_count)
                taken += 1
                took = True
            if took:
                sent.append(batch)
            if taken >= max_records:
                break
        self.acquired_total += taken
        self._advance_start()
        return ranges, sent

    def acknowledge(
        self,
        member_id: str,
        first_offset: int,
        last_offset: int,
        types: Sequence[int],
        now_ms: int,
        lock_duration_ms: int,
        renew_enabled: bool = True,
    ) -> ErrorCode:
        """Apply one acknowledgement batch (all or nothing, as Kafka validates it first).
        RENEW (KIP-1222) restarts the acquisition lock of records the member holds; with the
        group's ``share.renew.acknowledge.enable=false`` it is INVALID_RECORD_STATE, as Kafka."""
        if last_offset < first_offset or not types:
            return ErrorCode.invalid_request
        span = last_offset - first_offset + 1
        if len(types) != 1 and len(types) != span:
            return ErrorCode.invalid_request
        if any(t not in _ACK_TYPES for t in types):
            return ErrorCode.invalid_request
        if not renew_enabled and AcknowledgeType.RENEW in types:
            return ErrorCode.invalid_record_state
        for offset in range(first_offset, last_offset + 1):
            record = self.records.get(offset)
            if (
                record is None
                or record.state is not RecordState.ACQUIRED
                or record.member_id != member_id
            ):
                return ErrorCode.invalid_record_state
        kinds = [_KINDS[t] for t in types]
        for i, offset in enumerate(range(first_offset, last_offset + 1)):
            kind = kinds[0] if len(kinds) == 1 else kinds[i]
            record = self.records[offset]
            if kind is AcknowledgeType.RENEW:
                record.lock_deadline_ms = now_ms + lock_duration_ms
                continue
            if kind is AcknowledgeType.ACCEPT:
                self.acknowledged_total["accept"] += 1
                record.state = RecordState.ACKNOWLEDGED
            elif kind is AcknowledgeType.RELEASE:
                self.acknowledged_total["release"] += 1
                self._release(record)
                continue
            else:  # REJECT, and GAP (an offset with no record)
                if kind is AcknowledgeType.REJECT:
                    self.acknowledged_total["reject"] += 1
                record.state = RecordState.ARCHIVED
                self.archived_total += 1
            record.member_id = None
        self._advance_start()
        return ErrorCode.none

    def expire_locks(self, now_ms: int) -> int:
        """Acquisition locks past their deadline release their records; returns how many."""
        expired = 0
        for record in self.records.values():
            if record.state is RecordState.ACQUIRED and record.lock_deadline_ms <= now_ms:
                self._release(record)
                expired += 1
        if expired:
            self._advance_start()
        return expired

    def release_member(self, member_id: str) -> int:
        """A member left (or its share session closed): its records become available."""
        released = 0
        for record in self.records.values():
            if record.state is RecordState.ACQUIRED and record.member_id == member_id:
                self._release(record)
                released += 1
        if released:
            self._advance_start()
        return released

    def _release(self, record: InFlightRecord) -> None:
        record.member_id = None
        record.lock_deadline_ms = 0
        if record.delivery_count >= self.delivery_count_limit:
            record.state = RecordState.ARCHIVED
            self.archived_total += 1
        else:
            record.state = RecordState.AVAILABLE

    def _advance_start(self) -> None:
        offset = self.start_offset
        records = self.records
        while offset < self.end_offset:
            record = records.get(offset)
            if record is None or record.state not in _DONE:
                break
            del records[offset]
            offset += 1
        self.start_offset = offset

    # -- persistence ---------------------------------------------------------------------------
    def snapshot(self) -> list[StateBatch]:
        """The in-flight records as runs of one state and delivery count; ACQUIRED ones are
        written as AVAILABLE (a restart makes them deliverable again, as in Kafka)."""
        out: list[StateBatch] = []
        for offset in range(self.start_offset, self.end_offset):
            record = self.records.get(offset)
            if record is None:
                continue
            state = RecordState.AVAILABLE if record.state is RecordState.ACQUIRED else record.state
            last = out[-1] if out else None
            if (
                last is not None
                and last.last_offset == offset - 1
                and last.delivery_state == state
                and last.delivery_count == record.delivery_count
            ):
                out[-1] = StateBatch(last.first_offset, offset, state, record.delivery_count)
            else:
                out.append(StateBatch(offset, offset, state, record.delivery_count))
        return out

    def restore(self, start_offset: int, batches: Iterable[StateBatch]) -> None:
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.records.clear()
        for b in batches:
            for offset in range(max(b.first_offset, start_offset), b.last_offset + 1):
                state = RecordState(b.delivery_state)
                if state is RecordState.ACQUIRED:
                    state = RecordState.AVAILABLE
                self.records[offset] = InFlightRecord(state, b.delivery_count)
                self.end_offset = max(self.end_offset, offset + 1)
        for offset in range(self.start_offset, self.end_offset):
            self.records.setdefault(offset, InFlightRecord(RecordState.AVAILABLE, 0))
        self._advance_start()


_DONE = frozenset({RecordState.ACKNOWLEDGED, RecordState.ARCHIVED})
_ACK_TYPES = frozenset(int(t) for t in AcknowledgeType)
_KINDS = {int(t): t for t in AcknowledgeType}


def _add_range(ranges: list[AcquiredRange], first: int, last: int, count: int) -> None:
    """Append [first, last] with ``count``, merged into the previous range when adjacent."""
    if ranges and ranges[-1].last_offset == first - 1 and ranges[-1].delivery_count == count:
        ranges[-1] = AcquiredRange(ranges[-1].first_offset, last, count)
    else:
        ranges.append(AcquiredRange(first, last, count))
