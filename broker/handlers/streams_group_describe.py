"""StreamsGroupDescribe (key 89) v0: a streams group's state, epochs, topology (with the
partition counts the coordinator configured) and members (current and target tasks, process,
endpoint, tags). The groups are in ``broker/group/streams/coordinator.py``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from tidelog.broker.group.modern import group_not_found
from tidelog.broker.group.streams.model import StreamsGroup, TaskSet
from tidelog.broker.group.streams.topology import TopicInfo
from tidelog.broker.group.wire import (
    GROUP_OPERATIONS,
    NO_THROTTLE,
    UNSET_OPERATIONS,
    described_groups,
    task_ids,
    undescribed_group,
)
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.streams_group_describe.v0.request import StreamsGroupDescribeRequest
    from kio.schema.streams_group_describe.v0.response import StreamsGroupDescribeResponse

    Request = StreamsGroupDescribeRequest
    Response = StreamsGroupDescribeResponse

API_KEY = 89


def _assignment(types: Any, tasks: TaskSet) -> Any:
    return build(
        types.Assignment,
        active_tasks=task_ids(types, tasks.active),
        standby_tasks=task_ids(types, tasks.standby),
        warmup_tasks=task_ids(types, tasks.warmup),
    )


def _topic_info(types: Any, t: TopicInfo, partitions: int) -> Any:
    return build(
        types.TopicInfo,
        name=t.name,
        partitions=partitions,
        replication_factor=t.replication_factor,
        topic_configs=tuple(build(types.KeyValue, key=k, value=v) for k, v in t.configs),
    )


def _topology(types: Any, group: StreamsGroup) -> Any:
    topology = group.topology
    if topology is None:
        return None
    known = group.metadata
    return build(
        types.Topology,
        epoch=topology.epoch,
        subtopologies=tuple(
            build(
                types.Subtopology,
                subtopology_id=s.subtopology_id,
                source_topics=s.source_topics,
                repartition_sink_topics=s.repartition_sink_topics,
                state_changelog_topics=tuple(
                    _topic_info(types, t, known.get(t.name, t.partitions))
                    for t in s.state_changelog_topics
                ),
                repartition_source_topics=tuple(
                    _topic_info(types, t, known.get(t.name, t.partitions))
                    for t in s.repartition_source_topics
                ),
            )
            for s in topology.subtopologies
        ),
    )


def _group(types: Any, group: StreamsGroup, ops: bool) -> Any:
    members = []
    for m in sorted(group.members.values(), key=lambda m: m.member_id):
        target = group.targets.get(m.member_id)
        target_tasks = (
            TaskSet()
            if target is None
            else TaskSet(active=target.active, standby=target.standby, warmup=target.warmup)
        )
        members.append(
            build(
                types.Member,
                member_id=m.member_id,
                member_epoch=m.member_epoch,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                client_id=m.client_id,
                client_host=m.client_host,
                topology_epoch=m.topology_epoch,
                process_id=m.process_id,
                user_endpoint=None
                if m.user_endpoint is None
                else build(types.Endpoint, host=m.user_endpoint[0], port=m.user_endpoint[1]),
                client_tags=tuple(build(types.KeyValue, key=k, value=v) for k, v in m.client_tags),
                task_offsets=(),
                task_end_offsets=(),
                assignment=_assignment(types, m.assigned),
                target_assignment=_assignment(types, target_tasks),
                is_classic=False,
            )
        )
    return build(
        types.DescribedGroup,
        error_code=ErrorCode.none,
        error_message=None,
        group_id=group.group_id,
        group_state=group.state(),
        group_epoch=group.group_epoch,
        assignment_epoch=group.target_epoch,
        topology=_topology(types, group),
        members=tuple(members),
        authorized_operations=GROUP_OPERATIONS if ops else UNSET_OPERATIONS,
    )


def _error(types: Any, group_id: str, code: ErrorCode, message: str | None) -> Any:
    return undescribed_group(types, group_id, code, message, topology=None)


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    groups = ctx.broker.streams_groups
    if groups is None:
        return error_response(ctx, request, ErrorCode.coordinator_not_available)
    ops = bool(request.include_authorized_operations)
    out = described_groups(
        request.group_ids,
        groups.host.runtime.inactive_error(),
        groups.describe,
        lambda group_id: group_not_found(group_id, "streams", groups.host.other_group(group_id)),
        lambda group: _group(types, group, ops),
        lambda group_id, code, message: _error(types, group_id, code, message),
    )
    return _response(types, out)


def _response(types: Any, groups: tuple[Any, ...]) -> Response:
    return cast(
        "Response",
        build(types.StreamsGroupDescribeResponse, throttle_time=NO_THROTTLE, groups=groups),
    )


def error_response(ctx: RequestContext, request: Request, code: ErrorCode) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    return _response(types, tuple(_error(types, g, code, None) for g in request.group_ids))


SPEC = HandlerSpec(API_KEY, "StreamsGroupDescribe", 0, 0, handle)
