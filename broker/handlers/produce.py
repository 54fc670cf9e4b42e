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

Where the parts live (as Fetch's ``fetch.py``, ``broker/fetch_messages.py`` and
``broker/delayed_fetch.py``):
- ``broker/append_records.py``: one partition's append and its outcome as data
  (``append_partition``: in a worker thread for big or compacted-and-compressed batches), and
  the wait for the HW (``await_high_watermark``);
- ``broker/txn/add_partitions_to_txn_manager.py``: transaction verification of transactional
  batches and, v12+, the implicit add of their partitions, in the order of the producer's
  requests;
- here: ``handle``, ``answer_at_once`` (the router's coroutine-free path for one batch of one
  partition, which steps aside for worker appends and implicit adds) and the encoders
  (``_encode_one``: one partition's answer, shared by both paths).

Appends happen (or are queued) synchronously, in request order, before any await, so pipelined
requests of a connection are appended in the order they were sent. v11 only adds the error
TRANSACTION_ABORTABLE (never sent here). v12 is transaction version 2 (KIP-890 part 2): the
partitions of its transactional batches that may be written (they exist, are not internal, WRITE
on the topic) are added to their transactions first; without WRITE on the transactional id they
answer TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from kio.serial.readers import tz_aware_from_i64
from kio.static.primitive import i64

from tidelog.broker.append_records import (
    ProducePartitionResult,
    append_on_loop,
    append_partition,
    await_high_watermark,
    needs_worker,
)
from tidelog.broker.handlers.base import BrokerView, HandlerSpec, RequestContext
from tidelog.broker.loop_lag import running_loop
from tidelog.broker.request_channel import Close, RawBody
from tidelog.broker.security.access import TOPIC, TRANSACTIONAL_ID, Operation, allowed
from tidelog.broker.topics import INTERNAL_TOPICS
from tidelog.broker.txn.add_partitions_to_txn_manager import (
    NOTHING_ADDED,
    ImplicitAdd,
    transactional_producer,
)
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.fast.answers import (
    ProducePartitionAnswer,
    encode_produce_body,
    encode_produce_one,
    frame_answer,
)
from tidelog.protocol.legacy_produce import encode_unsupported_body, parse_topic_partitions
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.produce.v3.request import ProduceRequest as _ProduceRequestV3
    from kio.schema.produce.v3.response import ProduceResponse as _ProduceResponseV3
    from kio.schema.produce.v4.request import ProduceRequest as _ProduceRequestV4
    from kio.schema.produce.v4.response import ProduceResponse as _ProduceResponseV4
    from kio.schema.produce.v5.request import ProduceRequest as _ProduceRequestV5
    from kio.schema.produce.v5.response import ProduceResponse as _ProduceResponseV5
    from kio.schema.produce.v6.request import ProduceRequest as _ProduceRequestV6
    from kio.schema.produce.v6.response import ProduceResponse as _ProduceResponseV6
    from kio.schema.produce.v7.request import ProduceRequest as _ProduceRequestV7
    from kio.schema.produce.v7.response import ProduceResponse as _ProduceResponseV7
    from kio.schema.produce.v8.request import ProduceRequest as _ProduceRequestV8
    from kio.schema.produce.v8.response import ProduceResponse as _ProduceResponseV8
    from kio.schema.produce.v9.request import ProduceRequest as _ProduceRequestV9
    from kio.schema.produce.v9.response import ProduceResponse as _ProduceResponseV9
    from kio.schema.produce.v10.request import ProduceRequest as _ProduceRequestV10
    from kio.schema.produce.v10.response import ProduceResponse as _ProduceResponseV10
    from kio.schema.produce.v11.request import ProduceRequest as _ProduceRequestV11
    from kio.schema.produce.v11.response import ProduceResponse as _ProduceResponseV11
    from kio.schema.produce.v12.request import ProduceRequest as _ProduceRequestV12
    from kio.schema.produce.v12.response import ProduceResponse as _ProduceResponseV12

    from tidelog.protocol.fast.produce import LeanProduceRequest

    #: What ``handle`` gets: kio's request of the version served, or the lean parse
    #: (``protocol/fast/produce.py``) of a request ``answer_at_once`` stepped aside for.
    ProduceRequest = (
        LeanProduceRequest
        | _ProduceRequestV3
        | _ProduceRequestV4
        | _ProduceRequestV5
        | _ProduceRequestV6
        | _ProduceRequestV7
        | _ProduceRequestV8
        | _ProduceRequestV9
        | _ProduceRequestV10
        | _ProduceRequestV11
        | _ProduceRequestV12
    )
    #: kio's answer of the version served (the router's catch-all and invalid acks; the
    #: common answer is encoded by ``_lean_response``).
    Response = (
        _ProduceResponseV3
        | _ProduceResponseV4
        | _ProduceResponseV5
        | _ProduceResponseV6
        | _ProduceResponseV7
        | _ProduceResponseV8
        | _ProduceResponseV9
        | _ProduceResponseV10
        | _ProduceResponseV11
        | _ProduceResponseV12
    )

API_KEY = 0


#: The first Produce version whose transactional batches add their partition themselves.
IMPLICIT_ADD_SINCE = 12


async def _implicit_add(ctx: RequestContext, request: ProduceRequest) -> ImplicitAdd:
    """Produce v12+: add the partitions of the request's transactional batches that may be
    written to their transactions (``AddPartitionsToTxnManager.add_implicitly``)."""
    broker = ctx.broker
    wanted: dict[tuple[int, int], list[tuple[str, int]]] = {}
    for topic in request.topic_data:
        if topic.name in INTERNAL_TOPICS or not allowed(
            ctx, Operation.WRITE, TOPIC, topic.name, log_denial=False
        ):
            continue  # refused by the append
        for p in topic.partition_data:
            producer = transactional_producer(p.records)
            if producer is not None and broker.topics.get_log(topic.name, int(p.index)):
                wanted.setdefault(producer, []).append((topic.name, int(p.index)))
    if not wanted:
        return NOTHING_ADDED
    transactional_id: str | None = request.transactional_id
    if transactional_id is not None and not allowed(
        ctx, Operation.WRITE, TRANSACTIONAL_ID, transactional_id
    ):
        denied = (ErrorCode.transactional_id_authorization_failed, "WRITE on the transactional id")
        return ImplicitAdd({tp: denied for tps in wanted.values() for tp in tps})
    manager = broker.transactions.add_partitions_manager
    return await manager.add_implicitly(transactional_id, wanted)


def _release(broker: BrokerView, outcome: ImplicitAdd) -> None:
    if outcome.gate is not None:
        broker.transactions.add_partitions_manager.release(outcome)


def _needs_implicit_add(
    broker: BrokerView, topic: str, partition: int, records: bytes | memoryview
) -> bool:
    """v12+: whether ``handle`` must add the partition to its transaction first (or keep the
    order behind an implicit add of the same producer in flight)."""
    producer = transactional_producer(records)
    if producer is None:
        return False
    manager = broker.transactions.add_partitions_manager
    return manager.needs_add(producer[0], producer[1], topic, partition)


def _response(
    ctx: RequestContext, request: ProduceRequest, results: list[ProducePartitionResult]
) -> Response:
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
                log_start_offset=r.log_start_offset,
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
    return cast(
        "Response",
        build(
            types.ProduceResponse,
            responses=tuple(
                types.TopicProduceResponse(name=name, partition_responses=tuple(parts))
                for name, parts in by_topic.items()
            ),
            throttle_time=timedelta(0),
        ),
    )


async def handle(ctx: RequestContext, request: ProduceRequest) -> Response | RawBody | Close | None:
    acks = int(request.acks)
    results: list[ProducePartitionResult] = []
    if acks not in (0, 1, -1):
        for topic in request.topic_data:
            for p in topic.partition_data:
                results.append(
                    ProducePartitionResult(
                        topic.name, int(p.index), ErrorCode.invalid_required_acks
                    )
                )
        return _response(ctx, request, results)
    # Appends happen (or are queued, broker.append_queue) synchronously, in request order,
    # before any await: pipelined produce requests on one connection are appended in the order
    # they were sent. (v12+ implicit adds await first, behind a gate that keeps the order of
    # the producer's requests.)
    added = NOTHING_ADDED
    if ctx.api_version >= IMPLICIT_ADD_SINCE:
        added = await _implicit_add(ctx, request)
    outcomes: list[ProducePartitionResult | asyncio.Future[ProducePartitionResult]] = []
    try:
        _append_all(ctx, request, outcomes, added.refused)
    finally:
        _release(ctx.broker, added)
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
    await await_high_watermark(ctx.broker, results, timeout_s)
    return _lean_response(ctx, results)


def _append_all(
    ctx: RequestContext,
    request: ProduceRequest,
    results: list[ProducePartitionResult | asyncio.Future[ProducePartitionResult]],
    refused: Mapping[tuple[str, int], tuple[ErrorCode, str]],
) -> None:
    authorizer = ctx.broker.authorizer
    for topic in request.topic_data:
        if authorizer is not None and not allowed(ctx, Operation.WRITE, TOPIC, topic.name):
            for p in topic.partition_data:
                results.append(
                    ProducePartitionResult(
                        topic.name, int(p.index), ErrorCode.topic_authorization_failed
                    )
                )
            continue
        for p in topic.partition_data:
            index = int(p.index)
            why = refused.get((topic.name, index))
            if why is not None:
                results.append(ProducePartitionResult(topic.name, index, why[0], why[1]))
            else:
                results.append(append_partition(ctx.broker, topic.name, index, p.records))


def _lean_response(ctx: RequestContext, results: list[ProducePartitionResult]) -> RawBody:
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
                log_start_offset=r.log_start_offset,
                error_message=r.message if ctx.api_version >= 8 else None,
                record_errors=r.record_errors if ctx.api_version >= 8 else (),
            )
        )
    return RawBody((encode_produce_body(ctx.api_version, list(by_topic.items())),))


def _encode_one(version: int, r: ProducePartitionResult) -> bytes:
    """The answer body of a one-partition request (``protocol.fast.answers``: kio's bytes)."""
    message = r.message if version >= 8 else None
    if r.record_errors and version >= 8:  # KIP-467: the refused records of the batch
        answer = ProducePartitionAnswer(
            r.partition, int(r.error), -1, -1, r.log_start_offset, r.message, r.record_errors
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
    return encode_produce_one(
        version, r.topic, r.partition, int(r.error), -1, -1, r.log_start_offset, message
    )


def answer_at_once(
    broker: BrokerView, version: int, correlation_id: int, request: LeanProduceRequest
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
    name = topic.name
    partition_log = broker.topics.get_log(name, index)
    if partition_log is None:  # answered UNKNOWN_TOPIC_OR_PARTITION by ``handle``
        return None
    if broker.append_queue.busy((name, index)):
        return None  # queued behind an append in a worker: ``handle`` awaits it
    if needs_worker(partition_log, records):
        return None  # appended in a worker thread: ``handle``
    if version >= IMPLICIT_ADD_SINCE and _needs_implicit_add(broker, name, index, records):
        return None  # ``handle`` adds the partition to the transaction first
    # One pass from the parsed frame to the framed answer: the append's AppendInfo is encoded
    # straight into the answer (``encode_produce_one``'s preencoded prefix), no result object.
    info = append_on_loop(broker, name, index, records, partition_log)
    if isinstance(info, ProducePartitionResult):  # refused, or internal or transactional
        result = info
        answer = frame_answer(correlation_id, version >= 9, _encode_one(version, result))
        if result.error != ErrorCode.none or partition_log.high_watermark >= result.next_offset:
            return answer
        next_offset = result.next_offset
    else:
        answer = frame_answer(
            correlation_id,
            version >= 9,
            encode_produce_one(
                version,
                name,
                index,
                0,
                info.first_offset,
                info.log_append_time_ms,
                info.log_start_offset,
            ),
        )
        next_offset = info.last_offset + 1
        if partition_log.high_watermark >= next_offset:
            return answer
    # Durable acknowledgement: answer once the group-commit fsync covers the batch.
    loop = running_loop()  # no getpid per held answer
    held: asyncio.Future[bytes] = broker.held_answers.hold(
        (name, index),
        next_offset,
        loop.time() + max(request.timeout.total_seconds(), 0.0),
        answer,
        functools.partial(_error_answer, version, correlation_id, name, index),
        loop,
    )
    return held


def _error_answer(
    version: int, correlation_id: int, topic: str, partition: int, error_code: int, message: str
) -> bytes:
    """One partition's framed error answer (a held answer that timed out or failed)."""
    failed = ProducePartitionResult(topic, partition, ErrorCode(error_code), message)
    return frame_answer(correlation_id, version >= 9, _encode_one(version, failed))


def with_throttle_time(ctx: RequestContext, response: RawBody, throttle_ms: int) -> RawBody:
    """``response`` (``_lean_response``) carrying ``throttle_ms`` (client quotas): the
    throttle time is the body's last int32, before the top-level tagged fields (none) from v9."""
    (body,) = response.chunks
    end = len(body) - 1 if ctx.api_version >= 9 else len(body)
    patched = bytes(body[: end - 4]) + throttle_ms.to_bytes(4, "big") + bytes(body[end:])
    return RawBody((patched,))


def error_response(ctx: RequestContext, request: ProduceRequest, code: ErrorCode) -> Response:
    """Every partition of the request carries ``code``."""
    results = [
        ProducePartitionResult(topic.name, int(p.index), code)
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
