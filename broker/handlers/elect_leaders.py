"""ElectLeaders (key 43) v0-2: leader elections, answered as a single-node cluster does.

This node leads every partition and is each partition's only, preferred replica, so no election
is ever needed. As Kafka's ReplicationControlManager answers: each named partition gets
ELECTION_NOT_NEEDED (PREFERRED and UNCLEAN alike: the leader is the preferred replica and is
alive); an unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION; a null partition list (every
partition) leaves out the partitions that needed nothing, so the answer is empty. An election
type other than PREFERRED (0) or UNCLEAN (1) is INVALID_REQUEST.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.elect_leaders.v0.request import ElectLeadersRequest as _ElectLeadersRequestV0
    from kio.schema.elect_leaders.v1.request import ElectLeadersRequest as _ElectLeadersRequestV1
    from kio.schema.elect_leaders.v2.request import ElectLeadersRequest as _ElectLeadersRequestV2

    #: The request versions this handler serves (kio's classes).
    Request = _ElectLeadersRequestV0 | _ElectLeadersRequestV1 | _ElectLeadersRequestV2
    from kio.schema.elect_leaders.v0.response import ElectLeadersResponse as _ElectLeadersResponseV0
    from kio.schema.elect_leaders.v1.response import ElectLeadersResponse as _ElectLeadersResponseV1
    from kio.schema.elect_leaders.v2.response import ElectLeadersResponse as _ElectLeadersResponseV2

    #: The response versions it answers (kio's classes).
    Response = _ElectLeadersResponseV0 | _ElectLeadersResponseV1 | _ElectLeadersResponseV2


API_KEY = 43
ELECTION_NOT_NEEDED_MESSAGE = "Leader election not needed for topic partition."


def _result(types: Any, partition: int, code: ErrorCode, message: str | None) -> Any:
    return build(
        types.PartitionResult, partition_id=partition, error_code=code, error_message=message
    )


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    election_type = int(getattr(request, "election_type", 0))
    top_error = ErrorCode.none
    results = []
    if election_type not in (0, 1):
        top_error = ErrorCode.invalid_request
    elif request.topic_partitions is not None:
        for t in request.topic_partitions:
            info = ctx.broker.topics.get(t.topic)
            parts = []
            for p in t.partitions:
                index = int(p)
                if info is None:
                    parts.append(
                        _result(
                            types,
                            index,
                            ErrorCode.unknown_topic_or_partition,
                            f"No such topic as {t.topic}",
                        )
                    )
                elif not 0 <= index < info.partitions:
                    parts.append(
                        _result(
                            types,
                            index,
                            ErrorCode.unknown_topic_or_partition,
                            f"No such partition as {t.topic}-{index}",
                        )
                    )
                else:
                    parts.append(
                        _result(
                            types, index, ErrorCode.election_not_needed, ELECTION_NOT_NEEDED_MESSAGE
                        )
                    )
            results.append(
                build(types.ReplicaElectionResult, topic=t.topic, partition_result=tuple(parts))
            )
    return cast(
        "Response",
        build(
            types.ElectLeadersResponse,
            throttle_time=timedelta(0),
            error_code=top_error,
            replica_election_results=tuple(results),
        ),
    )


SPEC = HandlerSpec(
    api_key=API_KEY, name="ElectLeaders", min_version=0, max_version=2, handle=handle
)
