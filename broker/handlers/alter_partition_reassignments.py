"""AlterPartitionReassignments (key 45) v0-1, answered as a single-node cluster does.

The only registered broker is this node, which holds every partition's only replica. Per
partition, with Kafka's ReplicationControlManager rules and messages:

* unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION;
* ``replicas`` null (cancel): NO_REASSIGNMENT_IN_PROGRESS - none ever is;
* an empty list, a broker named twice or a broker that is not registered (any id but this
  node's): INVALID_REPLICA_ASSIGNMENT;
* ``[node.id]``: the current assignment, done at once (success, nothing to move).

v1's ``allow_replication_factor_change`` is echoed; it cannot matter with one broker.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, cast

from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.alter_partition_reassignments.v0.request import (
        AlterPartitionReassignmentsRequest as _AlterPartitionReassignmentsRequestV0,
    )
    from kio.schema.alter_partition_reassignments.v1.request import (
        AlterPartitionReassignmentsRequest as _AlterPartitionReassignmentsRequestV1,
    )

    #: The request versions this handler serves (kio's classes).
    Request = _AlterPartitionReassignmentsRequestV0 | _AlterPartitionReassignmentsRequestV1
    from kio.schema.alter_partition_reassignments.v0.response import (
        AlterPartitionReassignmentsResponse as _AlterPartitionReassignmentsResponseV0,
    )
    from kio.schema.alter_partition_reassignments.v1.response import (
        AlterPartitionReassignmentsResponse as _AlterPartitionReassignmentsResponseV1,
    )

    #: The response versions it answers (kio's classes).
    Response = _AlterPartitionReassignmentsResponseV0 | _AlterPartitionReassignmentsResponseV1


API_KEY = 45


def check(
    ctx: RequestContext, topic: str, partition: int, replicas: tuple[int, ...] | None
) -> tuple[ErrorCode, str | None]:
    info = ctx.broker.topics.get(topic)
    if info is None or not 0 <= partition < info.partitions:
        return (
            ErrorCode.unknown_topic_or_partition,
            f"Unable to find partition {topic}-{partition}.",
        )
    if replicas is None:
        return (
            ErrorCode.no_reassignment_in_progress,
            f"Unable to find any reassignment for partition {topic}-{partition}.",
        )
    if not replicas:
        return (
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes an empty replica list.",
        )
    seen: set[int] = set()
    for replica in replicas:
        if replica in seen:
            return (
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes the broker {replica} more than once.",
            )
        seen.add(replica)
        if replica != ctx.broker.node_id:
            return (
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes broker {replica}, but no such broker "
                "is registered.",
            )
    return ErrorCode.none, None


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    responses = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            replicas = None if p.replicas is None else tuple(int(r) for r in p.replicas)
            code, message = check(ctx, t.name, int(p.partition_index), replicas)
            parts.append(
                build(
                    types.ReassignablePartitionResponse,
                    partition_index=p.partition_index,
                    error_code=code,
                    error_message=message,
                )
            )
        responses.append(
            build(types.ReassignableTopicResponse, name=t.name, partitions=tuple(parts))
        )
    return cast(
        "Response",
        build(
            types.AlterPartitionReassignmentsResponse,
            throttle_time=timedelta(0),
            allow_replication_factor_change=bool(
                getattr(request, "allow_replication_factor_change", True)
            ),
            error_code=ErrorCode.none,
            error_message=None,
            responses=tuple(responses),
        ),
    )


SPEC = HandlerSpec(
    api_key=API_KEY,
    name="AlterPartitionReassignments",
    min_version=0,
    max_version=1,
    handle=handle,
)
