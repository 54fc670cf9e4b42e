"""DescribeCluster (API 60) v0-1: the cluster id, the controller and the brokers (just this one).

Kafka behaviour kept (AuthHelper.computeDescribeClusterResponse): a broker answers for
``endpoint_type`` 1 (BROKER); 2 (CONTROLLER) is MISMATCHED_ENDPOINT_TYPE and any other value
UNSUPPORTED_ENDPOINT_TYPE (both INVALID_REQUEST in v0). The controller id is this broker's id (a
single node is its own controller, as Metadata says). Without an authorizer every cluster
operation is allowed, so ``cluster_authorized_operations``, when asked for, is the bit set of all
the operations Kafka supports on the CLUSTER resource.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.describe_cluster.v0.request import (
        DescribeClusterRequest as _DescribeClusterRequestV0,
    )
    from kio.schema.describe_cluster.v1.request import (
        DescribeClusterRequest as _DescribeClusterRequestV1,
    )

    #: The request versions this handler serves (kio's classes).
    Request = _DescribeClusterRequestV0 | _DescribeClusterRequestV1
    from kio.schema.describe_cluster.v0.response import (
        DescribeClusterResponse as _DescribeClusterResponseV0,
    )
    from kio.schema.describe_cluster.v1.response import (
        DescribeClusterResponse as _DescribeClusterResponseV1,
    )

    #: The response versions it answers (kio's classes).
    Response = _DescribeClusterResponseV0 | _DescribeClusterResponseV1


API_KEY = 60
ENDPOINT_BROKER = 1
ENDPOINT_CONTROLLER = 2
_ENDPOINT_NAMES = {ENDPOINT_BROKER: "BROKER", ENDPOINT_CONTROLLER: "CONTROLLER"}
#: The schema's default: "authorized operations not requested".
OPERATIONS_NOT_REQUESTED = -(2**31)
#: AclOperation codes Kafka supports on CLUSTER: ALTER, DESCRIBE, CLUSTER_ACTION,
#: DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, CREATE.
_CLUSTER_OPERATIONS = (7, 8, 9, 10, 11, 12, 5)
CLUSTER_AUTHORIZED_OPERATIONS = sum(1 << op for op in _CLUSTER_OPERATIONS)


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    broker = ctx.broker
    endpoint_type = int(getattr(request, "endpoint_type", ENDPOINT_BROKER))
    error, message = ErrorCode.none, None
    if endpoint_type not in _ENDPOINT_NAMES:
        error = ErrorCode.unsupported_endpoint_type
        message = f"Unsupported endpoint type {endpoint_type}"
    elif endpoint_type != ENDPOINT_BROKER:
        error = ErrorCode.mismatched_endpoint_type
        message = (
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of "
            f"type {_ENDPOINT_NAMES[endpoint_type]}"
        )
    if error != ErrorCode.none and ctx.api_version == 0:
        error = ErrorCode.invalid_request
    brokers: tuple[Any, ...] = ()
    operations = OPERATIONS_NOT_REQUESTED
    if error == ErrorCode.none:
        endpoint = broker.endpoint_for(ctx.listener_name)
        rack = broker.config.get("broker.rack")
        brokers = (
            build(
                types.DescribeClusterBroker,
                broker_id=broker.node_id,
                host=endpoint.advertised_host,
                port=broker.advertised_port(endpoint),
                rack=str(rack) if rack else None,
                is_fenced=False,
            ),
        )
        if request.include_cluster_authorized_operations:
            operations = CLUSTER_AUTHORIZED_OPERATIONS
    return cast(
        "Response",
        build(
            types.DescribeClusterResponse,
            throttle_time=timedelta(0),
            error_code=error,
            error_message=message,
            endpoint_type=ENDPOINT_BROKER,
            cluster_id=broker.cluster_id,
            controller_id=broker.node_id if error == ErrorCode.none else -1,
            brokers=brokers,
            cluster_authorized_operations=operations,
        ),
    )


SPEC = HandlerSpec(API_KEY, "DescribeCluster", 0, 1, handle)
