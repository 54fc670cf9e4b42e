"""Fetch (key 1) v4-16: record data for consumers, with long poll.

For each partition: OFFSET_OUT_OF_RANGE outside [log start, LEO]; at or past the HW an empty
answer; else whole batches from the one holding ``fetch_offset`` up to the HW, within
``partition_max_bytes`` and the request's ``max_bytes`` (the first partition with data always
gets at least one batch, as Kafka's v3+). The answer waits (long poll) until ``min_bytes`` are
available or ``max_wait_ms`` passed, woken as soon as a fetched partition's HW moves; any error
answers at once.

Records go out as the segment file's bytes (``os.pread``, in a worker thread when large); they
are never decoded. ``records`` is empty bytes, never null (librdkafka rejects null).
Isolation level 1 (READ_COMMITTED) reads up to the partition's last stable offset and answers
the aborted transactions overlapping the data (``PartitionLog.read_for_fetch``); level 0 reads
up to the HW. Either way the answer carries the last stable offset.

Fetch sessions (KIP-227, v7+): we never create one. Requests are answered sessionless (session
id 0, full answers), which every client treats as "no session": a client that sent epoch 0
keeps sending full requests. A request naming a session id we never handed out gets
FETCH_SESSION_ID_NOT_FOUND, so the client drops it and fetches in full.

Both paths share one core, ``delayed_fetch.fetch`` (scan, answer now or wait by callbacks): the
router calls ``delayed_fetch.answer_at_once`` for a lean-parsed sessionless fetch (what consumers
send) without this coroutine; ``handle`` serves everything else.

Client quotas: with a ``consumer_byte_rate`` quota, a request's ``max_bytes`` is capped to what
the quota lets through in its window (Kafka's getMaxValueInQuotaWindow); a fetch over quota is
answered empty with its throttle time (``throttled_response``, the router decides).
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from tidelog.broker.client_quota_manager import user_of
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.handlers.delayed_fetch import answer_at_once, fetch
from tidelog.broker.handlers.fetch_plan import Wanted, requested
from tidelog.broker.metrics import LONG_POLL_WAIT
from tidelog.broker.security.access import TOPIC, Operation, allowed
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.fast.fetch import LeanFetchRequest
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.fetch.v4.request import FetchRequest as _FetchRequestV4
    from kio.schema.fetch.v5.request import FetchRequest as _FetchRequestV5
    from kio.schema.fetch.v6.request import FetchRequest as _FetchRequestV6
    from kio.schema.fetch.v7.request import FetchRequest as _FetchRequestV7
    from kio.schema.fetch.v8.request import FetchRequest as _FetchRequestV8
    from kio.schema.fetch.v9.request import FetchRequest as _FetchRequestV9
    from kio.schema.fetch.v10.request import FetchRequest as _FetchRequestV10
    from kio.schema.fetch.v11.request import FetchRequest as _FetchRequestV11
    from kio.schema.fetch.v12.request import FetchRequest as _FetchRequestV12
    from kio.schema.fetch.v13.request import FetchRequest as _FetchRequestV13
    from kio.schema.fetch.v14.request import FetchRequest as _FetchRequestV14
    from kio.schema.fetch.v15.request import FetchRequest as _FetchRequestV15
    from kio.schema.fetch.v16.request import FetchRequest as _FetchRequestV16

    #: The request versions this handler serves (kio's classes).
    Request = (
        _FetchRequestV4
        | _FetchRequestV5
        | _FetchRequestV6
        | _FetchRequestV7
        | _FetchRequestV8
        | _FetchRequestV9
        | _FetchRequestV10
        | _FetchRequestV11
        | _FetchRequestV12
        | _FetchRequestV13
        | _FetchRequestV14
        | _FetchRequestV15
        | _FetchRequestV16
    )


API_KEY = 1


def _session_error(request: Request) -> bool:
    session_id = int(getattr(request, "session_id", 0))
    return session_id != 0


async def handle(ctx: RequestContext, request: Request) -> Any:
    if _session_error(request):
        types = response_types(API_KEY, ctx.api_version)
        return build(
            types.FetchResponse,
            throttle_time=timedelta(0),
            error_code=ErrorCode.fetch_session_id_not_found,
            session_id=0,
            responses=(),
        )
    quotas = ctx.broker.client_quotas
    if quotas.enabled:
        request = _quota_capped(ctx, request)
    wanted = requested(ctx.broker.topics, ctx.api_version, request)
    if ctx.broker.authorizer is not None:
        _authorize(ctx, wanted)
    waited: list[float] = []
    answer = fetch(ctx.broker, ctx.api_version, ctx.correlation_id, request, wanted, waited=waited)
    if isinstance(answer, asyncio.Future):
        out = await answer
        if waited:  # the long poll's wait is kept out of the latency (the router reads it)
            LONG_POLL_WAIT.set(waited[0])
        return out
    return answer


def _quota_capped(ctx: RequestContext, request: Any) -> Any:
    """The request with ``max_bytes`` at most what the client's quota allows in one window."""
    cap = ctx.broker.client_quotas.managers.fetch.max_value_in_window(
        user_of(ctx.principal), ctx.client_id or ""
    )
    if cap is None or request.max_bytes <= cap:
        return request
    capped = max(int(cap), 1)
    if isinstance(request, LeanFetchRequest):
        return request._replace(max_bytes=capped)
    return dataclasses.replace(request, max_bytes=capped)


def throttled_response(ctx: RequestContext, request: Request, throttle_ms: int) -> Any:
    """The answer of a fetch over quota: no partitions, the throttle time (Kafka's
    getThrottledResponse of a sessionless fetch)."""
    types = response_types(API_KEY, ctx.api_version)
    return build(
        types.FetchResponse,
        throttle_time=timedelta(milliseconds=throttle_ms),
        error_code=ErrorCode.none,
        session_id=0,
        responses=(),
    )


def _authorize(ctx: RequestContext, wanted: list[Wanted]) -> None:
    """Mark the partitions the principal may not READ (answered TOPIC_AUTHORIZATION_FAILED,
    never waited on)."""
    verdicts: dict[str, bool] = {}
    for w in wanted:
        if w.topic is None:
            continue  # answered UNKNOWN_TOPIC_ID by the scan
        verdict = verdicts.get(w.topic)
        if verdict is None:
            verdict = verdicts[w.topic] = allowed(ctx, Operation.READ, TOPIC, w.topic)
        w.denied = not verdict


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


def error_response(ctx: RequestContext, request: Request, code: ErrorCode) -> Any:
    """v4-6 have no top-level error: every partition carries ``code``."""
    types = response_types(API_KEY, ctx.api_version)
    if ctx.api_version >= 7:
        return build(
            types.FetchResponse,
            throttle_time=timedelta(0),
            error_code=code,
            session_id=0,
            responses=(),
        )
    wanted = requested(ctx.broker.topics, ctx.api_version, request)
    for w in wanted:
        w.error = code
    return _response(ctx, types, wanted, [b""] * len(wanted))


SPEC = HandlerSpec(
    api_key=API_KEY,
    name="Fetch",
    min_version=4,
    max_version=16,
    handle=handle,
    at_once=answer_at_once,
)
