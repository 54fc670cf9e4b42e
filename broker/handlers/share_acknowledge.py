"""ShareAcknowledge (key 79) v1-2: acknowledge acquired records without fetching.

Needs an open share session: epoch 0 is INVALID_SHARE_SESSION_EPOCH, an unknown session
SHARE_SESSION_NOT_FOUND; -1 closes the session after the acknowledgements. Each partition's
result is its error code (INVALID_RECORD_STATE for records the member did not acquire,
TOPIC_AUTHORIZATION_FAILED without READ on the topic, UNKNOWN_TOPIC_ID for a deleted topic).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from kio.static.constants import uuid_zero

from tidelog.broker.group.wire import NO_THROTTLE
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import GROUP, Operation, allowed
from tidelog.broker.share.coordinator import PartitionKey
from tidelog.broker.share.partition import SharePartition
from tidelog.broker.share.wire import ack_batches, share_coordinator, topic_readable
from tidelog.broker.topics import LEADER_EPOCH
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.share_acknowledge.v1.request import (
        ShareAcknowledgeRequest as _ShareAcknowledgeRequestV1,
    )
    from kio.schema.share_acknowledge.v2.request import (
        ShareAcknowledgeRequest as _ShareAcknowledgeRequestV2,
    )

    #: The request versions this handler serves (kio's classes).
    Request = _ShareAcknowledgeRequestV1 | _ShareAcknowledgeRequestV2
    from kio.schema.share_acknowledge.v1.response import (
        ShareAcknowledgeResponse as _ShareAcknowledgeResponseV1,
    )
    from kio.schema.share_acknowledge.v2.response import (
        ShareAcknowledgeResponse as _ShareAcknowledgeResponseV2,
    )

    #: The response versions it answers (kio's classes).
    Response = _ShareAcknowledgeResponseV1 | _ShareAcknowledgeResponseV2


API_KEY = 79


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    coordinator = share_coordinator(ctx)
    if coordinator is None:
        return _answer(types, ErrorCode.coordinator_not_available, None, (), 0)
    group_id = request.group_id or ""
    member_id = request.member_id or ""
    epoch = int(request.share_session_epoch)
    if not group_id or not member_id:
        return _answer(types, ErrorCode.invalid_request, "GroupId and MemberId must be set.", (), 0)
    if not allowed(ctx, Operation.READ, GROUP, group_id):
        return _answer(types, ErrorCode.group_authorization_failed, None, (), 0)
    if epoch == 0:
        return _answer(types, ErrorCode.invalid_share_session_epoch, None, (), 0)
    session, error = coordinator.sessions.use(group_id, member_id, epoch)
    if session is None or error is not ErrorCode.none:
        return _answer(types, error, None, (), 0)
    session.connection = (ctx.client_host, ctx.client_port)
    changed: dict[PartitionKey, SharePartition] = {}
    topics = []
    for t in request.topics:
        parts = []
        readable = topic_readable(ctx, t.topic_id or uuid_zero)
        for p in t.partitions:
            batches, valid = ack_batches(p.acknowledgement_batches, ctx.api_version)
            code = ErrorCode.invalid_request
            if not readable:
                code = ErrorCode.topic_authorization_failed
            elif valid:
                code = coordinator.acknowledge(
                    group_id,
                    member_id,
                    t.topic_id or uuid_zero,
                    int(p.partition_index),
                    batches,
                    changed,
                )
            parts.append(
                build(
                    types.PartitionData,
                    partition_index=int(p.partition_index),
                    error_code=code,
                    error_message=None,
                    current_leader=build(
                        types.LeaderIdAndEpoch,
                        leader_id=ctx.broker.node_id,
                        leader_epoch=LEADER_EPOCH,
                    ),
                )
            )
        topics.append(
            build(types.ShareAcknowledgeTopicResponse, topic_id=t.topic_id, partitions=tuple(parts))
        )
    await coordinator.persist(changed)
    if epoch == -1:
        coordinator.sessions.close(group_id, member_id)
        coordinator.on_member_gone_session(group_id, member_id, session.partitions)
    return _answer(
        types, ErrorCode.none, None, tuple(topics), coordinator.lock_duration_ms(group_id)
    )


def _answer(
    types: Any, error: ErrorCode, message: str | None, topics: Any, lock_ms: int
) -> Response:
    return cast(
        "Response",
        build(
            types.ShareAcknowledgeResponse,
            throttle_time=NO_THROTTLE,
            error_code=error,
            error_message=message,
            acquisition_lock_timeout=timedelta(milliseconds=lock_ms),
            responses=topics,
            node_endpoints=(),
        ),
    )


SPEC = HandlerSpec(API_KEY, "ShareAcknowledge", 1, 2, handle)
