"""The Spark data source `tidelog`: batch (`spark.read`) and streaming (`spark.readStream`);
writing (`df.write`, `df.writeStream`) is `analytics.sink`.

Rows have the schema of Spark's Kafka source. Each Spark partition reads one offset range of one
topic-partition, from segment files (option `path`) or over the wire (`kafka.bootstrap.servers`),
and hands Spark Arrow record batches. Register with `analytics.register(spark)`.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from tidelog.analytics.arrow import to_arrow
from tidelog.analytics.logdir import LogDir, LogDirError
from tidelog.analytics.options import OptionError, SourceOptions, parse_options
from tidelog.analytics.plan import (
    TP,
    OffsetRange,
    open_backend,
    plan_ranges,
    resolve_offsets,
    select_partitions,
    split,
)

BASE_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
HEADERS_SCHEMA = ", headers array<struct<key: string, value: binary>>"


def schema_ddl(include_headers: bool) -> str:
    return BASE_SCHEMA + (HEADERS_SCHEMA if include_headers else "")


class RangePartition(InputPartition):  # type: ignore[misc]
    """One Spark partition: an offset range."""

    def __init__(self, r: OffsetRange) -> None:
        super().__init__(r)
        self.range = r

    def __repr__(self) -> str:
        r = self.range
        return f"RangePartition({r.topic}-{r.partition} [{r.start}, {r.end}))"


def worker_sees_log_dir(path: str) -> None:
    """Files mode reads segments on the Spark workers: say so when this one cannot see them."""
    if not os.path.isdir(path):
        raise LogDirError(
            f"log dir {path!r} is not visible on Spark worker {socket.gethostname()}: files mode "
            "(option path, tidelog replay --log-dir) reads the segment files on every worker, so "
            "the log dir must be at that path on each of them (same host or a shared file "
            "system); or read over the wire instead (option kafka.bootstrap.servers, "
            "tidelog replay --bootstrap-server)"
        )


def read_range(opts: SourceOptions, r: OffsetRange) -> Iterator[pa.RecordBatch]:
    if opts.path:
        worker_sees_log_dir(opts.path)
    backend = open_backend(opts)
    try:
        if isinstance(backend, LogDir):  # files: the vectorised decoder
            yield from backend.read_arrow(r, opts.include_headers)
            return
        for cols in backend.read(r):
            yield to_arrow(cols, r.topic, r.partition, opts.include_headers)
    finally:
        backend.close()


class TidelogDataSource(DataSource):  # type: ignore[misc]
    """`spark.read.format("tidelog")` / `spark.readStream.format("tidelog")`."""

    @classmethod
    def name(cls) -> str:
        return "tidelog"

    def schema(self) -> Any:
        value = str(self.options.get("includeHeaders", "false")).strip().lower()
        if value not in ("true", "false"):
            raise OptionError(f"option includeHeaders={value!r}: use true or false")
        decoder = self._decoder()
        if decoder is not None:
            from tidelog.analytics.schemas import source_schema

            return source_schema(decoder, value == "true")
        return schema_ddl(value == "true")

    def _decoder(self) -> Any:
        """Typed columns (options decode, schemaRegistryUrl: analytics/schemas.py), or None."""
        options = {k.lower(): v for k, v in dict(self.options).items()}
        if not options.get("decode"):
            return None
        from tidelog.analytics.schemas import source_decoder

        return source_decoder(options)

    def reader(self, schema: Any) -> DataSourceReader:
        return TidelogBatchReader(parse_options(dict(self.options)), self._decoder())

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        if any(k.lower() == "decode" and v for k, v in dict(self.options).items()):
            raise OptionError(
                "option decode is for batch reads (spark.read); in a stream, decode with "
                "tidelog.analytics.schemas.decode in foreachBatch"
            )
        return TidelogStreamReader(parse_options(dict(self.options), streaming=True))

    def writer(self, schema: Any, overwrite: bool) -> DataSourceWriter:
        from tidelog.analytics.sink import TidelogBatchWriter, plan_write

        return TidelogBatchWriter(*plan_write(dict(self.options), schema, overwrite))

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:
        from tidelog.analytics.sink import TidelogStreamWriter, plan_write

        return TidelogStreamWriter(*plan_write(dict(self.options), schema, overwrite))


class TidelogBatchReader(DataSourceReader):  # type: ignore[misc]
    def __init__(self, opts: SourceOptions, decoder: Any = None) -> None:
        self.opts = opts
        self.decoder = decoder

    def partitions(self) -> Sequence[InputPartition]:
        backend = open_backend(self.opts)
        try:
            ranges = plan_ranges(self.opts, backend)
        finally:
            backend.close()
        return [RangePartition(r) for r in ranges] or [RangePartition(OffsetRange("", 0, 0, 0))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        r = partition.range
        if not r.size:
            return
        if self.decoder is None:
            yield from read_range(self.opts, r)
            return
        from tidelog.analytics.schemas import decode_batch

        for batch in read_range(self.opts, r):
            yield decode_batch(self.decoder, batch)


Offsets = dict[str, dict[str, int]]


def _to_json(offsets: dict[TP, int]) -> Offsets:
    out: Offsets = {}
    for (t, p), o in sorted(offsets.items()):
        out.setdefault(t, {})[str(p)] = int(o)
    return out


def _from_json(offsets: Offsets) -> dict[TP, int]:
    return {(t, int(p)): int(o) for t, ps in offsets.items() for p, o in ps.items()}


class TidelogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
    """Offsets are {"topic": {"partition": next offset}}. New partitions start at earliest."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._target: dict[TP, int] | None = None

    def _latest(self) -> dict[TP, int]:
        backend = open_backend(self.opts)
        try:
            tps = select_partitions(self.opts, backend, strict=False)
            return backend.latest(tps) if tps else {}
        finally:
            backend.close()

    def _earliest(self, tps: list[TP]) -> dict[TP, int]:
        if not tps:
            return {}
        backend = open_backend(self.opts)
        try:
            return backend.earliest(tps)
        finally:
            backend.close()

    def initialOffset(self) -> Offsets:
        backend = open_backend(self.opts)
        try:
            tps = select_partitions(self.opts, backend, strict=False)
            return _to_json(resolve_offsets(self.opts, backend, tps, which="start"))
        finally:
            backend.close()

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_offsets_per_trigger
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        begin = _from_json(start)
        latest = self._target if self._target is not None else self._latest()
        new = [tp for tp in latest if tp not in begin]
        begin.update(self._earliest(new))
        end = {tp: max(latest.get(tp, o), o) for tp, o in begin.items()}
        if isinstance(limit, ReadMaxRows):
            end = _cap(begin, end, limit.max_rows)
        return _to_json(end)

    def reportLatestOffset(self) -> Offsets | None:
        return _to_json(self._latest())

    def partitions(self, start: Offsets, end: Offsets) -> Sequence[InputPartition]:
        begin, stop = _from_json(start), _from_json(end)
        missing = [tp for tp in stop if tp not in begin]
        begin.update(self._earliest(missing))
        ranges = [OffsetRange(t, p, begin[(t, p)], o) for (t, p), o in sorted(stop.items())]
        return [RangePartition(r) for r in split(ranges, self.opts.max_records_per_partition)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        yield from read_range(self.opts, partition.range)

    def commit(self, end: Offsets) -> None:
        pass


def _cap(begin: dict[TP, int], end: dict[TP, int], max_rows: int) -> dict[TP, int]:
    """Share `max_rows` offsets across partitions in proportion to what each has waiting."""
    waiting = {tp: end[tp] - begin[tp] for tp in end}
    total = sum(waiting.values())
    if total <= max_rows:
        return end
    out = {tp: begin[tp] + (waiting[tp] * max_rows) // total for tp in end}
    if all(out[tp] == begin[tp] for tp in end):  # always make progress
        tp = max(waiting, key=lambda k: waiting[k])
        out[tp] = begin[tp] + min(max_rows, waiting[tp])
    return out


def register(spark: Any) -> None:
    """Make `spark.read.format("tidelog")` and `spark.readStream.format("tidelog")` work."""
    spark.dataSource.register(TidelogDataSource)
