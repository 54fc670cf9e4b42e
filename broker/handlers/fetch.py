"""Fetch (key 1) v4-16: record data for consumers, with long poll.

For each partition: OFFSET_OUT_OF_RANGE outside [log start, LEO]; at or past the HW an empty
answer; else whole batches from the one holding ``fetch_offset`` up to the HW, within
``partition_max_bytes`` and the request's ``max_bytes`` (the first partition with data always
gets at least one batch, as Kafka's v3+). The answer waits (long poll) until ``min_bytes`` are
available or ``max_wait_ms`` passed, woken as soon as a fetched partition's HW moves; any error
answers at once.

Records go out as the segment file's bytes (``os.pread``, in a worker thread when large); they
are never decoded. ``records`` is empty bytes, never null (librdkafka rejects null). The last
stable offset is the HW and the aborted-transaction list is empty (no transactions yet).

Fetch sessions (KIP-227, v7+): we never create one. Requests are answered sessionless (session
id 0, full answers), which every client treats as "no session": a client that sent epoch 0
keeps sending full requests. A request naming a session id we never handed out gets
FETCH_SESSION_ID_NOT_FOUND, so the client drops it and fetches in full.

A one-partition fetch (what most consumers send) is answered by ``_fetch_poll.answer_at_once``
without this coroutine, with the same rules and bytes; ``handle`` serves everything else.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from tidelog.broker.handlers._fetch_poll import answer_at_once
from tidelog.broker.handlers._fetch_scan import (
    BLOCKING_READ_BYTES,
    Wanted,
    answer_max_bytes,
    answer_now,
    answer_one,
    count_bytes_out,
    requested,
    scan,
)
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.metrics import LONG_POLL_WAIT
from tidelog.broker.router import RawBody
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.lean import FetchPartitionAnswer, encode_fetch_body
from tidelog.protocol.schema import build, response_types
from tidelog.storage import ReadInfo

API_KEY = 1


async def _records(ctx: RequestContext, info: ReadInfo | None) -> bytes:
    if info is None or info.size_in_bytes == 0:
        return b""
    if info.size_in_bytes >= BLOCKING_READ_BYTES:
        data: bytes = await ctx.broker.run_blocking(info.read_bytes)
        return data
    return info.read_bytes()


def _session_error(request: Any) -> bool:
    session_id = int(getattr(request, "session_id", 0))
    return session_id != 0


async def handle(ctx: RequestContext, request: Any) -> Any:
    if _session_error(request):
        types = response_types(API_KEY, ctx.api_version)
        return build(
            types.FetchResponse,
            throttle_time=timedelta(0),
            error_code=ErrorCode.fetch_session_id_not_found,
            session_id=0,
            responses=(),
        )
    wanted = requested(ctx.broker.topics, ctx.api_version, request)
    max_bytes = answer_max_bytes(ctx.broker, request)
    min_bytes = int(request.min_bytes)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(request.max_wait.total_seconds(), 0.0)
    keys = [(w.topic, w.partition) for w in wanted if w.topic is not None]
    waited_since = 0.0
    while True:
        total, errors = scan(ctx.broker.topics, wanted, max_bytes)
        remaining = deadline - loop.time()
        if not keys or answer_now(errors, total, min_bytes, remaining, ctx.broker.stopping):
            break
        waited_since = waited_since or loop.time()
        await ctx.broker.partitions.wait_any(keys, remaining)  # type: ignore[arg-type]
    if waited_since:  # the long poll's wait is kept out of the latency (the router reads it)
        LONG_POLL_WAIT.set(loop.time() - waited_since)
    count_bytes_out(ctx.broker.metrics, wanted)
    if len(wanted) == 1:  # what consumers of one partition send: no grouping, one encode
        return await _one_answer(ctx, wanted[0])
    payloads = [await _records(ctx, w.read) for w in wanted]
    return _lean_response(ctx, wanted, payloads)


async def _one_answer(ctx: RequestContext, w: Wanted) -> bytes | list[bytes | memoryview]:
    """The framed answer for one partition (a big read in a worker thread)."""
    version, correlation_id = ctx.api_version, ctx.correlation_id
    answer = answer_one(version, correlation_id, w, blocking_ok=False)
    if answer is None:
        answer = await ctx.broker.run_blocking(
            lambda: answer_one(version, correlation_id, w, blocking_ok=True)
        )
    assert answer is not None
    return answer


def _lean_response(ctx: RequestContext, wanted: list[Wanted], payloads: list[bytes]) -> RawBody:
    """The answer through protocol.lean: record bytes are passed on, never re-encoded."""
    by_id = ctx.api_version >= 13
    grouped: dict[Any, list[FetchPartitionAnswer]] = {}
    for w, records in zip(wanted, payloads, strict=True):
        grouped.setdefault(w.topic_id if by_id else w.topic, []).append(
            FetchPartitionAnswer(
                partition=w.partition,
                error_code=int(w.error),
                high_watermark=w.high_watermark,
                last_stable_offset=w.high_watermark,
                log_start_offset=w.log_start_offset,
                records=records,
            )
        )
    return RawBody(tuple(encode_fetch_body(ctx.api_version, list(grouped.items()))))


def _response(ctx: RequestContext, types: Any, wanted: list[Wanted], payloads: list[bytes]) -> Any:
    by_id = ctx.api_version >= 13
    grouped: dict[Any, list[Any]] = {}
    for w, records in zip(wanted, payloads, strict=True):
        key = w.topic_id if by_id else w.topic
        grouped.setdefault(key, []).append(
            build(
                types.PartitionData,
                partition_index=w.partition,
                error_code=w.error,
                high_watermark=w.high_watermark,
                last_stable_offset=w.high_watermark,
                log_start_offset=w.log_start_offset,
                aborted_transactions=(),
                preferred_read_replica=-1,
                records=records,
            )
        )
    responses = tuple(
        build(types.FetchableTopicResponse, topic=key, topic_id=key, partitions=tuple(parts))
        for key, parts in grouped.items()
    )
    return build(
        types.FetchResponse,
        throttle_time=timedelta(0),
        error_code=ErrorCode.none,
        session_id=0,
        responses=responses,
    )


def error_response(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    """v4-6 have no top-level error: every partition carries ``code``."""
    types = response_types(API_KEY, ctx.api_version)
    wanted = requested(ctx.broker.topics, ctx.api_version, request)
    for w in wanted:
        w.error = code
    response = _response(ctx, types, wanted, [b""] * len(wanted))
    if ctx.api_version >= 7:
        return build(
            types.FetchResponse,
            throttle_time=timedelta(0),
            error_code=code,
            session_id=0,
            responses=(),
        )
    return response


SPEC = HandlerSpec(
    api_key=API_KEY,
    name="Fetch",
    min_version=4,
    max_version=16,
    handle=handle,
    at_once=answer_at_once,
)
