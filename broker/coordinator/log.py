"""Where a coordinator keeps its records: the partitions of its internal topic.

``CoordinatorLog`` is what a coordinator runtime (``broker/coordinator/runtime.py``) needs from
storage. ``append`` writes one batch at once (so records land in the order the coordinator made
them) and returns an ``Appended``: the batch's first offset and an awaitable that resolves when
the high watermark covers it (or raises ``CoordinatorLogError``, REQUEST_TIMED_OUT after the
coordinator's write timeout); ``append_marker`` writes a transaction's COMMIT/ABORT control
record likewise; ``read_partition`` returns every record from the log start to the HW, markers
included (``LogRecord.marker``), for the replay at start-up.

``broker.coordinator.topic_log.InternalTopicLog`` adapts the broker's storage through the one
``PartitionWriter`` (``broker/coordinator/partition_writer.py``); the tests' in-memory log is
``tests/support/coordinator_log.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from tidelog.broker.coordinator.appended import Appended, CoordinatorLogError
from tidelog.storage.record_codec import (
    DecodedBatch,
    NewRecord,
    encode_batch,
    iter_batches,
)

__all__ = (
    "COMMIT_MARKER",
    "NO_PRODUCER_ID",
    "Appended",
    "CoordinatorLog",
    "CoordinatorLogError",
    "LogRecord",
    "log_records",
)

#: Kafka's RecordBatch.NO_PRODUCER_ID: a record written outside any transaction.
NO_PRODUCER_ID = -1
#: The control type of a COMMIT marker (0 is ABORT).
COMMIT_MARKER = 1


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


KeyValue = tuple[bytes, bytes | None]


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
                out.append(
                    LogRecord(r.offset, None, None, producer_id, r.control_type == COMMIT_MARKER)
                )
            else:
                out.append(LogRecord(r.offset, r.key, r.value, producer_id))
    return out
