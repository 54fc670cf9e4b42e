"""ShareFetch (key 78) v1-2: acknowledge, then acquire records for a share-group member.

The share session (``broker/share/sessions.py``): epoch 0 opens one (acknowledgements are not
allowed then: INVALID_REQUEST), later epochs must follow on (INVALID_SHARE_SESSION_EPOCH,
SHARE_SESSION_NOT_FOUND), -1 closes it after the acknowledgements (no fetch; the member's
acquired records of the session are released). READ on the group and on each topic is checked
(GROUP_AUTHORIZATION_FAILED for the request, TOPIC_AUTHORIZATION_FAILED for a topic's
partitions). v2's ``share_acquire_mode`` 1 (``record_limit``, KIP-1206) caps the acquired records
at ``max_records``. The acknowledgement result of a partition is
its ``acknowledge_error_code``; records come as whole batches plus the acquired ranges with
their delivery counts. v2's ``is_renew_ack`` only renews locks (no fetch).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from kio.static.constants import uuid_zero

from tidelog.broker.group.wire import NO_THROTTLE, ms
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import GROUP, Operation, allowed
from tidelog.broker.share.coordinator import FetchedPartition, PartitionKey
from tidelog.broker.share.partition import SharePartition
from tidelog.broker.share.wire import ack_batches, share_coordinator, topic_readable
from tidelog.broker.topics import LEADER_EPOCH
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.share_fetch.v1.request import ShareFetchRequest as _ShareFetchRequestV1
    from kio.schema.share_fetch.v2.request import ShareFetchRequest as _ShareFetchRequestV2

    #: The request versions this handler serves (kio's classes).
    Request = _ShareFetchRequestV1 | _ShareFetchRequestV2
    from kio.schema.share_fetch.v1.response import ShareFetchResponse as _ShareFetchResponseV1
    from kio.schema.share_fetch.v2.response import ShareFetchResponse as _ShareFetchResponseV2

    #: The response versions it answers (kio's classes).
    Response = _ShareFetchResponseV1 | _ShareFetchResponseV2


API_KEY = 78
_DEFAULT_MAX_RECORDS = 500
_RECORD_LIMIT = 1


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    coordinator = share_coordinator(ctx)
    if coordinator is None:
        return _top_error(types, ErrorCode.coordinator_not_available, None)
    group_id = request.group_id or ""
    member_id = request.member_id or ""
    epoch = int(request.share_session_epoch)
    if not group_id:
        return _top_error(types, ErrorCode.invalid_request, "GroupId must be set.")
    if not member_id:
        return _top_error(types, ErrorCode.invalid_request, "MemberId must be set.")
    if not allowed(ctx, Operation.READ, GROUP, group_id):
        return _top_error(types, ErrorCode.group_authorization_failed, None)
    if int(getattr(request, "share_acquire_mode", 0)) not in (0, _RECORD_LIMIT):
        return _top_error(types, ErrorCode.invalid_request, "ShareAcquireMode is invalid.")
    has_acks = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
    if epoch == 0:
        if has_acks:
            return _top_error(
                types, ErrorCode.invalid_request, "Acknowledge data present on initial epoch."
            )
        old = coordinator.sessions.close(group_id, member_id)
        if old is not None:
            coordinator.on_member_gone_session(group_id, member_id, old.partitions)
        session, error = coordinator.sessions.open(group_id, member_id)
    else:
        session, error = coordinator.sessions.use(group_id, member_id, epoch)
    if session is None or error is not ErrorCode.none:
        return _top_error(types, error, None)
    session.connection = (ctx.client_host, ctx.client_port)
    lock_ms = coordinator.lock_duration_ms(group_id)
    results: dict[tuple[Any, int], FetchedPartition] = {}
    changed: dict[PartitionKey, SharePartition] = {}
    for t in request.topics:
        # kio reads the all-zero id as None: the same id on the wire
        topic_id = t.topic_id or uuid_zero
        if not topic_readable(ctx, topic_id):
            # As Kafka: READ on each topic; the partitions of a denied one answer
            # TOPIC_AUTHORIZATION_FAILED and stay out of the session.
            for p in t.partitions:
                tp = (topic_id, int(p.partition_index))
                results[tp] = FetchedPartition(*tp, error=ErrorCode.topic_authorization_failed)
            continue
        for p in t.partitions:
            tp = (topic_id, int(p.partition_index))
            if epoch != -1:
                session.partitions[tp] = None
            if p.acknowledgement_batches:
                batches, valid = ack_batches(p.acknowledgement_batches, ctx.api_version)
                result = results.setdefault(tp, FetchedPartition(*tp))
                if not valid:
                    result.ack_error = ErrorCode.invalid_request
                    continue
                result.ack_error = coordinator.acknowledge(
                    group_id, member_id, tp[0], tp[1], batches, changed
                )
    for forgotten in request.forgotten_topics_data:
        for partition in forgotten.partitions:
            session.partitions.pop((forgotten.topic_id or uuid_zero, int(partition)), None)
    await coordinator.persist(changed)
    renew_only = bool(getattr(request, "is_renew_ack", False))
    if epoch == -1:
        coordinator.sessions.close(group_id, member_id)
        coordinator.on_member_gone_session(group_id, member_id, session.partitions)
    elif not renew_only:
        max_records = int(getattr(request, "max_records", 0)) or _DEFAULT_MAX_RECORDS
        # v2: ShareAcquireMode 0 batch_optimized (whole batches), 1 record_limit (KIP-1206)
        record_limit = int(getattr(request, "share_acquire_mode", 0)) == _RECORD_LIMIT
        fetched = await coordinator.fetch(
            session,
            max_records,
            int(request.max_bytes),
            max(ms(request.max_wait, 0), 0),
            record_limit,
        )
        for f in fetched:
            known = results.get((f.topic_id, f.partition))
            if known is not None:
                f.ack_error = known.ack_error
            if known is not None and known.error is not ErrorCode.none:
                continue
            if epoch == 0 or f.acquired or f.error is not ErrorCode.none or known is not None:
                results[(f.topic_id, f.partition)] = f
    by_topic: dict[Any, list[FetchedPartition]] = {}
    for f in results.values():
        by_topic.setdefault(f.topic_id, []).append(f)
    return cast(
        "Response",
        build(
            types.ShareFetchResponse,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            error_message=None,
            acquisition_lock_timeout=timedelta(milliseconds=lock_ms),
            responses=tuple(
                build(
                    types.ShareFetchableTopicResponse,
                    topic_id=tid,
                    partitions=tuple(_partition(types, ctx, f) for f in parts),
                )
                for tid, parts in by_topic.items()
            ),
            node_endpoints=(),
        ),
    )


def _partition(types: Any, ctx: RequestContext, f: FetchedPartition) -> Any:
    return build(
        types.PartitionData,
        partition_index=f.partition,
        error_code=f.error,
        error_message=None,
        acknowledge_error_code=int(f.ack_error or 0),
        acknowledge_error_message=None,
        current_leader=build(
            types.LeaderIdAndEpoch, leader_id=ctx.broker.node_id, leader_epoch=LEADER_EPOCH
        ),
        records=f.records,
        acquired_records=tuple(
            build(
                types.AcquiredRecords,
                first_offset=r.first_offset,
                last_offset=r.last_offset,
                delivery_count=r.delivery_count,
            )
            for r in f.acquired
        ),
    )


def _top_error(types: Any, error: ErrorCode, message: str | None) -> Response:
    return cast(
        "Response",
        build(
            types.ShareFetchResponse,
            throttle_time=NO_THROTTLE,
            error_code=error,
            error_message=message,
            acquisition_lock_timeout=timedelta(0),
            responses=(),
            node_endpoints=(),
        ),
    )


SPEC = HandlerSpec(API_KEY, "ShareFetch", 1, 2, handle)
