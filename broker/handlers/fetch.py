"""Fetch (key 1) v4-16: record data for consumers, with long poll.

For each partition: OFFSET_OUT_OF_RANGE outside [log start, LEO]; at or past the HW an empty
answer; else whole batches from the one holding ``fetch_offset`` up to the HW, within
``partition_max_bytes`` and the request's ``max_bytes`` (the first partition with data always
gets at least one batch, as Kafka's v3+). The answer waits (long poll) until ``min_bytes`` are
available or ``max_wait_ms`` passed, woken as soon as a fetched partition's HW moves; any error
answers at once.

Records go out as the segment file's bytes (``os.pread``, in a worker thread when large; one
partition's large data by ``sendfile``, ``broker/sendfile.py``); they are never decoded.
``records`` is empty bytes, never null (librdkafka rejects null).
Isolation level 1 (READ_COMMITTED) reads up to the partition's last stable offset and answers
the aborted transactions overlapping the data (``PartitionLog.read_for_fetch``); level 0 reads
up to the HW. Either way the answer carries the last stable offset.

Fetch sessions (KIP-227, v7+): we never create one. Requests are answered sessionless (session
id 0, full answers), which every client treats as "no session": a client that sent epoch 0
keeps sending full requests. A request naming a session id we never handed out gets
FETCH_SESSION_ID_NOT_FOUND, so the client drops it and fetches in full.

The walk, as Produce's (handler -> ``broker/append_records.py`` -> log): the handler lists the
requested partitions (``requested``), ``broker/fetch_messages.py`` (Kafka's
ReplicaManager.fetchMessages) reads them from the logs and gives back what to send, or a
``DelayedFetch`` (``broker/delayed_fetch.py``) that completes with it later; the handler encodes
the answer (``encode_answer``). The router calls ``answer_at_once`` for a lean-parsed sessionless
fetch (what consumers send) without a coroutine; ``handle`` serves everything else (a request kio
decoded, a session id, an authorizer, client quotas).

Client quotas: with a ``consumer_byte_rate`` quota, a request's ``max_bytes`` is capped to what
the quota lets through in its window (Kafka's getMaxValueInQuotaWindow); a fetch over quota is
answered empty with its throttle time (``throttled_response``, the router decides).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from kio.static.constants import uuid_zero
from kio.static.primitive import i32

from tidelog.broker.client_quota_manager import user_of
from tidelog.broker.delayed_fetch import DelayedFetch
from tidelog.broker.fetch_messages import FetchParams, FetchPartitionData, fetch_messages
from tidelog.broker.handlers.base import BrokerView, HandlerSpec, RequestContext
from tidelog.broker.metrics import LONG_POLL_WAIT
from tidelog.broker.security.access import TOPIC, Operation, allowed
from tidelog.broker.sendfile import FileAnswer
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.fast.answers import (
    FetchPartitionAnswer,
    encode_fetch_body,
    encode_fetch_one,
    frame_answer,
    frame_chunks,
    frame_head,
)
from tidelog.protocol.fast.fetch import LeanFetchRequest
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.fetch.v4.request import FetchRequest as _FetchRequestV4
    from kio.schema.fetch.v4.response import FetchResponse as _FetchResponseV4
    from kio.schema.fetch.v5.request import FetchRequest as _FetchRequestV5
    from kio.schema.fetch.v5.response import FetchResponse as _FetchResponseV5
    from kio.schema.fetch.v6.request import FetchRequest as _FetchRequestV6
    from kio.schema.fetch.v6.response import FetchResponse as _FetchResponseV6
    from kio.schema.fetch.v7.request import FetchRequest as _FetchRequestV7
    from kio.schema.fetch.v7.response import FetchResponse as _FetchResponseV7
    from kio.schema.fetch.v8.request import FetchRequest as _FetchRequestV8
    from kio.schema.fetch.v8.response import FetchResponse as _FetchResponseV8
    from kio.schema.fetch.v9.request import FetchRequest as _FetchRequestV9
    from kio.schema.fetch.v9.response import FetchResponse as _FetchResponseV9
    from kio.schema.fetch.v10.request import FetchRequest as _FetchRequestV10
    from kio.schema.fetch.v10.response import FetchResponse as _FetchResponseV10
    from kio.schema.fetch.v11.request import FetchRequest as _FetchRequestV11
    from kio.schema.fetch.v11.response import FetchResponse as _FetchResponseV11
    from kio.schema.fetch.v12.request import FetchRequest as _FetchRequestV12
    from kio.schema.fetch.v12.response import FetchResponse as _FetchResponseV12
    from kio.schema.fetch.v13.request import FetchRequest as _FetchRequestV13
    from kio.schema.fetch.v13.response import FetchResponse as _FetchResponseV13
    from kio.schema.fetch.v14.request import FetchRequest as _FetchRequestV14
    from kio.schema.fetch.v14.response import FetchResponse as _FetchResponseV14
    from kio.schema.fetch.v15.request import FetchRequest as _FetchRequestV15
    from kio.schema.fetch.v15.response import FetchResponse as _FetchResponseV15
    from kio.schema.fetch.v16.request import FetchRequest as _FetchRequestV16
    from kio.schema.fetch.v16.response import FetchResponse as _FetchResponseV16

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
    #: A Fetch request as kio reads it or as the router's lean parser does
    #: (``protocol/fast/fetch.py``: the common requests, read in one pass).
    FetchRequest: TypeAlias = Request | LeanFetchRequest
    #: kio's answer of the version served (errors and throttling; data goes out as
    #: ``encode_answer``'s framed bytes).
    Response = (
        _FetchResponseV4
        | _FetchResponseV5
        | _FetchResponseV6
        | _FetchResponseV7
        | _FetchResponseV8
        | _FetchResponseV9
        | _FetchResponseV10
        | _FetchResponseV11
        | _FetchResponseV12
        | _FetchResponseV13
        | _FetchResponseV14
        | _FetchResponseV15
        | _FetchResponseV16
    )

    from tidelog.broker.metrics import Metrics
    from tidelog.broker.topics import Topics


API_KEY = 1


def requested(topics: Topics, version: int, request: FetchRequest) -> list[FetchPartitionData]:
    """The partitions ``request`` names (Kafka's fetchData), each with its fetch offset."""
    by_id = version >= 13
    committed = int(getattr(request, "isolation_level", 0)) == 1
    wanted: list[FetchPartitionData] = []
    for t in request.topics:
        # the topics are named by id from v13 (the lean parser's topics carry both fields)
        if by_id:
            topic_id = getattr(t, "topic_id", None)
            info = topics.by_id(topic_id)
            name = info.name if info is not None else None
        else:
            name, topic_id = getattr(t, "topic", None), uuid_zero
        for p in t.partitions:
            wanted.append(
                FetchPartitionData(
                    name,
                    topic_id,
                    int(p.partition),
                    int(p.fetch_offset),
                    int(p.partition_max_bytes),
                    committed,
                )
            )
    return wanted


def _params(broker: BrokerView, request: FetchRequest) -> FetchParams:
    """The request's limits; ``max_bytes`` never above ``fetch.max.bytes`` (as Kafka: the
    answer is read into memory, so one fetch of a huge max_bytes must not read a whole log)."""
    limit = int(broker.config.get_int("fetch.max.bytes"))
    return FetchParams(
        max(min(int(request.max_bytes), limit), 0),
        request.min_bytes,
        request.max_wait.total_seconds(),
    )


def answer_at_once(
    broker: BrokerView, version: int, correlation_id: int, request: LeanFetchRequest
) -> bytes | list[bytes | memoryview] | FileAnswer | asyncio.Future[Any] | None:
    """The answer of a sessionless fetch (what consumers send: the router's coroutine-free
    path) or a future of it; None (``handle``: the FETCH_SESSION_ID_NOT_FOUND answer) for one
    naming a session. The router calls this only when no authorizer is set and client quotas
    are off (``handle`` marks the partitions a principal may not read and caps max_bytes)."""
    if request.session_id != 0:
        return None
    topics = request.topics
    if len(topics) == 1 and len(topics[0].partitions) == 1:
        topic = topics[0]
        p = topic.partitions[0]
        name: str | None
        if version >= 13:
            info = broker.topics.by_id(topic.topic_id)
            if info is None:
                return None
            name = info.name
        else:
            name = topic.topic
        partitions = [
            FetchPartitionData(
                name,
                topic.topic_id,
                p.partition,
                p.fetch_offset,
                p.partition_max_bytes,
                request.isolation_level == 1,
            )
        ]
    else:
        # Several partitions (librdkafka fetches every assigned partition in one request):
        # the same answer as ``handle``'s without a coroutine, a task and a request context
        # per fetch (issue 33's soak: ~1/5 of the loop's time went to that frame).
        partitions = requested(broker.topics, version, request)
    result = fetch_messages(broker, _params(broker, request), partitions)
    if type(result) is list:
        _count_bytes_out(broker.metrics, result)
        return encode_answer(version, correlation_id, result)
    assert isinstance(result, DelayedFetch)
    return result.start(
        functools.partial(_respond_observed, broker, version, correlation_id, result.started)
    )


def _respond_observed(
    broker: BrokerView,
    version: int,
    correlation_id: int,
    started: float,
    partitions: list[FetchPartitionData],
    waited: float,
) -> bytes | list[bytes | memoryview] | FileAnswer:
    """A delayed fetch's answer on the router's coroutine-free path, counted in the request
    metrics here (the router counts only what it awaits)."""
    _count_bytes_out(broker.metrics, partitions)
    out = encode_answer(version, correlation_id, partitions)
    broker.metrics.observe_request(SPEC.name, time.perf_counter() - started, 0, waited)
    return out


def _count_bytes_out(metrics: Metrics, partitions: list[FetchPartitionData]) -> None:
    """Per-topic bytes out (Kafka's BytesOutPerSec) of an answer."""
    for w in partitions:
        if w.read is not None and w.topic is not None:
            metrics.topic_out(w.topic, w.read.size_in_bytes)


def _session_error(request: FetchRequest) -> bool:
    session_id = int(getattr(request, "session_id", 0))
    return session_id != 0


async def handle(
    ctx: RequestContext, request: FetchRequest
) -> Response | bytes | list[bytes | memoryview] | FileAnswer:
    if _session_error(request):
        types = response_types(API_KEY, ctx.api_version)
        return _fetch_response(types, ErrorCode.fetch_session_id_not_found)
    broker = ctx.broker
    quotas = broker.client_quotas
    if quotas.enabled:
        request = _quota_capped(ctx, request)
    partitions = requested(broker.topics, ctx.api_version, request)
    if broker.authorizer is not None:
        _authorize(ctx, partitions)
    result = fetch_messages(broker, _params(broker, request), partitions)
    if type(result) is not list:
        assert isinstance(result, DelayedFetch)
        waited: list[float] = []

        def respond(data: list[FetchPartitionData], seconds: float) -> list[FetchPartitionData]:
            waited.append(seconds)
            return data

        result = cast("list[FetchPartitionData]", await result.start(respond))
        if waited:  # the long poll's wait is kept out of the latency (the router reads it)
            LONG_POLL_WAIT.set(waited[0])
    _count_bytes_out(broker.metrics, result)
    return encode_answer(ctx.api_version, ctx.correlation_id, result)


def encode_answer(
    version: int, correlation_id: int, partitions: list[FetchPartitionData]
) -> bytes | list[bytes | memoryview] | FileAnswer:
    """The framed answer (size, header, body) of ``partitions`` as read; one partition's
    ``file_regions`` go out by ``sendfile`` (a ``FileAnswer``)."""
    flexible_header = version >= 12
    if len(partitions) == 1:  # what consumers of one partition send: no grouping, one encode
        w = partitions[0]
        regions = w.file_regions
        if regions:
            size = w.read.size_in_bytes if w.read is not None else 0
            head, tail = _encode_one(version, w, size)
            first = frame_head(correlation_id, flexible_header, head, size + len(tail))
            return FileAnswer(first, regions, tail, size)
        records = w.records
        head, tail = _encode_one(version, w, len(records))
        if not records:
            return frame_answer(correlation_id, flexible_header, head + tail)
        return frame_chunks(correlation_id, flexible_header, head, records, tail)
    by_id = version >= 13
    grouped: dict[Any, list[FetchPartitionAnswer]] = {}
    for w in partitions:
        grouped.setdefault(w.topic_id if by_id else w.topic, []).append(
            FetchPartitionAnswer(
                w.partition,
                int(w.error),
                w.high_watermark,
                w.last_stable_offset if w.last_stable_offset >= 0 else w.high_watermark,
                w.log_start_offset,
                w.records,
                w.aborted,
            )
        )
    chunks = encode_fetch_body(version, list(grouped.items()))
    if len(chunks) == 1:
        return frame_answer(correlation_id, flexible_header, bytes(chunks[0]))
    first = frame_head(correlation_id, flexible_header, b"", sum(map(len, chunks)))
    return [first, *chunks]


def _encode_one(version: int, w: FetchPartitionData, records_size: int) -> tuple[bytes, bytes]:
    return encode_fetch_one(
        version,
        w.topic_id if version >= 13 else (w.topic or ""),
        w.partition,
        int(w.error),
        w.high_watermark,
        w.log_start_offset,
        records_size,
        w.last_stable_offset if w.last_stable_offset >= 0 else None,
        w.aborted,
    )


def _quota_capped(ctx: RequestContext, request: FetchRequest) -> FetchRequest:
    """The request with ``max_bytes`` at most what the client's quota allows in one window."""
    cap = ctx.broker.client_quotas.managers.fetch.max_value_in_window(
        user_of(ctx.principal), ctx.client_id or ""
    )
    if cap is None or request.max_bytes <= cap:
        return request
    capped = max(int(cap), 1)
    if isinstance(request, LeanFetchRequest):
        return request._replace(max_bytes=capped)
    return dataclasses.replace(request, max_bytes=i32(capped))


def throttled_response(ctx: RequestContext, request: FetchRequest, throttle_ms: int) -> Response:
    """The answer of a fetch over quota: no partitions, the throttle time (Kafka's
    getThrottledResponse of a sessionless fetch)."""
    types = response_types(API_KEY, ctx.api_version)
    return _fetch_response(types, ErrorCode.none, throttle_ms=throttle_ms)


def _authorize(ctx: RequestContext, wanted: list[FetchPartitionData]) -> None:
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


def _response(
    ctx: RequestContext, types: Any, wanted: list[FetchPartitionData], payloads: list[bytes]
) -> Response:
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
    return _fetch_response(types, ErrorCode.none, responses)


def _fetch_response(
    types: Any, error: ErrorCode, responses: tuple[Any, ...] = (), *, throttle_ms: int = 0
) -> Response:
    """A sessionless FetchResponse (session 0) of ``responses`` with the top-level ``error``."""
    return cast(
        "Response",
        build(
            types.FetchResponse,
            throttle_time=timedelta(milliseconds=throttle_ms),
            error_code=error,
            session_id=0,
            responses=responses,
        ),
    )


def error_response(ctx: RequestContext, request: FetchRequest, code: ErrorCode) -> Response:
    """v4-6 have no top-level error: every partition carries ``code``."""
    types = response_types(API_KEY, ctx.api_version)
    if ctx.api_version >= 7:
        return _fetch_response(types, code)
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
