"""The `tidelog` sink: `df.write` / `df.writeStream` `.format("tidelog")` with the contract of
Spark's Kafka sink, over the Kafka protocol (any Kafka broker), with kafka-python's idempotent
producer.

Columns (checked on the driver before any task runs, with the messages of Spark's KafkaWriter):

    value      string | binary    required
    key        string | binary    optional (null: no key)
    topic      string             optional; the option `topic`, when set, wins over it
    partition  int                optional (null: the producer's partitioner decides)
    headers    array<struct<key: string, value: binary>>   optional
    timestamp  timestamp | double optional (null: the producer's clock)

A record with a key and no partition lands where Kafka's Java producer puts it (murmur2, see
`analytics.partitioner`). Each task sends its rows with one producer and flushes; a failed send
fails the task (Spark retries it: at least once, as Spark's Kafka sink). With `exactlyOnce=true`
each task writes in a transaction the driver commits (see `analytics.transactions`).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from tidelog.analytics.options import OptionError, SinkOptions
from tidelog.analytics.partitioner import java_partitioner
from tidelog.analytics.transactions import (
    TxnHandle,
    batch_marker,
    check_transactions,
    end_transactions,
    handle_of,
    last_committed_batch,
    transactional_id,
)

HEADERS_TYPE = "array<struct<key:string,value:binary>>"
# column -> accepted Spark types (catalog strings), in the order Spark's KafkaWriter checks them
_TYPES = {
    "topic": ("string",),
    "key": ("string", "binary"),
    "value": ("string", "binary"),
    "headers": (HEADERS_TYPE,),
    "partition": ("int",),
    "timestamp": ("double", "timestamp"),
}
BATCH_ID_PROPERTY = "streaming.sql.batchId"  # Spark's local properties of a micro-batch's tasks
QUERY_ID_PROPERTY = "sql.streaming.queryId"


class SinkError(RuntimeError):
    """A write that cannot go on: a missing topic, an unreachable broker, a bad row."""


@dataclass(frozen=True, slots=True)
class WritePlan:
    """Which columns a write has (checked), and the topic option."""

    topic_option: str | None
    columns: tuple[str, ...]

    def has(self, name: str) -> bool:
        return name in self.columns


def check_schema(schema: Any, topic_option: str | None) -> WritePlan:
    """Spark's KafkaWriter.validateQuery: raise `OptionError` with Spark's message."""
    types = {f.name: f.dataType.simpleString() for f in schema.fields}
    if topic_option is None and "topic" not in types:
        raise OptionError(
            "topic option required when no 'topic' attribute is present. Use the topic option "
            "for setting a topic."
        )
    if "value" not in types:
        raise OptionError("Required attribute 'value' not found")
    for name, accepted in _TYPES.items():
        if name == "topic" and topic_option is not None:
            continue  # the option wins; the column is not read
        got = types.get(name)
        if got is not None and got.replace(" ", "") not in accepted:
            raise OptionError(
                f"{name} attribute unsupported type {got}. {name} must be a(n) "
                + " or ".join(accepted)
            )
    if topic_option is not None and not topic_option:
        raise OptionError("option topic is empty: name a topic, or drop it and use a topic column")
    return WritePlan(topic_option, tuple(n for n in _TYPES if n in types))


@dataclass
class SinkCommitMessage(WriterCommitMessage):  # type: ignore[misc]
    """What one task did: records sent, and its open transaction (exactly once)."""

    records: int
    txn: TxnHandle | None = None
    skipped: bool = False  # exactly once: this micro-batch was committed before (a replay)


# ---------------------------------------------------------------- rows -> records


def _bytes_list(arr: pa.Array) -> list[bytes | None]:
    if pa.types.is_string(arr.type):
        arr = arr.cast(pa.binary())
    elif pa.types.is_large_string(arr.type):
        arr = arr.cast(pa.large_binary())
    return arr.to_pylist()  # type: ignore[no-any-return]


def _timestamps_ms(arr: pa.Array) -> list[int | None]:
    if pa.types.is_timestamp(arr.type):
        us = arr.cast(pa.timestamp("us", tz=arr.type.tz)).cast(pa.int64())
        return pc.floor_divide(us, 1000).to_pylist()  # type: ignore[no-any-return]
    ms = pc.floor(pc.multiply(arr, 1000.0)).cast(pa.int64())  # double: seconds, as Spark casts
    return ms.to_pylist()  # type: ignore[no-any-return]


Record = tuple[
    str | None, bytes | None, bytes | None, list[tuple[str, bytes]], int | None, int | None
]


def records(batch: pa.RecordBatch, plan: WritePlan) -> Iterator[Record]:
    """(topic, key, value, headers, partition, timestamp_ms) for each row of an Arrow batch."""
    n = batch.num_rows

    def col(name: str) -> pa.Array:
        return batch.column(batch.schema.get_field_index(name))

    def none() -> Iterable[Any]:  # one iterator per column: zip draws from each
        return itertools.repeat(None, n)

    values = _bytes_list(col("value"))
    keys = _bytes_list(col("key")) if plan.has("key") else none()
    if plan.topic_option is not None:
        topics: Iterable[str | None] = itertools.repeat(plan.topic_option, n)
    else:
        topics = col("topic").to_pylist()
    partitions = col("partition").to_pylist() if plan.has("partition") else none()
    stamps = _timestamps_ms(col("timestamp")) if plan.has("timestamp") else none()
    headers: Iterable[Any] = col("headers").to_pylist() if plan.has("headers") else none()
    for topic, key, value, hs, part, ts in zip(
        topics, keys, values, headers, partitions, stamps, strict=True
    ):
        pairs = [] if not hs else [(h["key"], h["value"]) for h in hs]
        yield topic, key, value, pairs, part, ts


# ---------------------------------------------------------------- one task


class _Task:
    """One task's producer: topic checks, error capture, counts."""

    def __init__(self, opts: SinkOptions, cfg: dict[str, Any]) -> None:
        from kafka import KafkaProducer
        from kafka.errors import KafkaError

        self.opts = opts
        try:
            self.producer = KafkaProducer(partitioner=java_partitioner(), **cfg)
        except KafkaError as e:
            raise SinkError(_unreachable(opts.bootstrap, e)) from e
        self.failed: BaseException | None = None
        self.partitions: dict[str, int] = {}
        self.sent = 0
        self.first_topic: str | None = None

    def _fail(self, e: BaseException) -> None:
        if self.failed is None:
            self.failed = e

    def check(self) -> None:
        if self.failed is not None:
            raise SinkError(f"writing to Kafka failed: {self.failed!r}") from self.failed

    def send(self, rec: Record) -> None:
        topic, key, value, headers, part, ts = rec
        if topic is None:
            raise SinkError(
                "null topic present in the data. Use the topic option for setting a default topic."
            )
        if topic not in self.partitions:
            self.partitions[topic] = len(topic_partitions(self.producer, topic, self.opts))
            self.first_topic = self.first_topic or topic
        if part is not None and not 0 <= part < self.partitions[topic]:
            raise SinkError(
                f"Invalid partition given with record: {part} is not in the range "
                f"[0...{self.partitions[topic]}] of topic {topic!r}."
            )
        if key is None and value is None:
            raise SinkError(
                "a row with a null key and a null value: kafka-python cannot send it "
                "(give the row a key or a value)"
            )
        for _, hv in headers:
            if hv is None:
                raise SinkError(
                    "a header with a null value: kafka-python sends header values as bytes "
                    "(use an empty binary instead)"
                )
        future = self.producer.send(
            topic, value=value, key=key, headers=headers, partition=part, timestamp_ms=ts
        )
        future.add_errback(self._fail)
        self.sent += 1
        if self.failed is not None:
            self.check()

    def flush(self) -> None:
        self.producer.flush()
        self.check()

    def close(self) -> None:
        self.producer.close(timeout=10)


def topic_partitions(producer: Any, topic: str, opts: SinkOptions) -> set[int]:
    """The partitions of `topic`, or a `SinkError` saying it does not exist."""
    from kafka.errors import KafkaError

    try:
        parts = producer.partitions_for(topic)
    except KafkaError as e:
        parts, err = None, e
    else:
        err = None
    if not parts:
        raise SinkError(
            f"topic {topic!r} does not exist at kafka.bootstrap.servers={opts.bootstrap!r} and "
            f"was not created for the write (auto.create.topics.enable=false on the broker?): "
            f"create it first, e.g. kafka-topics.sh --create --topic {topic} ({err!r})"
        )
    return set(parts)


def _unreachable(bootstrap: str, e: BaseException) -> str:
    return (
        f"cannot reach Kafka at kafka.bootstrap.servers={bootstrap!r}: {e!r}; "
        "is the broker running and the address right?"
    )


def write_task(
    opts: SinkOptions,
    plan: WritePlan,
    batches: Iterator[pa.RecordBatch],
    *,
    prefix: str | None,
    batch_id: int | None,
    query_id: str | None = None,
    partition_id: int = 0,
) -> SinkCommitMessage:
    """Send one task's rows. Exactly once (`prefix` set): in a transaction left open for the
    driver; a streaming batch already committed by this writer is skipped."""
    cfg = opts.producer_kwargs()
    tid = None
    if prefix is not None:
        tid = transactional_id(prefix, partition_id)
        cfg["transactional_id"] = tid
    task = _Task(opts, cfg)
    try:
        if tid is not None:
            task.producer.init_transactions()  # fences older attempts, aborts what they left
            if batch_id is not None:
                done = last_committed_batch(cfg, tid)
                if done is not None and done >= batch_id:
                    for _ in batches:  # a replay of a committed micro-batch: write nothing
                        pass
                    return SinkCommitMessage(records=0, skipped=True)
            task.producer.begin_transaction()
        for batch in batches:
            for rec in records(batch, plan):
                task.send(rec)
        if tid is not None and batch_id is not None and task.first_topic is not None:
            task.producer.send_offsets_to_transaction(
                batch_marker(task.first_topic, batch_id, query_id), tid
            )
        task.flush()
        txn = handle_of(task.producer) if tid is not None and task.sent else None
        return SinkCommitMessage(records=task.sent, txn=txn)
    finally:
        task.close()


# ---------------------------------------------------------------- driver side


def plan_write(
    options: dict[str, str], schema: Any, overwrite: bool
) -> tuple[SinkOptions, WritePlan]:
    """Everything checked before a task runs: mode, options, columns, broker, topic."""
    from tidelog.analytics.options import parse_sink_options

    if overwrite:
        raise OptionError(
            "Save mode Overwrite not allowed for Kafka. Allowed save modes are Append and "
            'ErrorIfExists (default). (Python data sources take Append: use mode("append").)'
        )
    opts = parse_sink_options(options)
    plan = check_schema(schema, opts.topic)
    probe(opts)
    return opts, plan


def probe(opts: SinkOptions, timeout_ms: int = 10_000, topic_wait_ms: int = 5_000) -> None:
    """On the driver, before any task: the broker answers and the option topic exists (or
    the broker creates it within `topic_wait_ms`)."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    cfg = opts.producer_kwargs()
    cfg.pop("transactional_id", None)
    cfg.update(
        enable_idempotence=False,
        client_id="tidelog-sink-probe",
        max_block_ms=min(int(cfg.get("max_block_ms", topic_wait_ms)), topic_wait_ms),
        bootstrap_timeout_ms=min(int(cfg.get("bootstrap_timeout_ms", timeout_ms)), timeout_ms),
    )
    try:
        producer = KafkaProducer(**cfg)
    except KafkaError as e:
        raise SinkError(_unreachable(opts.bootstrap, e)) from e
    try:
        if opts.topic:
            topic_partitions(producer, opts.topic, opts)
    finally:
        producer.close(timeout=2)
    if opts.exactly_once:
        try:
            check_transactions(opts.producer_kwargs(), timeout_ms, opts.transactional_id_prefix)
        except Exception as e:
            raise SinkError(f"exactlyOnce=true: {e}") from e


def _task_context() -> tuple[int, int | None, str | None]:
    from pyspark import TaskContext

    tc = TaskContext.get()
    if tc is None:
        return 0, None, None
    batch = tc.getLocalProperty(BATCH_ID_PROPERTY)
    return (
        tc.partitionId(),
        None if batch is None else int(batch),
        tc.getLocalProperty(QUERY_ID_PROPERTY),
    )


def _handles(messages: list[Any]) -> list[TxnHandle]:
    return [m.txn for m in messages if isinstance(m, SinkCommitMessage) and m.txn is not None]


class TidelogBatchWriter(DataSourceArrowWriter):  # type: ignore[misc]
    """`df.write.format("tidelog").mode("append")`."""

    def __init__(self, opts: SinkOptions, plan: WritePlan) -> None:
        self.opts = opts
        self.plan = plan
        self.prefix: str | None = None
        if opts.exactly_once:
            self.prefix = opts.transactional_id_prefix or f"tidelog-{uuid.uuid4().hex[:16]}"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        partition_id, _, _ = _task_context()
        return write_task(
            self.opts, self.plan, iterator, prefix=self.prefix, batch_id=None,
            partition_id=partition_id,
        )  # fmt: skip

    def commit(self, messages: list[Any]) -> None:
        end_transactions(self.opts.producer_kwargs(), _handles(messages), commit=True)

    def abort(self, messages: list[Any]) -> None:
        end_transactions(self.opts.producer_kwargs(), _handles(messages), commit=False)


class TidelogStreamWriter(DataSourceStreamArrowWriter):  # type: ignore[misc]
    """`df.writeStream.format("tidelog")`: each micro-batch's tasks, then commit(batchId)."""

    def __init__(self, opts: SinkOptions, plan: WritePlan) -> None:
        self.opts = opts
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        partition_id, batch_id, query_id = _task_context()
        prefix = None
        if self.opts.exactly_once:
            if batch_id is None or query_id is None:
                raise SinkError("exactlyOnce=true: the task has no micro-batch id from Spark")
            prefix = self.opts.transactional_id_prefix or f"tidelog-{query_id}"
        return write_task(
            self.opts, self.plan, iterator, prefix=prefix, batch_id=batch_id,
            query_id=query_id, partition_id=partition_id,
        )  # fmt: skip

    def commit(self, messages: list[Any], batchId: int) -> None:
        end_transactions(self.opts.producer_kwargs(), _handles(messages), commit=True)

    def abort(self, messages: list[Any], batchId: int) -> None:
        end_transactions(self.opts.producer_kwargs(), _handles(messages), commit=False)
