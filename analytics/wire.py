"""Read records over the Kafka protocol with kafka-python (any Kafka-compatible broker).

Each range is read by its own consumer with assign + seek, no group and no commits, so a replay
leaves no trace on the broker. Brokers answer fetches only below the high watermark, so only
committed records are read.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from tidelog.analytics.options import kafka_value
from tidelog.analytics.plan import TP, OffsetRange
from tidelog.storage.record_codec import RecordColumns

_YIELD_ROWS = 65536
_STALL_SECONDS = 60.0


class WireError(RuntimeError):
    """The broker could not be reached or did not deliver a range."""


def _client_config(bootstrap: str, extra: dict[str, str]) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "bootstrap_servers": [s.strip() for s in bootstrap.split(",") if s.strip()],
        "group_id": None,
        "enable_auto_commit": False,
        "client_id": "tidelog-replay",
        "fetch_max_bytes": 64 * 1024 * 1024,
        "max_partition_fetch_bytes": 16 * 1024 * 1024,
        "max_poll_records": 10_000,  # kafka-python decodes every record a poll returns
        "request_timeout_ms": 30_000,
    }
    from kafka import KafkaConsumer

    for key, value in extra.items():  # typed as the sink types its kafka.* settings
        name = key.replace(".", "_")
        cfg[name] = kafka_value(name, value, KafkaConsumer.DEFAULT_CONFIG.get(name))
    return cfg


def _consumer(bootstrap: str, extra: dict[str, str]) -> Any:
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError

    try:
        return KafkaConsumer(**_client_config(bootstrap, extra))
    except KafkaError as e:
        raise WireError(
            f"cannot reach Kafka at kafka.bootstrap.servers={bootstrap!r}: {e!r}; "
            "is the broker running and the address right?"
        ) from e


class Wire:
    """A `Backend` over the wire. The planning consumer is made on first use."""

    def __init__(self, bootstrap: str, extra: dict[str, str] | None = None) -> None:
        self.bootstrap = bootstrap
        self.extra = dict(extra or {})
        self._c: Any = None

    @property
    def consumer(self) -> Any:
        if self._c is None:
            self._c = _consumer(self.bootstrap, self.extra)
        return self._c

    def close(self) -> None:
        if self._c is not None:
            self._c.close()
            self._c = None

    def topics(self) -> dict[str, list[int]]:
        c = self.consumer
        out = {}
        for t in sorted(c.topics()):
            parts = c.partitions_for_topic(t)
            if parts:
                out[t] = sorted(parts)
        return out

    def _tps(self, tps: list[TP]) -> list[Any]:
        from kafka import TopicPartition

        return [TopicPartition(t, p) for t, p in tps]

    def earliest(self, tps: list[TP]) -> dict[TP, int]:
        got = self.consumer.beginning_offsets(self._tps(tps))
        return {(tp.topic, tp.partition): int(o) for tp, o in got.items()}

    def latest(self, tps: list[TP]) -> dict[TP, int]:
        got = self.consumer.end_offsets(self._tps(tps))
        return {(tp.topic, tp.partition): int(o) for tp, o in got.items()}

    def offsets_for_time(self, tps: list[TP], ts: int) -> dict[TP, int | None]:
        got = self.consumer.offsets_for_times({tp: ts for tp in self._tps(tps)})
        return {
            (tp.topic, tp.partition): None if v is None else int(v.offset) for tp, v in got.items()
        }

    def read(self, r: OffsetRange) -> Iterator[RecordColumns]:
        """Records with start <= offset < end, from a consumer of its own."""
        if r.size == 0:
            return
        from kafka import TopicPartition

        tp = TopicPartition(r.topic, r.partition)
        c = _consumer(self.bootstrap, self.extra)
        try:
            c.assign([tp])
            c.seek(tp, r.start)
            cols, last_progress = RecordColumns(), time.monotonic()
            while c.position(tp) < r.end:
                got = c.poll(timeout_ms=500).get(tp, [])
                if got:
                    last_progress = time.monotonic()
                elif time.monotonic() - last_progress > _STALL_SECONDS:
                    raise WireError(
                        f"{r.topic}-{r.partition}: no records for "
                        f"{_STALL_SECONDS:.0f} s at offset {c.position(tp)} "
                        f"(reading [{r.start}, {r.end}))"
                    )
                for rec in got:
                    if rec.offset >= r.end:
                        break
                    if rec.offset < r.start:
                        continue
                    cols.offsets.append(rec.offset)
                    cols.timestamps.append(rec.timestamp)
                    cols.timestamp_types.append(rec.timestamp_type)
                    cols.keys.append(rec.key)
                    cols.values.append(rec.value)
                    cols.headers.append(tuple(rec.headers or ()))
                if len(cols) >= _YIELD_ROWS:
                    yield cols
                    cols = RecordColumns()
            if len(cols):
                yield cols
        finally:
            c.close()
