"""The registry's state in the compacted ``_schemas`` topic (one partition, as Confluent's).

``write`` appends the records as one batch, waits until the HW covers them (the topic's flush
policy: by default after the fsync, so an answer means durable), then ``catch_up`` reads the
log from where it left off and replays every record into the state: the same function runs
for the registry's own writes, for records another writer produced (MirrorMaker 2, a consumer
copying a registry in) and, at start, for the whole topic.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from tidelog.broker.schema_registry.errors import RegistryError
from tidelog.schema.records import (
    SCHEMAS_TOPIC,
    RecordFormatError,
    RegistryKey,
    Value,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from tidelog.schema.state import RegistryState
from tidelog.storage import PartitionLog, StorageError
from tidelog.storage.record_codec import NewRecord, encode_batch, iter_records

if TYPE_CHECKING:
    from tidelog.broker.coordinator.partition_writer import PartitionWriter
    from tidelog.broker.purgatory import HighWatermarkWaiters
    from tidelog.broker.topics import Topics

__all__ = ("SchemasHost", "SchemasTopic")

T = TypeVar("T")

log = logging.getLogger("tidelog.schema_registry")

#: How long a write waits for its HW before it answers 50002 (Confluent's
#: ``kafkastore.timeout.ms`` default is 500 ms; tidelog's fsync is usually well within).
WRITE_TIMEOUT_S = 30.0
READ_BYTES = 1024 * 1024
#: How long the tail waits for a record from another writer before it looks again.
TAIL_WAIT_S = 5.0

RawRecord = tuple[bytes | None, bytes | None]


def _read_from(partition_log: PartitionLog, offset: int, end: int) -> tuple[list[RawRecord], int]:
    """Records in [offset, end) and the offset after the last one read (worker thread)."""
    out: list[RawRecord] = []
    while offset < end:
        info = partition_log.read(offset, READ_BYTES)
        if info.first_offset is None or info.last_offset is None:
            break
        for record in iter_records(info.read_bytes()):
            if offset <= record.offset < end:
                out.append((record.key, record.value))
        if info.last_offset < offset:
            break
        offset = min(info.last_offset + 1, end)
    return out, offset


class SchemasHost(Protocol):
    """What the ``_schemas`` store uses of the broker (``broker.app.Broker`` implements it)."""

    topics: Topics
    #: HW waiters: a write waits for its records' HW, the tail for another writer's
    partitions: HighWatermarkWaiters
    #: wakes the HW waiters (and schedules the fsync) after the store's own appends
    partition_writer: PartitionWriter

    @property
    def clock(self) -> Callable[[], int]: ...

    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T: ...


class SchemasTopic:
    def __init__(
        self, broker: SchemasHost, state: RegistryState, topic: str = SCHEMAS_TOPIC
    ) -> None:
        self.broker = broker
        self.state = state
        self.topic = topic
        self.next_offset = 0
        self.skipped = 0
        self._reading = asyncio.Lock()
        self._tail: asyncio.Task[None] | None = None

    def _configs(self) -> dict[str, str]:
        return {"cleanup.policy": "compact", "compression.type": "uncompressed"}

    def _log(self) -> PartitionLog:
        partition_log = self.broker.topics.get_log(self.topic, 0)
        if partition_log is None:
            raise RegistryError.store(f"{self.topic}-0 is missing: it was deleted?")
        return partition_log

    async def start(self) -> None:
        await self.broker.topics.ensure_internal_topic(
            self.topic, 1, self._configs(), self.broker.run_blocking
        )
        await self.catch_up()
        log.info(
            "schema registry loaded %d records of %s: %d subjects, %d schemas",
            self.state.records,
            self.topic,
            len(self.state.subjects),
            len(self.state.by_id),
        )
        self._tail = asyncio.ensure_future(self._follow())

    async def stop(self) -> None:
        if self._tail is not None:
            self._tail.cancel()
            await asyncio.gather(self._tail, return_exceptions=True)

    async def _follow(self) -> None:
        """Replay records other writers append (a consumer or MirrorMaker 2 copying in)."""
        while True:
            partition_log = self.broker.topics.get_log(self.topic, 0)
            if partition_log is None:
                await asyncio.sleep(TAIL_WAIT_S)
                continue
            await self.broker.partitions.wait_until(
                (self.topic, 0),
                self._behind(partition_log),
                TAIL_WAIT_S,
            )
            try:
                await self.catch_up()
            except Exception:
                log.exception("reading %s failed", self.topic)
                await asyncio.sleep(TAIL_WAIT_S)

    def _behind(self, partition_log: PartitionLog) -> Callable[[], bool]:
        return lambda: partition_log.high_watermark > self.next_offset

    async def catch_up(self) -> None:
        async with self._reading:
            partition_log = self._log()
            start = max(self.next_offset, partition_log.log_start_offset)
            end = partition_log.high_watermark
            if start >= end:
                self.next_offset = max(self.next_offset, start)
                return
            records, self.next_offset = await self.broker.run_blocking(
                _read_from, partition_log, start, end
            )
            for key, value in records:
                self.replay(key, value)

    def replay(self, raw_key: bytes | None, raw_value: bytes | None) -> None:
        if raw_key is None:
            self.skipped += 1
            return
        try:
            key = decode_key(raw_key)
            value = decode_value(key, raw_value)
        except RecordFormatError as exc:
            self.skipped += 1
            log.warning("skipping a %s record that does not parse: %s", self.topic, exc)
            return
        self.state.replay(key, value)

    async def write(self, records: list[tuple[RegistryKey, Value]]) -> None:
        partition_log = self._log()
        now = self.broker.clock()
        batch = encode_batch(
            [NewRecord(key=encode_key(k), value=encode_value(v), timestamp=now) for k, v in records]
        )
        hw_before = partition_log.high_watermark
        try:
            info = partition_log.append(batch, now_ms=now)
        except StorageError as exc:
            raise RegistryError.store(f"Error while writing to {self.topic}: {exc}") from None
        self.broker.partition_writer.appended(partition_log, hw_before)
        end = info.last_offset + 1
        covered = await self.broker.partitions.wait_until(
            (self.topic, 0), lambda: partition_log.high_watermark >= end, WRITE_TIMEOUT_S
        )
        if not covered:
            raise RegistryError.timeout(
                f"Write to {self.topic} timed out after {WRITE_TIMEOUT_S:.0f} s"
            )
        while self.next_offset < end:
            await self.catch_up()
