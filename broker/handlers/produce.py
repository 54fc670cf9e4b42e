"""Produce (key 0) v3-10: append record batches, answer with offsets.

The records are never decoded here: storage validates each batch header and CRC, assigns the
offsets and writes. acks=0 sends no answer (but closes the connection when an append failed, as
Kafka does, so the client refreshes its metadata); acks=1 answers once appended; acks=-1 answers
once the HW covers the appended batch (at once, unless a flush policy holds the HW back until the
group-commit fsync), or with REQUEST_TIMED_OUT after ``timeout_ms``.

A batch refused for some of its records (keyless records on a compacted topic) answers
INVALID_RECORD with ``record_errors`` naming each refused record's index and Kafka's message
(KIP-467, v8+), so clients fail only those records (librdkafka: INVALID_RECORD for them,
_INVALID_DIFFERENT_RECORD for the others of the batch).

Idempotent producers: storage checks each batch's producer id, epoch and sequence before
writing (``storage/producer_state.py``); a retried batch comes back as an ``AppendInfo``
with its original offsets and is answered as a success, as Kafka does.
Transactions (not supported) would plug in at ``_check_producer_state`` (and would make
``answer_at_once``, the coroutine-free path for one batch of one partition, step aside for
transactional batches).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from kio.serial.readers import tz_aware_from_i64
from kio.static.primitive import i64

from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.router import Close, RawBody
from tidelog.broker.topics import INTERNAL_TOPICS, LEADER_EPOCH
from tidelog.protocol.errors import ErrorCode, error_code_for
from tidelog.protocol.lean import (
    ProducePartitionAnswer,
    encode_produce_body,
    encode_produce_one,
    frame_answer,
)
from tidelog.protocol.legacy_produce import encode_unsupported_body, parse_topic_partitions
from tidelog.protocol.schema import build, response_types
from tidelog.storage.errors import StorageError

API_KEY = 0
log = logging.getLogger("tidelog.produce")


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
    ctx: RequestContext, topic: str, partition: int, records: bytes
) -> tuple[ErrorCode, str] | None:
    """Seam for transactional producer checks; None means "append".

    Idempotence (sequence and epoch checks, duplicates) is done by storage.
    """
    return None


def _append(ctx: RequestContext, topic: str, partition: int, records: bytes | None) -> _Result:
    result = _Result(topic, partition)
    broker = ctx.broker
    partition_log = broker.topics.get_log(topic, partition)
    if partition_log is None:
        result.error = ErrorCode.unknown_topic_or_partition
        return result
    if topic in INTERNAL_TOPICS:
        result.error = ErrorCode.invalid_topic_exception
        result.message = f"Cannot append to internal topic {topic}"
        return result
    data = records if records is not None else b""
    refused = _check_producer_state(ctx, topic, partition, data)
    if refused is not None:
        result.error, result.message = refused
        return result
    hw_before = partition_log.high_watermark
    try:
        info = partition_log.append(data, now_ms=broker.clock(), leader_epoch=LEADER_EPOCH)
    except StorageError as exc:
        result.error = error_code_for(exc.error_name)
        result.message = str(exc) or None
        result.record_errors = getattr(exc, "record_errors", ())
        log.info("produce to %s-%d refused: %s %s", topic, partition, exc.error_name, exc)
        return result
    broker.after_append(partition_log, hw_before)
    result.base_offset = info.first_offset
    result.next_offset = info.last_offset + 1
    result.log_append_time_ms = info.log_append_time_ms
    result.log_start_offset = info.log_start_offset
    return result


async def _await_high_watermark(
    ctx: RequestContext, results: list[_Result], timeout_s: float
) -> None:
    """acks=-1: wait until each appended partition's HW covers its batch."""
    broker = ctx.broker
    waits = []
    pending = []
    for r in results:
        if r.error != ErrorCode.none:
            continue
        partition_log = broker.topics.get_log(r.topic, r.partition)
        if partition_log is None or partition_log.high_watermark >= r.next_offset:
            continue

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
    # Appends happen synchronously, in request order, before any await: pipelined produce
    # requests on one connection are appended in the order they were sent.
    for topic in request.topic_data:
        for p in topic.partition_data:
            results.append(_append(ctx, topic.name, int(p.index), p.records))
    if acks == 0:
        failed = [r for r in results if r.error != ErrorCode.none]
        if failed:
            return Close(
                f"acks=0 produce failed for {failed[0].topic}-{failed[0].partition}: "
                f"{failed[0].error.name}"
            )
        return None
    if acks == -1:
        timeout_s = max(request.timeout.total_seconds(), 0.0)
        await _await_high_watermark(ctx, results, timeout_s)
    return _lean_response(ctx, results)


def _lean_response(ctx: RequestContext, results: list[_Result]) -> RawBody:
    """The answer through protocol.lean (same bytes as kio's writer, a fraction of the work)."""
    if len(results) == 1 and not results[0].record_errors:  # most common: one partition
        r = results[0]
        if r.error == ErrorCode.none:
            body = encode_produce_one(
                ctx.api_version,
                r.topic,
                r.partition,
                0,
                r.base_offset,
                r.log_append_time_ms,
                r.log_start_offset,
                r.message if ctx.api_version >= 8 else None,
            )
        else:
            body = encode_produce_one(
                ctx.api_version,
                r.topic,
                r.partition,
                int(r.error),
                -1,
                -1,
                -1,
                r.message if ctx.api_version >= 8 else None,
            )
        return RawBody((body,))
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


def answer_at_once(
    broker: Any, version: int, correlation_id: int, request: Any
) -> bytes | Coroutine[Any, Any, Any] | None:
    """The framed answer of the request most producers send, without a coroutine or a context.

    One topic, one partition, acks=1, or acks=-1 on a topic whose HW moves with the LEO: the
    append and the answer are what ``handle`` does for it (same bytes, same errors), in a
    fraction of the calls. Anything else returns None and goes through ``handle``.
    """
    acks = request.acks
    if (acks != 1 and acks != -1) or request.transactional_id is not None:
        return None
    topics = request.topic_data
    if len(topics) != 1:
        return None
    topic = topics[0]
    partitions = topic.partition_data
    if len(partitions) != 1:
        return None
    name = topic.name
    index, records = partitions[0]
    partition_log = broker.topics.get_log(name, index)
    if partition_log is None or records is None or name in INTERNAL_TOPICS:
        return None
    if acks == -1 and partition_log.config.holds_high_watermark:
        return None
    hw_before = partition_log.high_watermark
    try:
        info = partition_log.append(records, now_ms=broker.clock(), leader_epoch=LEADER_EPOCH)
    except StorageError as exc:
        log.info("produce to %s-%d refused: %s %s", name, index, exc.error_name, exc)
        record_errors = getattr(exc, "record_errors", ())
        if record_errors and version >= 8:
            answer = ProducePartitionAnswer(
                index, int(error_code_for(exc.error_name)), -1, -1, -1, str(exc), record_errors
            )
            body = encode_produce_body(version, [(name, [answer])])
            return frame_answer(correlation_id, version >= 9, body)
        body = encode_produce_one(
            version,
            name,
            index,
            int(error_code_for(exc.error_name)),
            -1,
            -1,
            -1,
            (str(exc) or None) if version >= 8 else None,
        )
        return frame_answer(correlation_id, version >= 9, body)
    broker.after_append(partition_log, hw_before)
    if acks == -1 and partition_log.high_watermark <= info.last_offset:  # not expected
        result = _Result(
            name,
            index,
            base_offset=info.first_offset,
            next_offset=info.last_offset + 1,
            log_append_time_ms=info.log_append_time_ms,
            log_start_offset=info.log_start_offset,
        )
        return _answer_later(broker, version, correlation_id, request, result)
    body = encode_produce_one(
        version,
        name,
        index,
        0,
        info.first_offset,
        info.log_append_time_ms,
        info.log_start_offset,
    )
    return frame_answer(correlation_id, version >= 9, body)


async def _answer_later(
    broker: Any, version: int, correlation_id: int, request: Any, result: _Result
) -> RawBody:
    """acks=-1 whose HW did not cover the batch at once: wait as ``handle`` does."""
    ctx = RequestContext(API_KEY, version, correlation_id, None, "", -1, broker)
    await _await_high_watermark(ctx, [result], max(request.timeout.total_seconds(), 0.0))
    return _lean_response(ctx, [result])


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
    max_version=10,
    handle=handle,
    advertised_min_version=0,
    refuse=refuse_removed_version,
    at_once=answer_at_once,
)
