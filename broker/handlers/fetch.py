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
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from kio.static.constants import uuid_zero

from broker.handlers.base import HandlerSpec, RequestContext
from broker.router import RawBody
from protocol.errors import ErrorCode, error_code_for
from protocol.lean import FetchPartitionAnswer, encode_fetch_body, encode_fetch_one
from protocol.schema import build, response_types
from storage import ReadInfo
from storage.errors import StorageError

API_KEY = 1
#: Reads at least this large go to a worker thread instead of pread on the event loop.
BLOCKING_READ_BYTES = 256 * 1024


@dataclass(slots=True)
class _Partition:
    """One requested partition and what a pass over the logs found for it."""

    topic: str | None
    topic_id: Any
    partition: int
    fetch_offset: int
    max_bytes: int
    error: ErrorCode = ErrorCode.none
    high_watermark: int = -1
    log_start_offset: int = -1
    read: ReadInfo | None = None


def _requested(ctx: RequestContext, request: Any) -> list[_Partition]:
    topics = ctx.broker.topics
    by_id = ctx.api_version >= 13
    wanted: list[_Partition] = []
    for t in request.topics:
        if by_id:
            info = topics.by_id(t.topic_id)
            name = info.name if info is not None else None
            topic_id = t.topic_id
        else:
            name, topic_id = t.topic, uuid_zero
        for p in t.partitions:
            wanted.append(
                _Partition(
                    topic=name,
                    topic_id=topic_id,
                    partition=int(p.partition),
                    fetch_offset=int(p.fetch_offset),
                    max_bytes=int(p.partition_max_bytes),
                )
            )
    return wanted


def _scan(ctx: RequestContext, wanted: list[_Partition], max_bytes: int) -> tuple[int, bool]:
    """Look every partition up (no data read yet); returns (bytes available, any error)."""
    topics = ctx.broker.topics
    total = 0
    errors = False
    for w in wanted:
        w.read = None
        w.error = ErrorCode.none
        if w.topic is None:
            w.error = ErrorCode.unknown_topic_id
            errors = True
            continue
        partition_log = topics.get_log(w.topic, w.partition)
        if partition_log is None:
            w.error = ErrorCode.unknown_topic_or_partition
            errors = True
            continue
        w.high_watermark = partition_log.high_watermark
        w.log_start_offset = partition_log.log_start_offset
        if not w.log_start_offset <= w.fetch_offset <= partition_log.log_end_offset:
            w.error = ErrorCode.offset_out_of_range
            errors = True
            continue
        if w.fetch_offset >= w.high_watermark:
            continue  # caught up: empty answer (the common long-poll case)
        limit = min(w.max_bytes, max_bytes - total)
        if limit <= 0 and total > 0:
            continue
        try:
            info = partition_log.read(
                w.fetch_offset,
                max(limit, 0),
                upper_bound=w.high_watermark,
                min_one_message=total == 0,
            )
        except StorageError as exc:
            w.error = error_code_for(exc.error_name)
            errors = True
            continue
        w.high_watermark = info.high_watermark
        w.log_start_offset = info.log_start_offset
        if info.size_in_bytes > 0:
            w.read = info
            total += info.size_in_bytes
    return total, errors


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
    wanted = _requested(ctx, request)
    # As Kafka: never more than fetch.max.bytes per answer, whatever the client asks for (the
    # answer is read into memory; one fetch of a huge max_bytes must not read a whole log).
    max_bytes = max(min(int(request.max_bytes), ctx.broker.config.get_int("fetch.max.bytes")), 0)
    min_bytes = int(request.min_bytes)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(request.max_wait.total_seconds(), 0.0)
    keys = [(w.topic, w.partition) for w in wanted if w.topic is not None]
    while True:
        total, errors = _scan(ctx, wanted, max_bytes)
        remaining = deadline - loop.time()
        if errors or total >= min_bytes or (total > 0 and min_bytes <= 0) or remaining <= 0:
            break
        if not keys or ctx.broker.stopping:
            break
        await ctx.broker.partitions.wait_any(keys, remaining)  # type: ignore[arg-type]
    if len(wanted) == 1:  # what consumers of one partition send: no grouping, one encode
        return await _one_answer(ctx, wanted[0])
    payloads = [await _records(ctx, w.read) for w in wanted]
    return _lean_response(ctx, wanted, payloads)


async def _one_answer(ctx: RequestContext, w: _Partition) -> RawBody:
    info = w.read
    if info is None or info.size_in_bytes == 0:
        records = b""
    elif info.size_in_bytes >= BLOCKING_READ_BYTES:
        records = await ctx.broker.run_blocking(info.read_bytes)
    else:
        records = info.read_bytes()
    version = ctx.api_version
    head, tail = encode_fetch_one(
        version,
        w.topic_id if version >= 13 else (w.topic or ""),
        w.partition,
        int(w.error),
        w.high_watermark,
        w.log_start_offset,
        len(records),
    )
    if not records:
        return RawBody((head + tail,))
    return RawBody((head, records, tail) if tail else (head, records))


def _lean_response(ctx: RequestContext, wanted: list[_Partition], payloads: list[bytes]) -> RawBody:
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


def _response(
    ctx: RequestContext, types: Any, wanted: list[_Partition], payloads: list[bytes]
) -> Any:
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
    wanted = _requested(ctx, request)
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


SPEC = HandlerSpec(api_key=API_KEY, name="Fetch", min_version=4, max_version=16, handle=handle)
