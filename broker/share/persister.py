"""The share-group state in ``__share_group_state``: writes and the start-up load.

Each write appends ShareSnapshot records (``protocol/internal_topics/share_group_state.py``)
to the share partition's state partition through the same path the group coordinator uses for
``__consumer_offsets`` (``PartitionLog.append`` on the loop - a page-cache write - then
``after_append`` and a wait for the HW, so a write is durable as the broker's flush policy
makes appends durable) and returns once the HW covers it. The topic is created on first write,
compacted, with ``share.coordinator.state.topic.num.partitions`` partitions.

Kafka divergence: Kafka's share coordinator writes ShareUpdate records (the changed batches)
and a ShareSnapshot every ``share.coordinator.snapshot.update.records.per.snapshot`` updates;
tidelog writes a whole ShareSnapshot at every change (the compacted topic keeps the last).
The load reads both kinds: an update's batches replace the offsets they cover.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from tidelog.broker.share.partition import SharePartition, StateBatch
from tidelog.broker.topics import LEADER_EPOCH
from tidelog.protocol.internal_topics.share_group_state import (
    SNAPSHOT,
    ShareStateKey,
    ShareStateSchemaError,
    ShareStateValue,
    StateBatchRecord,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for,
)
from tidelog.storage import PartitionLog
from tidelog.storage.record_codec import NewRecord, encode_batch, iter_records

if TYPE_CHECKING:
    from tidelog.broker.handlers.base import BrokerView

__all__ = ("SHARE_STATE_TOPIC", "SharePersister")

log = logging.getLogger("tidelog.share")

SHARE_STATE_TOPIC = "__share_group_state"
_FOREVER_S = 365 * 24 * 3600.0
PartitionKey = tuple[str, uuid.UUID, int]


class SharePersister:
    def __init__(self, broker: BrokerView) -> None:
        self.broker = broker
        self._n = broker.config.get_int("share.coordinator.state.topic.num.partitions")
        self._snapshot_epochs: dict[PartitionKey, int] = {}

    def ensure_topic(self) -> None:
        topics = self.broker.topics
        info = topics.get(SHARE_STATE_TOPIC)
        if info is None:
            info = topics.create_topic(
                SHARE_STATE_TOPIC,
                self._n,
                {
                    "cleanup.policy": "compact",
                    "segment.bytes": str(
                        self.broker.config.get_int("share.coordinator.state.topic.segment.bytes")
                    ),
                    "min.insync.replicas": "1",
                },
            )
            log.info("created %s (%d partitions)", SHARE_STATE_TOPIC, info.partitions)
        self._n = info.partitions

    async def write(self, items: Sequence[tuple[PartitionKey, SharePartition | None]]) -> None:
        """Snapshot each share partition (None: a tombstone) and wait for the HW."""
        if not items:
            return
        self.ensure_topic()
        by_partition: dict[int, list[NewRecord]] = {}
        now = self.broker.clock()
        for key, sp in items:
            group_id, topic_id, partition = key
            record_key = encode_key(ShareStateKey(group_id, topic_id, partition, SNAPSHOT))
            value = None
            if sp is not None:
                epoch = self._snapshot_epochs.get(key, -1) + 1
                self._snapshot_epochs[key] = epoch
                value = encode_value(
                    ShareStateValue(
                        snapshot_epoch=epoch,
                        state_epoch=sp.state_epoch,
                        leader_epoch=LEADER_EPOCH,
                        start_offset=sp.start_offset,
                        state_batches=tuple(
                            StateBatchRecord(
                                b.first_offset, b.last_offset, b.delivery_state, b.delivery_count
                            )
                            for b in sp.snapshot()
                        ),
                    )
                )
            target = partition_for(group_id, topic_id, partition, self._n)
            by_partition.setdefault(target, []).append(
                NewRecord(key=record_key, value=value, timestamp=now)
            )
        waits = []
        for target, records in by_partition.items():
            partition_log = self.broker.topics.get_log(SHARE_STATE_TOPIC, target)
            if partition_log is None:
                continue
            hw_before = partition_log.high_watermark
            info = partition_log.append(
                encode_batch(records), now_ms=now, leader_epoch=LEADER_EPOCH
            )
            self.broker.after_append(partition_log, hw_before)
            waits.append((target, partition_log, info.last_offset + 1))
        for target, partition_log, end in waits:
            if partition_log.high_watermark < end:
                await self.broker.partitions.wait_until(
                    (SHARE_STATE_TOPIC, target), _reached(partition_log, end), _FOREVER_S
                )

    async def load(self) -> dict[PartitionKey, ShareStateValue]:
        """The last state of every share partition in the topic (empty before its creation)."""
        info = self.broker.topics.get(SHARE_STATE_TOPIC)
        if info is None:
            return {}
        self._n = info.partitions
        found: dict[PartitionKey, ShareStateValue] = {}
        for p in range(info.partitions):
            partition_log = self.broker.topics.get_log(SHARE_STATE_TOPIC, p)
            if partition_log is None:
                continue
            records = await self.broker.run_blocking(_read_all, partition_log)
            for key_bytes, value_bytes in records:
                try:
                    key = decode_key(key_bytes)
                    pk = (key.group_id, key.topic_id, key.partition)
                    if value_bytes is None:
                        found.pop(pk, None)
                        self._snapshot_epochs.pop(pk, None)
                        continue
                    value = decode_value(value_bytes, key.record_type)
                except ShareStateSchemaError as exc:
                    log.warning("skipping a damaged %s record: %s", SHARE_STATE_TOPIC, exc)
                    continue
                if key.record_type == SNAPSHOT or pk not in found:
                    found[pk] = value
                else:
                    found[pk] = _apply_update(found[pk], value)
                self._snapshot_epochs[pk] = max(
                    self._snapshot_epochs.get(pk, -1), value.snapshot_epoch
                )
        return found


def _reached(partition_log: PartitionLog, end: int) -> Callable[[], bool]:
    return lambda: partition_log.high_watermark >= end


def state_batches(value: ShareStateValue) -> list[StateBatch]:
    return [
        StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        for b in value.state_batches
    ]


def _apply_update(base: ShareStateValue, update: ShareStateValue) -> ShareStateValue:
    covered = {o for b in update.state_batches for o in range(b.first_offset, b.last_offset + 1)}
    kept = []
    for b in base.state_batches:
        for o in range(b.first_offset, b.last_offset + 1):
            if o not in covered:
                kept.append(StateBatchRecord(o, o, b.delivery_state, b.delivery_count))
    merged = sorted(kept + list(update.state_batches), key=lambda b: b.first_offset)
    start = update.start_offset if update.start_offset >= 0 else base.start_offset
    return ShareStateValue(
        update.snapshot_epoch, base.state_epoch, update.leader_epoch, start, tuple(merged)
    )


def _read_all(partition_log: PartitionLog) -> list[tuple[bytes, bytes | None]]:
    out: list[tuple[bytes, bytes | None]] = []
    offset = partition_log.log_start_offset
    while True:
        info = partition_log.read(offset, 1024 * 1024, upper_bound=partition_log.high_watermark)
        if info.first_offset is None or info.last_offset is None:
            return out
        for record in iter_records(info.read_bytes()):
            if record.key is not None:
                out.append((record.key, record.value))
        offset = info.last_offset + 1
