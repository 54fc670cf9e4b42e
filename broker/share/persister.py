"""The share-group state in ``__share_group_state``: Kafka's share coordinator, on the runtime.

Each write turns share partitions into ShareSnapshot records
(``protocol/internal_topics/share_group_state.py``) and writes them through the coordinator
runtime (``broker/coordinator/runtime.py``) to the share partition's state partition - the
broker's one ``PartitionWriter``, durable as the broker's flush policy makes appends durable,
at most ``SHARE_WRITE_TIMEOUT_MS`` - and returns once they are durable and replayed. The state
the records describe (``states``: the last state of every share partition) changes only by
``replay``, the same function the start-up ``load`` applies to every record of the topic. The
topic is created on first write, compacted, with ``share.coordinator.state.topic.num.partitions``
partitions.

Kafka divergence: Kafka's share coordinator writes ShareUpdate records (the changed batches)
and a ShareSnapshot every ``share.coordinator.snapshot.update.records.per.snapshot`` updates;
tidelog writes a whole ShareSnapshot at every change (the compacted topic keeps the last).
The replay reads both kinds: an update's batches replace the offsets they cover.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Sequence

from tidelog.broker.coordinator.log import KeyValue, LogRecord
from tidelog.broker.coordinator.runtime import CoordinatorRuntime
from tidelog.broker.coordinator.topic_log import InternalTopicLog
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

__all__ = ("SHARE_STATE_TOPIC", "SHARE_WRITE_TIMEOUT_MS", "SharePersister")

log = logging.getLogger("tidelog.share")

SHARE_STATE_TOPIC = "__share_group_state"
#: How long a state write waits to be durable (Kafka's share.coordinator.write.timeout.ms).
SHARE_WRITE_TIMEOUT_MS = 5000
PartitionKey = tuple[str, uuid.UUID, int]


class SharePersister:
    """Writes and loads the share-partition state (see the module)."""

    def __init__(self, state_log: InternalTopicLog, clock: Callable[[], int]) -> None:
        self._log = state_log
        self._clock = clock
        self.runtime = CoordinatorRuntime(
            state_log,
            self.replay,
            write_timeout_ms=SHARE_WRITE_TIMEOUT_MS,
            clock=clock,
            name="share coordinator",
        )
        #: The last state of every share partition, as the records say (built by ``replay``).
        self.states: dict[PartitionKey, ShareStateValue] = {}
        #: The last snapshot epoch written per share partition (the next write's is one more).
        self._snapshot_epochs: dict[PartitionKey, int] = {}

    def replay(self, record: LogRecord) -> None:
        """Apply one ``__share_group_state`` record: at load, and once a write is durable."""
        if record.key is None:
            return
        try:
            key = decode_key(record.key)
            pk = (key.group_id, key.topic_id, key.partition)
            if record.value is None:
                self.states.pop(pk, None)
                self._snapshot_epochs.pop(pk, None)
                return
            value = decode_value(record.value, key.record_type)
        except ShareStateSchemaError as exc:
            log.warning("skipping a damaged %s record: %s", SHARE_STATE_TOPIC, exc)
            return
        if key.record_type == SNAPSHOT or pk not in self.states:
            self.states[pk] = value
        else:
            self.states[pk] = _apply_update(self.states[pk], value)
        self._snapshot_epochs[pk] = max(self._snapshot_epochs.get(pk, -1), value.snapshot_epoch)

    async def write(self, items: Sequence[tuple[PartitionKey, SharePartition | None]]) -> None:
        """Snapshot each share partition (None: a tombstone); returns once durable."""
        if not items:
            return
        by_partition: dict[int, list[KeyValue]] = {}
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
            target = partition_for(group_id, topic_id, partition, self._partitions())
            by_partition.setdefault(target, []).append((record_key, value))
        waits = [self.runtime.write(target, records) for target, records in by_partition.items()]
        await asyncio.gather(*waits)

    def _partitions(self) -> int:
        self._log.ensure_topic()  # the topic on first write, so its partition count is known
        return self._log.num_partitions

    async def load(self) -> dict[PartitionKey, ShareStateValue]:
        """Replay the topic (empty before its creation); the last state of every share
        partition."""
        await self.runtime.load()
        self.runtime.status = "active"
        return dict(self.states)


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
