"""Produce (key 0) v3-12: append record batches, answer with offsets.

The records are never decoded here: storage validates each batch header and CRC, assigns the
offsets and writes. acks=0 sends no answer (but closes the connection when an append failed, as
Kafka does, so the client refreshes its metadata). acks=1 and acks=-1 answer once the HW covers
the appended batch, or with REQUEST_TIMED_OUT after ``timeout_ms``: at once when the HW follows
the LEO, and after the group-commit fsync covering the batch when ``flush.messages=1`` holds the
HW back (tidelog's default: an acknowledgement means "on disk").

Kafka divergence: Kafka answers acks=1 right after the leader's append; on a single node with
the durable default that would acknowledge records a power cut can still take, so acks=1 waits
for the fsync as acks=-1 does (a topic with ``flush.messages`` > 1 answers acks=1 at once).

A batch refused for some of its records (keyless records on a compacted topic) answers
INVALID_RECORD with ``record_errors`` naming each refused record's index and Kafka's message
(KIP-467, v8+), so clients fail only those records (librdkafka: INVALID_RECORD for them,
_INVALID_DIFFERENT_RECORD for the others of the batch).

Idempotent producers: storage checks each batch's producer id, epoch and sequence before
writing (``storage/producer_state.py``); a retried batch comes back as an ``AppendInfo``
with its original offsets and is answered as a success, as Kafka does.

One path: ``append_partition`` (one partition's append and its outcome) and ``_encode_one``
(one partition's answer) are the core that both ``handle`` and ``answer_at_once`` (the
router's coroutine-free path for one batch of one partition) call.

Off the event loop: a batch for a compacted topic that is compressed or at least
``KEY_CHECK_ON_LOOP_BYTES`` (its key check decompresses it and reads every record), and any batch
of ``BIG_APPEND_BYTES`` or more, is appended in a worker thread through
``broker.append_queue`` (``broker/partition_appends.py``), which keeps the appends of each
partition in arrival order; ``answer_at_once`` steps aside for them and for any partition with
such an append queued, and ``handle`` queues them (in request order, before any await).

Transactional batches (attribute bit 4) are checked first against the transaction coordinator
(``_check_producer_state``, Kafka's transaction verification): the partition must have been
added to the producer's open transaction (else INVALID_TXN_STATE) by its current epoch (else
INVALID_PRODUCER_EPOCH). The check is synchronous, so a transactional batch takes
``answer_at_once`` like any other.

v11 only adds the error TRANSACTION_ABORTABLE (never sent here). v12 is transaction version 2
(KIP-890 part 2): a transactional batch for a partition its transaction does not hold yet adds
it to the transaction itself (``_implicit_add``: the coordinator's AddPartitionsToTxn, which
Kafka's partition leader sends to the coordinator), then is appended. Such a request goes
through ``handle``; the requests of the same producer id wait for each other (the
coordinator's ``produce_gates``) so pipelined batches are appended in the order they were sent.
Only partitions that exist, are not internal and may be written are added; without WRITE on
the transactional id the batches answer TRANSACTIONAL_ID_AUTHORIZATION_FAILED. Coordinator
errors become what Kafka answers a producer: PRODUCER_FENCED -> INVALID_PRODUCER_EPOCH, and
the retriable ones (CONCURRENT_TRANSACTIONS, COORDINATOR_*, NOT_COORDINATOR) ->
NOT_ENOUGH_REPLICAS.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from kio.serial.readers import tz_aware_from_i64
from kio.static.primitive import i64

from tidelog.broker.handlers.base import BrokerView, Close, HandlerSpec, RawBody, RequestContext
from tidelog.broker.security.access import TOPIC, TRANSACTIONAL_ID, Operation, allowed
from tidelog.broker.topics import INTERNAL_TOPICS, LEADER_EPOCH
from tidelog.protocol.errors import ErrorCode, error_code_for
from tidelog.protocol.fast.answers import (
    ProducePartitionAnswer,
    encode_produce_body,
    encode_produce_one,
    frame_answer,
)
from tidelog.protocol.legacy_produce import encode_unsupported_body, parse_topic_partitions
from tidelog.protocol.schema import build, response_types
from tidelog.storage.batch import (
    ATTRIBUTES_LOW_OFFSET,
    BATCH_HEADER_SIZE,
    PRODUCER_ID_OFFSET,
    PRODUCER_STRUCT,
    TRANSACTIONAL_MASK,
)
from tidelog.storage.errors import StorageError

API_KEY = 0
log = logging.getLogger("tidelog.produce")

#: A compacted topic's key check of an uncompressed batch at least this large runs in a worker.
KEY_CHECK_ON_LOOP_BYTES = 64 * 1024
#: Any batch at least this large is appended in a worker (CRC and write of megabytes).
BIG_APPEND_BYTES = 4 * 1024 * 1024
_COMPRESSION_MASK = 0x07
_BATCH_LENGTH_OFFSET = 8


@dataclass(slots=True)
class _Result:
    """One partition's outcome (mutable while acks=-1 waits)."""

    topic: str
    partition: int
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    base_offset: int = -1
    next_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    #: KIP-467: the records of the batch that were refused, ``(batch index, message)``.
    record_errors: tuple[tuple[int, str], ...] = ()


def _check_producer_state(
    broker: BrokerView, topic: str, partition: int, records: bytes
) -> tuple[ErrorCode, str] | None:
    """Transactional batches must belong to an open transaction holding this partition; None
    means "append". Idempotence (sequence and epoch checks, duplicates) is done by storage.
    """
    if len(records) < BATCH_HEADER_SIZE or not records[ATTRIBUTES_LOW_OFFSET] & TRANSACTIONAL_MASK:
        return None
    producer_id, epoch = PRODUCER_STRUCT.unpack_from(records, PRODUCER_ID_OFFSET)
    coordinator: Any = getattr(broker, "transactions", None)
    if coordinator is None:
        return ErrorCode.invalid_txn_state, "no transaction coordinator"
    md = coordinator.by_producer_id(producer_id)
    if md is not None and epoch < md.producer_epoch:
        return (
            ErrorCode.invalid_producer_epoch,
            f"producer {producer_id} epoch {epoch} is fenced by epoch {md.producer_epoch}",
        )
    if not coordinator.partition_in_transaction(producer_id, epoch, topic, partition):
        return (
            ErrorCode.invalid_txn_state,
            f"{topic}-{partition} was not added to the open transaction of producer "
            f"{producer_id} (AddPartitionsToTxn first)",
        )
    return None


def _any_compressed(records: bytes | memoryview) -> bool:
    """Whether a batch of ``records`` is compressed (headers only; a damaged length stops the
    walk, validation reports it)."""
    position = 0
    end = len(records) - BATCH_HEADER_SIZE
    while 0 <= position <= end:
        if records[position + ATTRIBUTES_LOW_OFFSET] & _COMPRESSION_MASK:
            return True
        length = int.from_bytes(records[position + _BATCH_LENGTH_OFFSET : position + 12], "big")
        if length <= 0:
            return False
        position += 12 + length
    return False


def _needs_worker(partition_log: Any, records: bytes | memoryview) -> bool:
    """Whether appending ``records`` is too much work for the event loop (see the module)."""
    size = len(records)
    if size >= BIG_APPEND_BYTES:
        return True
    if not partition_log.config.compact_enabled:
        return False
    return size >= KEY_CHECK_ON_LOOP_BYTES or _any_compressed(records)


#: The first Produce version whose transactional batches add their partition themselves.
IMPLICIT_ADD_SINCE = 12
#: Coordinator errors a producer retries on: answered NOT_ENOUGH_REPLICAS (as Kafka does).
_RETRIABLE_ADD_ERRORS = frozenset(
    {
        ErrorCode.concurrent_transactions,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
    }
)


def _transactional_producer(records: bytes | None) -> tuple[int, int] | None:
    """``(producer id, epoch)`` of a transactional batch, else None."""
    if (
        records is None
        or len(records) < BATCH_HEADER_SIZE
        or not records[ATTRIBUTES_LOW_OFFSET] & TRANSACTIONAL_MASK
    ):
        return None
    producer_id, epoch = PRODUCER_STRUCT.unpack_from(records, PRODUCER_ID_OFFSET)
    return int(producer_id), int(epoch)


def _gates(broker: BrokerView) -> dict[int, asyncio.Future[None]] | None:
    """Per producer id, the last request adding partitions implicitly (None: no coordinator)."""
    coordinator: Any = getattr(broker, "transactions", None)
    return None if coordinator is None else coordinator.produce_gates  # type: ignore[no-any-return]


def _needs_implicit_add(broker: BrokerView, topic: str, partition: int, records: bytes) -> bool:
    """v12+: a transactional batch whose partition is not in its transaction yet, or whose
    producer has an implicit add in flight (to keep the order of its requests)."""
    producer = _transactional_producer(records)
    if producer is None:
        return False
    coordinator: Any = getattr(broker, "transactions", None)
    if coordinator is None:
        return False
    return producer[0] in coordinator.produce_gates or not coordinator.partition_in_transaction(
        producer[0], producer[1], topic, partition
    )


async def _implicit_add(
    ctx: RequestContext, request: Any
) -> tuple[asyncio.Future[None] | None, list[int], dict[tuple[str, int], tuple[ErrorCode, str]]]:
    """Produce v12+: add the partitions of the request's transactional batches to their
    transaction (waiting first for the earlier such requests of the same producer ids).

    Returns the gate to release once the appends are done, its producer ids, and the
    partitions refused with the error to answer."""
    broker = ctx.broker
    transactional_id: str | None = request.transactional_id
    coordinator: Any = getattr(broker, "transactions", None)
    wanted: dict[tuple[int, int], list[tuple[str, int]]] = {}
    for topic in request.topic_data:
        if topic.name in INTERNAL_TOPICS or not allowed(
            ctx, Operation.WRITE, TOPIC, topic.name, log_denial=False
        ):
            continue  # refused by the append
        for p in topic.partition_data:
            producer = _transactional_producer(p.records)
            if producer is not None and broker.topics.get_log(topic.name, int(p.index)):
                wanted.setdefault(producer, []).append((topic.name, int(p.index)))
    if coordinator is None or not wanted:
        return None, [], {}
    if transactional_id is not None and not allowed(
        ctx, Operation.WRITE, TRANSACTIONAL_ID, transactional_id
    ):
        denied = (ErrorCode.transactional_id_authorization_failed, "WRITE on the transactional id")
        return None, [], {tp: denied for tps in wanted.values() for tp in tps}
    gates: dict[int, asyncio.Future[None]] = coordinator.produce_gates
    producer_ids = sorted({pid for pid, _ in wanted})
    earlier = [gates[pid] for pid in producer_ids if pid in gates]
    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    for pid in producer_ids:
        gates[pid] = gate
    refused: dict[tuple[str, int], tuple[ErrorCode, str]] = {}
    try:
        for previous in earlier:
            await asyncio.wait({previous})  # never cancels ``previous``
        for (producer_id, epoch), partitions in wanted.items():
            if all(
                coordinator.partition_in_transaction(producer_id, epoch, t, p)
                for t, p in partitions
            ):
                continue
            if transactional_id is None:
                continue  # the append's check answers INVALID_TXN_STATE
            error = await coordinator.add_partitions(
                transactional_id, producer_id, epoch, partitions, client_txn_version=2
            )
            if error is ErrorCode.none:
                continue
            if error is ErrorCode.producer_fenced:
                error = ErrorCode.invalid_producer_epoch
            elif error in _RETRIABLE_ADD_ERRORS:
                error = ErrorCode.not_enough_replicas
            message = f"the partition could not be added to the transaction: {error.name}"
            for tp in partitions:
                refused[tp] = (error, message)
    except BaseException:
        _open_gate(gates, producer_ids, gate)
        raise
    return gate, producer_ids, refused


def _open_gate(
    gates: dict[int, asyncio.Future[None]], producer_ids: list[int], gate: asyncio.Future[None]
) -> None:
    if not gate.done():
        gate.set_result(None)
    for pid in producer_ids:
        if gates.get(pid) is gate:
            del gates[pid]


def append_partition(
    broker: BrokerView, topic: str, partition: int, records: bytes | None
) -> _Result | asyncio.Future[_Result]:
    """Append ``records`` to one partition (the core of Produce): the outcome as data, or a
    future of it when the append was queued for a worker thread (``broker.append_queue``)."""
    partition_log = broker.topics.get_log(topic, partition)
    if partition_log is None:
        return _Result(topic, partition, ErrorCode.unknown_topic_or_partition)
    if topic in INTERNAL_TOPICS:
        return _Result(
            topic,
            partition,
            ErrorCode.invalid_topic_exception,
            f"Cannot append to internal topic {topic}",
        )
    data = records if records is not None else b""
    refused = _check_producer_state(broker, topic, partition, data)
    if refused is not None:
        return _Result(topic, partition, refused[0], refused[1])
    queue = broker.append_queue
    key = (topic, partition)
    in_worker = _needs_worker(partition_log, data)
    if in_worker or queue.busy(key):
        hw = [0]

        def work() -> Any:
            hw[0] = partition_log.high_watermark
            return partition_log.append(data, now_ms=broker.clock(), leader_epoch=LEADER_EPOCH)

        def finish(outcome: Any) -> _Result:
            return _appended(broker, partition_log, topic, partition, len(data), hw[0], outcome)

        return queue.submit(key, work, finish, in_worker=in_worker)
    hw_before = partition_log.high_watermark
    try:
        info: Any = partition_log.append(data, now_ms=broker.clock(), leader_epoch=LEADER_EPOCH)
    except StorageError as exc:
        info = exc
    return _appended(broker, partition_log, topic, partition, len(data), hw_before, info)


def _appended(
    broker: BrokerView,
    partition_log: Any,
    topic: str,
    partition: int,
    size: int,
    hw_before: int,
    info: Any,
) -> _Result:
    """One append's outcome (an ``AppendInfo`` or the exception it raised) as a ``_Result``;
    wakes HW waiters and schedules the flush (``after_append``) after a success."""
    if isinstance(info, BaseException):
        if not isinstance(info, StorageError):
            raise info
        log.info("produce to %s-%d refused: %s %s", topic, partition, info.error_name, info)
        return _Result(
            topic,
            partition,
            error_code_for(info.error_name),
            str(info) or None,
            record_errors=getattr(info, "record_errors", ()),
        )
    broker.metrics.topic_in(topic, info.last_offset - info.first_offset + 1, size)
    broker.after_append(partition_log, hw_before)
    return _Result(
        topic,
        partition,
        ErrorCode.none,
        None,
        info.first_offset,
        info.last_offset + 1,
        info.log_append_time_ms,
        info.log_start_offset,
    )


def _covered(broker: BrokerView, r: _Result) -> bool:
    """acks=-1: whether the partition's HW covers the appended batch already."""
    partition_log = broker.topics.get_log(r.topic, r.partition)
    return partition_log is None or partition_log.high_watermark >= r.next_offset


async def _await_high_watermark(
    ctx: RequestContext, results: list[_Result], timeout_s: float
) -> None:
    """acks=-1: wait until each appended partition's HW covers its batch."""
    broker = ctx.broker
    waits = []
    pending = []
    for r in results:
        if r.error != ErrorCode.none or _covered(broker, r):
            continue
        partition_log = broker.topics.get_log(r.topic, r.partition)

        def covered(pl: Any = partition_log, target: int = r.next_offset) -> bool:
            return bool(pl.high_watermark >= target)

        pending.append(r)
        waits.append(broker.partitions.wait_until((r.topic, r.partition), covered, timeout_s))
    if not waits:
        return
    done = await asyncio.gather(*waits)
    for r, ok in zip(pending, done, strict=True):
        if not ok:
            r.error = ErrorCode.request_timed_out
            r.message = "the high watermark did not reach the batch before the request timeout"


def _response(ctx: RequestContext, request: Any, results: list[_Result]) -> Any:
    types = response_types(API_KEY, ctx.api_version)
    by_topic: dict[str, list[Any]] = {}
    for r in results:
        ok = r.error == ErrorCode.none
        by_topic.setdefault(r.topic, []).append(
            build(
                types.PartitionProduceResponse,
                index=r.partition,
                error_code=r.error,
                base_offset=r.base_offset if ok else -1,
                log_append_time=(
                    tz_aware_from_i64(i64(r.log_append_time_ms))
                    if ok and r.log_append_time_ms >= 0
                    else None
                ),
                log_start_offset=r.log_start_offset if ok else -1,
                record_errors=tuple(
                    build(
                        types.BatchIndexAndErrorMessage,
                        batch_index=i,
                        batch_index_error_message=m,
                    )
                    for i, m in r.record_errors
                ),
                error_message=r.message,
            )
        )
    return build(
        types.ProduceResponse,
        responses=tuple(
            types.TopicProduceResponse(name=name, partition_responses=tuple(parts))
            for name, parts in by_topic.items()
        ),
        throttle_time=timedelta(0),
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    acks = int(request.acks)
    results: list[_Result] = []
    if acks not in (0, 1, -1):
        for topic in request.topic_data:
            for p in topic.partition_data:
                results.append(_Result(topic.name, int(p.index), ErrorCode.invalid_required_acks))
        return _response(ctx, request, results)
    # Appends happen (or are queued, broker.append_queue) synchronously, in request order,
    # before any await: pipelined produce requests on one connection are appended in the order
    # they were sent. (v12+ implicit adds await first, behind a gate that keeps the order of
    # the producer's requests.)
    gate: asyncio.Future[None] | None = None
    gated: list[int] = []
    refused: dict[tuple[str, int], tuple[ErrorCode, str]] = {}
    if ctx.api_version >= IMPLICIT_ADD_SINCE:
        gate, gated, refused = await _implicit_add(ctx, request)
    outcomes: list[_Result | asyncio.Future[_Result]] = []
    try:
        _append_all(ctx, request, outcomes, refused)
    finally:
        if gate is not None:
            gates = _gates(ctx.broker)
            if gates is not None:
                _open_gate(gates, gated, gate)
    for outcome in outcomes:
        results.append(await outcome if isinstance(outcome, asyncio.Future) else outcome)
    if acks == 0:
        failed = [r for r in results if r.error != ErrorCode.none]
        if failed:
            return Close(
                f"acks=0 produce failed for {failed[0].topic}-{failed[0].partition}: "
                f"{failed[0].error.name}"
            )
        return None
    # acks=1 or -1: the HW moves at once, or after the fsync (flush.messages=1).
    timeout_s = max(request.timeout.total_seconds(), 0.0)
    await _await_high_watermark(ctx, results, timeout_s)
    return _lean_response(ctx, results)


def _append_all(
    ctx: RequestContext,
    request: Any,
    results: list[_Result | asyncio.Future[_Result]],
    refused: dict[tuple[str, int], tuple[ErrorCode, str]],
) -> None:
    authorizer = ctx.broker.authorizer
    for topic in request.topic_data:
        if authorizer is not None and not allowed(ctx, Operation.WRITE, TOPIC, topic.name):
            for p in topic.partition_data:
                results.append(
                    _Result(topic.name, int(p.index), ErrorCode.topic_authorization_failed)
                )
            continue
        for p in topic.partition_data:
            index = int(p.index)
            why = refused.get((topic.name, index))
            if why is not None:
                results.append(_Result(topic.name, index, why[0], why[1]))
            else:
                results.append(append_partition(ctx.broker, topic.name, index, p.records))


def _lean_response(ctx: RequestContext, results: list[_Result]) -> RawBody:
    """The answer through protocol.fast.answers (the bytes kio's writer writes, for less)."""
    if len(results) == 1:  # what producers send most: one batch for one partition
        return RawBody((_encode_one(ctx.api_version, results[0]),))
    by_topic: dict[str, list[ProducePartitionAnswer]] = {}
    for r in results:
        ok = r.error == ErrorCode.none
        by_topic.setdefault(r.topic, []).append(
            ProducePartitionAnswer(
                index=r.partition,
                error_code=int(r.error),
                base_offset=r.base_offset if ok else -1,
                log_append_time_ms=r.log_append_time_ms if ok else -1,
                log_start_offset=r.log_start_offset if ok else -1,
                error_message=r.message if ctx.api_version >= 8 else None,
                record_errors=r.record_errors if ctx.api_version >= 8 else (),
            )
        )
    return RawBody((encode_produce_body(ctx.api_version, list(by_topic.items())),))


def _encode_one(version: int, r: _Result) -> bytes:
    """The answer body of a one-partition request (``protocol.fast.answers``: kio's bytes)."""
    message = r.message if version >= 8 else None
    if r.record_errors and version >= 8:  # KIP-467: the refused records of the batch
        answer = ProducePartitionAnswer(
            r.partition, int(r.error), -1, -1, -1, r.message, r.record_errors
        )
        return encode_produce_body(version, [(r.topic, [answer])])
    if r.error == ErrorCode.none:
        return encode_produce_one(
            version,
            r.topic,
            r.partition,
            0,
            r.base_offset,
            r.log_append_time_ms,
            r.log_start_offset,
            message,
        )
    return encode_produce_one(version, r.topic, r.partition, int(r.error), -1, -1, -1, message)


def answer_at_once(
    broker: BrokerView, version: int, correlation_id: int, request: Any
) -> bytes | asyncio.Future[bytes] | None:
    """The framed answer of the request most producers send, without a coroutine or a context.

    One topic, one partition, acks 1 or -1: the same core as ``handle`` (``append_partition``,
    ``_encode_one``), in a fraction of the calls. When the HW waits for the fsync
    (``flush.messages=1``), the answer is encoded now and held (a future) until the
    group-commit fsync covering the batch returns. Anything else returns None and goes through
    ``handle``.
    """
    acks = request.acks
    if acks != 1 and acks != -1:
        return None
    topics = request.topic_data
    if len(topics) != 1:
        return None
    topic = topics[0]
    partitions = topic.partition_data
    if len(partitions) != 1:
        return None
    index, records = partitions[0]
    if records is None:
        return None
    queue = broker.append_queue
    if queue.busy((topic.name, index)):
        return None  # queued behind an append in a worker: ``handle`` awaits it
    partition_log = broker.topics.get_log(topic.name, index)
    if partition_log is not None and _needs_worker(partition_log, records):
        return None  # appended in a worker thread: ``handle``
    if version >= IMPLICIT_ADD_SINCE and _needs_implicit_add(broker, topic.name, index, records):
        return None  # ``handle`` adds the partition to the transaction first
    result = append_partition(broker, topic.name, index, records)
    assert not isinstance(result, asyncio.Future)  # nothing was queued: checked just above
    answer = frame_answer(correlation_id, version >= 9, _encode_one(version, result))
    if result.error != ErrorCode.none or _covered(broker, result):
        return answer
    # Durable acknowledgement: answer once the group-commit fsync covers the batch.
    loop = asyncio.get_running_loop()
    held: asyncio.Future[bytes] = broker.held_answers.hold(
        (result.topic, result.partition),
        result.next_offset,
        loop.time() + max(request.timeout.total_seconds(), 0.0),
        answer,
        functools.partial(_error_answer, version, correlation_id, result.topic, result.partition),
        loop,
    )
    return held


def _error_answer(
    version: int, correlation_id: int, topic: str, partition: int, error_code: int, message: str
) -> bytes:
    """One partition's framed error answer (a held answer that timed out or failed)."""
    failed = _Result(topic, partition, ErrorCode(error_code), message)
    return frame_answer(correlation_id, version >= 9, _encode_one(version, failed))


def error_response(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    """Every partition of the request carries ``code``."""
    results = [
        _Result(topic.name, int(p.index), code)
        for topic in request.topic_data
        for p in topic.partition_data
    ]
    return _response(ctx, request, results)


def refuse_removed_version(frame: bytes | memoryview, api_version: int) -> bytes:
    """Produce v0-2: advertised for librdkafka's sake, answered UNSUPPORTED_VERSION."""
    return encode_unsupported_body(api_version, parse_topic_partitions(frame))


# Kafka 4 lists Produce from v0 in ApiVersions although it serves v3+ only (KAFKA-18659):
# librdkafka <= 2.10 (kcat's 2.0.2 among them) silently stops compressing with gzip, snappy and
# lz4 when Produce v0 is not listed.
SPEC = HandlerSpec(
    api_key=API_KEY,
    name="Produce",
    min_version=3,
    max_version=12,
    handle=handle,
    advertised_min_version=0,
    refuse=refuse_removed_version,
    at_once=answer_at_once,
)
