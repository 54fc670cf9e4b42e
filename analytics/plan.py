"""Which records a replay reads: topic-partitions and [start, end) offset ranges.

A `Backend` answers the questions (topics, earliest/latest offsets, offset for a time) and reads
one range; `analytics.logdir.LogDir` answers from segment files, `analytics.wire.Wire` over the
Kafka protocol. `plan_ranges` turns checked options into ranges the same way for both, so both
ways in give the same rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from tidelog.analytics.options import EARLIEST, LATEST, OffsetSpec, SourceOptions
from tidelog.storage.record_codec import RecordColumns

TP = tuple[str, int]


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets [start, end) of one topic-partition: one Spark partition's work."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(self.end - self.start, 0)


class Backend(Protocol):
    def topics(self) -> dict[str, list[int]]: ...

    def earliest(self, tps: list[TP]) -> dict[TP, int]: ...

    def latest(self, tps: list[TP]) -> dict[TP, int]: ...

    def offsets_for_time(self, tps: list[TP], ts: int) -> dict[TP, int | None]: ...

    def read(self, r: OffsetRange) -> Iterator[RecordColumns]: ...

    def close(self) -> None: ...


class PlanError(ValueError):
    """The options name something the source does not have."""


def open_backend(opts: SourceOptions) -> Backend:
    if opts.path:
        from tidelog.analytics.logdir import LogDir

        committed = dict(opts.kafka_config).get("isolation.level") == "read_committed"
        return LogDir(opts.path, read_committed=committed)
    from tidelog.analytics.wire import Wire

    assert opts.bootstrap is not None
    return Wire(opts.bootstrap, dict(opts.kafka_config))


def select_partitions(opts: SourceOptions, backend: Backend, *, strict: bool) -> list[TP]:
    """The topic-partitions the options choose, sorted. `strict`: a named topic or assigned
    partition that does not exist is an error (batch); streaming waits for it instead."""
    have = backend.topics()
    if opts.assign:
        missing = [f"{t}-{p}" for t, p in opts.assign if p not in have.get(t, [])]
        if missing and strict:
            raise PlanError(
                f"option assign: no such partition(s) {', '.join(missing)}; "
                f"topics here: {_names(have)}"
            )
        return sorted(tp for tp in opts.assign if tp[1] in have.get(tp[0], []))
    if opts.topics:
        missing = [t for t in opts.topics if t not in have]
        if missing and strict:
            raise PlanError(
                f"option subscribe: no topic(s) {', '.join(missing)}; topics here: {_names(have)}"
            )
    return sorted((t, p) for t, ps in have.items() if opts.topic_selected(t) for p in ps)


def _names(have: dict[str, list[int]]) -> str:
    return ", ".join(sorted(have)) or "(none)"


def _side(
    spec: OffsetSpec,
    ts: int | None,
    tps: list[TP],
    lo: dict[TP, int],
    hi: dict[TP, int],
    backend: Backend,
    default: int,
) -> dict[TP, int]:
    if ts is not None:  # a timestamp wins over offsets, as in Spark
        found = backend.offsets_for_time(tps, ts)
        return {tp: hi[tp] if found.get(tp) is None else int(found[tp] or 0) for tp in tps}
    out = {}
    for tp in tps:
        if isinstance(spec, str):
            want = EARLIEST if spec == "earliest" else LATEST
        else:
            want = spec.get(tp[0], {}).get(tp[1], default)
        out[tp] = lo[tp] if want == EARLIEST else hi[tp] if want == LATEST else want
    return out


def resolve_offsets(
    opts: SourceOptions, backend: Backend, tps: list[TP], *, which: str
) -> dict[TP, int]:
    """Starting ("start") or ending ("end") offsets of `tps`, clamped to what exists."""
    if not tps:
        return {}
    lo, hi = backend.earliest(tps), backend.latest(tps)
    if which == "start":
        got = _side(opts.starting, opts.starting_timestamp, tps, lo, hi, backend, EARLIEST)
    else:
        got = _side(opts.ending, opts.ending_timestamp, tps, lo, hi, backend, LATEST)
    return {tp: min(max(got[tp], lo[tp]), hi[tp]) for tp in tps}


def split(ranges: list[OffsetRange], max_records: int | None) -> list[OffsetRange]:
    """Cut each range into pieces of at most `max_records` offsets (maxRecordsPerPartition)."""
    out = []
    for r in ranges:
        if r.size == 0:
            continue
        step = max_records or r.size
        out += [
            OffsetRange(r.topic, r.partition, s, min(s + step, r.end))
            for s in range(r.start, r.end, step)
        ]
    return out


def plan_read(opts: SourceOptions, backend: Backend) -> tuple[list[TP], list[OffsetRange]]:
    """The partitions the batch query reads (empty ones included) and its ranges (already
    split by maxRecordsPerPartition; an empty partition has no range)."""
    tps = select_partitions(opts, backend, strict=True)
    start = resolve_offsets(opts, backend, tps, which="start")
    end = resolve_offsets(opts, backend, tps, which="end")
    ranges = [OffsetRange(t, p, start[(t, p)], max(end[(t, p)], start[(t, p)])) for t, p in tps]
    return sorted(tps), split(ranges, opts.max_records_per_partition)


def plan_ranges(opts: SourceOptions, backend: Backend) -> list[OffsetRange]:
    """The batch query's ranges (already split by maxRecordsPerPartition)."""
    return plan_read(opts, backend)[1]
