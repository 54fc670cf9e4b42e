"""StreamsGroupHeartbeat (key 88) v0: the member side of KIP-1071 streams groups.

Joins (member epoch 0, with the topology, process id and empty task lists), heartbeats, leaves
(-1, static -2); the answer carries the member epoch, the heartbeat interval, the status (missing
source or internal topics, ...) and - when they changed or the member joined - its active,
standby and warm-up tasks. The protocol is in ``broker/group/streams/coordinator.py``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from tidelog.broker.group.streams.coordinator import StreamsHeartbeat
from tidelog.broker.group.streams.model import TaskSet
from tidelog.broker.group.streams.topology import Subtopology, TopicInfo, Topology
from tidelog.broker.group.wire import client_host, heartbeat_answer, ms, task_ids
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.streams_group_heartbeat.v0.request import StreamsGroupHeartbeatRequest
    from kio.schema.streams_group_heartbeat.v0.response import StreamsGroupHeartbeatResponse

    Request = StreamsGroupHeartbeatRequest
    Response = StreamsGroupHeartbeatResponse


API_KEY = 88
#: StreamsGroupHeartbeatResponse's acceptable_recovery_lag and task_offset_interval (Kafka's
#: group.streams defaults; warm-up tasks are not assigned).
ACCEPTABLE_RECOVERY_LAG = 10000
TASK_OFFSET_INTERVAL_MS = 60000


def _topic_info(t: Any) -> TopicInfo:
    return TopicInfo(
        name=str(t.name),
        partitions=int(t.partitions),
        replication_factor=int(t.replication_factor),
        configs=tuple((str(c.key), str(c.value)) for c in t.topic_configs),
    )


def topology_from_wire(topology: Any) -> Topology | None:
    if topology is None:
        return None
    return Topology(
        epoch=int(topology.epoch),
        subtopologies=tuple(
            Subtopology(
                subtopology_id=str(s.subtopology_id),
                source_topics=tuple(str(t) for t in s.source_topics),
                source_topic_regex=tuple(str(r) for r in s.source_topic_regex),
                repartition_sink_topics=tuple(str(t) for t in s.repartition_sink_topics),
                repartition_source_topics=tuple(
                    _topic_info(t) for t in s.repartition_source_topics
                ),
                state_changelog_topics=tuple(_topic_info(t) for t in s.state_changelog_topics),
                copartition_groups=tuple(
                    (
                        tuple(int(i) for i in g.source_topics),
                        tuple(int(i) for i in g.source_topic_regex),
                        tuple(int(i) for i in g.repartition_source_topics),
                    )
                    for g in s.copartition_groups
                ),
            )
            for s in topology.subtopologies
        ),
    )


def _tasks(entries: Any) -> dict[str, frozenset[int]] | None:
    if entries is None:
        return None
    out: dict[str, frozenset[int]] = {}
    for t in entries:
        out[str(t.subtopology_id)] = out.get(str(t.subtopology_id), frozenset()) | frozenset(
            int(p) for p in t.partitions
        )
    return {k: v for k, v in out.items() if v}


def reported_from_wire(request: Any) -> TaskSet | None:
    active = _tasks(request.active_tasks)
    standby = _tasks(request.standby_tasks)
    warmup = _tasks(request.warmup_tasks)
    if active is None or standby is None or warmup is None:
        return None
    return TaskSet(active=active, standby=standby, warmup=warmup)


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    groups = ctx.broker.streams_groups
    if groups is None:
        return error_response(ctx, request, ErrorCode.coordinator_not_available)
    endpoint = request.user_endpoint
    tags = request.client_tags
    result = await groups.heartbeat(
        StreamsHeartbeat(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=int(request.member_epoch),
            endpoint_information_epoch=int(request.endpoint_information_epoch),
            instance_id=request.instance_id,
            rack_id=request.rack_id,
            rebalance_timeout_ms=ms(request.rebalance_timeout),
            topology=topology_from_wire(request.topology),
            reported=reported_from_wire(request),
            process_id=request.process_id,
            user_endpoint=None if endpoint is None else (str(endpoint.host), int(endpoint.port)),
            client_tags=None if tags is None else tuple((str(t.key), str(t.value)) for t in tags),
            shutdown_application=bool(request.shutdown_application),
            client_id=ctx.client_id or "",
            client_host=client_host(ctx),
        )
    )
    tasks = result.tasks
    endpoints = None
    if result.endpoints is not None:
        endpoints = tuple(
            build(
                types.EndpointToPartitions,
                user_endpoint=build(types.Endpoint, host=host, port=port),
                active_partitions=_topic_partitions(types, active),
                standby_partitions=_topic_partitions(types, standby),
            )
            for (host, port), active, standby in result.endpoints
        )
    answer = heartbeat_answer(
        types.StreamsGroupHeartbeatResponse,
        result.error,
        result.message,
        result.member_id,
        result.member_epoch,
        result.heartbeat_interval_ms,
        acceptable_recovery_lag=ACCEPTABLE_RECOVERY_LAG,
        task_offset_interval=timedelta(milliseconds=TASK_OFFSET_INTERVAL_MS),
        status=None
        if result.status is None
        else tuple(
            build(types.Status, status_code=code, status_detail=detail)
            for code, detail in result.status
        ),
        active_tasks=None if tasks is None else task_ids(types, tasks.active),
        standby_tasks=None if tasks is None else task_ids(types, tasks.standby),
        warmup_tasks=None if tasks is None else task_ids(types, tasks.warmup),
        endpoint_information_epoch=result.endpoint_information_epoch,
        partitions_by_user_endpoint=endpoints,
    )
    return cast("Response", answer)


def _topic_partitions(types: Any, parts: dict[str, set[int]]) -> tuple[Any, ...]:
    return tuple(
        build(types.TopicPartition, topic=t, partitions=tuple(sorted(ps)))
        for t, ps in sorted(parts.items())
    )


def error_response(ctx: RequestContext, request: Request, code: ErrorCode) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    answer = heartbeat_answer(
        types.StreamsGroupHeartbeatResponse,
        code,
        None,
        request.member_id,
        -1,
        0,
        acceptable_recovery_lag=0,
        task_offset_interval=timedelta(0),
        status=None,
        active_tasks=None,
        standby_tasks=None,
        warmup_tasks=None,
        endpoint_information_epoch=0,
        partitions_by_user_endpoint=None,
    )
    return cast("Response", answer)


SPEC = HandlerSpec(API_KEY, "StreamsGroupHeartbeat", 0, 0, handle)
