"""Where a coordinator keeps its records: the partitions of its internal topic.

``CoordinatorLog`` is what a coordinator runtime (``broker/coordinator/runtime.py``) needs from
storage. ``append`` writes one batch at once (so records land in the order the coordinator made
them) and returns an ``Appended``: the batch's first offset and an awaitable that resolves when
the high watermark covers it (or raises ``CoordinatorLogError``, REQUEST_TIMED_OUT after the
coordinator's write timeout); ``append_marker`` writes a transaction's COMMIT/ABORT control
record likewise; ``read_partition`` returns every record from the log start to the HW, markers
included (``LogRecord.marker``), for the replay at start-up.

``MemoryCoordinatorLog`` keeps real encoded v2 batches in memory, for tests;
``broker.coordinator.topic_log.InternalTopicLog`` adapts the broker's storage through the one
``PartitionWriter`` (``broker/coordinator/partition_writer.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from tidelog.storage.record_codec import (
    DecodedBatch,
    NewRecord,
    encode_batch,
    encode_control_batch,
    iter_batches,
)

__all__ = (
    "NO_PRODUCER_ID",
    "Appended",
    "CoordinatorLog",
    "CoordinatorLogError",
    "LogRecord",
    "MemoryCoordinatorLog",
    "log_records",
)

#: Kafka's RecordBatch.NO_PRODUCER_ID: a record written outside any transaction.
NO_PRODUCER_ID = -1
_COMMIT = 1


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One record of a coordinator's partition, as the replay sees it: its offset, key and
    value, the producer id of a transactional batch (``NO_PRODUCER_ID`` otherwise), and for a
    transaction marker ``marker`` True (COMMIT) or False (ABORT), None for a data record."""

    offset: int
    key: bytes | None
    value: bytes | None
    producer_id: int = NO_PRODUCER_ID
    marker: bool | None = None


class CoordinatorLogError(Exception):
    """An append or read failed; ``error`` is what the client should be told."""

    def __init__(self, error: ErrorCode, message: str = "") -> None:
        super().__init__(message or error.name)
        self.error = error


KeyValue = tuple[bytes, bytes | None]


@dataclass(frozen=True, slots=True)
class Appended:
    """A batch written: its first offset and an awaitable resolved once it is durable."""

    first_offset: int
    durable: Awaitable[None]


class CoordinatorLog(Protocol):
    @property
    def num_partitions(self) -> int: ...

    async def prepare(self) -> None:
        """Make sure every partition exists (create the topic when missing)."""
        ...

    async def read_partition(self, partition: int) -> list[LogRecord]:
        """Every record from the log start to the high watermark, in offset order, with the
        transaction markers."""
        ...

    def append(
        self,
        partition: int,
        records: Sequence[KeyValue],
        timestamp_ms: int,
        *,
        timeout_ms: int,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = -1,
    ) -> Appended:
        """Write one batch now (raise ``CoordinatorLogError`` when that fails); a producer id
        makes it a transactional batch of that producer."""
        ...

    def append_marker(
        self,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        *,
        timeout_ms: int,
    ) -> Appended:
        """Write the COMMIT/ABORT marker of a producer's transaction now."""
        ...


def encode_records(
    records: Sequence[KeyValue],
    timestamp_ms: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
) -> bytes:
    """One uncompressed v2 batch holding ``records`` (base offset 0: the log assigns it);
    transactional when a producer id is given."""
    new = [NewRecord(key=k, value=v, timestamp=timestamp_ms) for k, v in records]
    if producer_id == NO_PRODUCER_ID:
        return encode_batch(new)
    return encode_batch(
        new,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=0,
        is_transactional=True,
    )


def log_records(data: bytes | memoryview, start_offset: int) -> list[LogRecord]:
    """The records of concatenated batches from ``start_offset`` on, as the replay sees them:
    data records with their transactional producer id, markers as ``LogRecord.marker``."""
    out: list[LogRecord] = []
    for batch in iter_batches(data):
        if not isinstance(batch, DecodedBatch):  # a legacy batch: never transactional
            out.extend(
                LogRecord(r.offset, r.key, r.value)
                for r in batch.records
                if r.offset >= start_offset
            )
            continue
        producer_id = batch.producer_id if batch.is_transactional else NO_PRODUCER_ID
        for r in batch.records:
            if r.offset < start_offset:
                continue
            if batch.is_control:
                out.append(LogRecord(r.offset, None, None, producer_id, r.control_type == _COMMIT))
            else:
                out.append(LogRecord(r.offset, r.key, r.value, producer_id))
    return out


class MemoryCoordinatorLog:
    """An in-memory log of encoded batches, with knobs for tests: ``hold_hw`` parks the HW
    (appends then wait until ``release``), ``fail_appends`` makes writes fail."""

    def __init__(self, num_partitions: int) -> None:
        self._n = num_partitions
        self.data: dict[int, bytearray] = {}
        self.leo: dict[int, int] = {}
        self.hw: dict[int, int] = {}
        self.hold_hw = False
        self.fail_appends: ErrorCode | None = None
        self.prepared = False
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []

    @property
    def num_partitions(self) -> int:
        return self._n

    async def prepare(self) -> None:
        for p in range(self._n):
            self.data.setdefault(p, bytearray())
            self.leo.setdefault(p, 0)
            self.hw.setdefault(p, 0)
        self.prepared = True

    async def read_partition(self, partition: int) -> list[LogRecord]:
        hw = self.hw.get(partition, 0)
        return [r for r in log_records(bytes(self.data.get(partition, b"")), 0) if r.offset < hw]

    def append(
        self,
        partition: int,
        records: Sequence[KeyValue],
        timestamp_ms: int,
        *,
        timeout_ms: int,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = -1,
    ) -> Appended:
        return self._append(
            encode_records(records, timestamp_ms, producer_id, producer_epoch),
            partition,
            len(records),
            timeout_ms,
        )

    def append_marker(
        self,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        *,
        timeout_ms: int,
    ) -> Appended:
        batch = encode_control_batch(
            _COMMIT if commit else 0, producer_id=producer_id, producer_epoch=producer_epoch
        )
        return self._append(batch, partition, 1, timeout_ms)

    def _append(self, encoded: bytes, partition: int, count: int, timeout_ms: int) -> Appended:
        if self.fail_appends is not None:
            raise CoordinatorLogError(self.fail_appends)
        batch = bytearray(encoded)
        base = self.leo[partition]
        batch[0:8] = base.to_bytes(8, "big", signed=True)
        self.data[partition] += batch
        self.leo[partition] = base + count
        end = self.leo[partition]
        if not self.hold_hw:
            self.hw[partition] = end
        return Appended(base, self._wait(partition, end, timeout_ms))

    async def _wait(self, partition: int, end: int, timeout_ms: int) -> None:
        if self.hw[partition] >= end:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((partition, end, fut))
        try:
            await asyncio.wait_for(fut, timeout_ms / 1000)
        except TimeoutError:
            raise CoordinatorLogError(ErrorCode.request_timed_out) from None

    def release(self) -> None:
        """Move every HW to its LEO and wake the appends waiting for it."""
        self.hold_hw = False
        for p, leo in self.leo.items():
            self.hw[p] = leo
        waiters, self._waiters = self._waiters, []
        for _, _, fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def records(self, partition: int) -> list[LogRecord]:
        """Everything written to a partition, HW or not (for assertions)."""
        return log_records(bytes(self.data.get(partition, b"")), 0)
