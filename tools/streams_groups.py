"""``tidelog streams-groups``: list, describe and delete streams groups (kafka-streams-groups.sh).

``--describe`` prints kafka-streams-groups' views: ``--offsets`` (the default: GROUP TOPIC
PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG of the committed offsets), ``--members`` (GROUP
MEMBER PROCESS CLIENT-ID ASSIGNMENTS, tasks as ``subtopology_partition``) and ``--state``
(GROUP COORDINATOR (ID) STATE #MEMBERS). ``--reset-offsets`` moves the committed offsets of a
group without members (``--topic TOPIC[:P,P]``; ``--to-earliest``, ``--to-latest``,
``--to-offset N``, ``--to-datetime T``; ``--dry-run`` shows the plan, ``--execute`` commits it).
``--delete`` removes empty groups and their offsets.
StreamsGroupDescribe goes over one raw connection (``_share_wire``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import request_types
from tidelog.tools._common import (
    EXIT_FAILURE,
    EXIT_OK,
    SubParsers,
    ToolError,
    add_admin_options,
    add_tool_parser,
    format_table,
)
from tidelog.tools._share_wire import WireSession
from tidelog.tools.share_groups import (
    add_group_arguments,
    list_offsets,
    reset_plan,
    topic_partitions,
)

__all__ = ["add_parser", "run"]

EXAMPLES = """\
  tidelog streams-groups --bootstrap-server 127.0.0.1:9092 --list
  tidelog streams-groups --bootstrap-server 127.0.0.1:9092 --describe --group my-app
  tidelog streams-groups --bootstrap-server 127.0.0.1:9092 --describe --group my-app --members
  tidelog streams-groups --bootstrap-server 127.0.0.1:9092 --reset-offsets --group my-app \\
      --topic orders --to-earliest --execute
  tidelog streams-groups --bootstrap-server 127.0.0.1:9092 --delete --group my-app
"""

#: (API key, version) of the requests sent
LIST_GROUPS, OFFSET_FETCH, DELETE_GROUPS, STREAMS_GROUP_DESCRIBE = (16, 5), (9, 8), (42, 2), (89, 0)
OFFSET_COMMIT = (8, 9)
LATEST = -1
ACTIONS = ("list", "describe", "reset_offsets", "delete")


def add_parser(subparsers: SubParsers) -> None:
    p = add_tool_parser(
        subparsers,
        "streams-groups",
        help="list, describe or delete streams groups (like kafka-streams-groups.sh)",
        description="Inspect and manage streams groups (KIP-1071) over the Kafka protocol.",
        examples=EXAMPLES,
        run=run,
    )
    add_admin_options(
        p,
        (
            ("--list", "list streams groups"),
            ("--describe", "offsets and lag, members or state of a group"),
            ("--reset-offsets", "move an empty group's committed offsets"),
            ("--delete", "delete empty streams groups and their offsets"),
        ),
    )
    add_group_arguments(
        p,
        members_help="--describe: the members and tasks",
        topic_help="--reset-offsets: topic, optionally with partitions",
    )


def run(args: argparse.Namespace) -> int:
    action = next(a for a in ACTIONS if getattr(args, a))
    flag = "--" + action.replace("_", "-")
    if action != "list" and not args.group:
        raise ToolError(f"{flag} needs --group GROUP", 2)
    if action == "reset_offsets" and (len(args.group) != 1 or not args.topic):
        raise ToolError("--reset-offsets needs one --group GROUP and --topic", 2)
    if action == "reset_offsets" and not (
        args.to_earliest or args.to_latest or args.to_datetime or args.to_offset is not None
    ):
        raise ToolError(
            "--reset-offsets needs one of --to-earliest, --to-latest, --to-offset N, "
            "--to-datetime T",
            2,
        )
    if sum((args.offsets, args.members, args.state)) > 1:
        raise ToolError("--offsets, --members and --state are different views: choose one", 2)
    try:
        with WireSession(args.bootstrap_server, args.timeout_ms / 1000.0) as wire:
            if action == "list":
                return _list(wire)
            if action == "describe":
                return _describe(wire, args)
            if action == "reset_offsets":
                return _reset(wire, args)
            return _delete(wire, args.group)
    except OSError as exc:
        raise ToolError(f"cannot reach {args.bootstrap_server}: {exc}") from exc


def _list(wire: WireSession) -> int:
    t = request_types(*LIST_GROUPS)
    answer = wire.request(t.ListGroupsRequest(states_filter=(), types_filter=("streams",)))
    for g in sorted(answer.groups, key=lambda g: str(g.group_id)):
        print(g.group_id)
    return EXIT_OK


def _describe_group(wire: WireSession, group: str) -> Any:
    t = request_types(*STREAMS_GROUP_DESCRIBE)
    answer = wire.request(
        t.StreamsGroupDescribeRequest(group_ids=(group,), include_authorized_operations=False)
    )
    return answer.groups[0]


def _reset(wire: WireSession, args: argparse.Namespace) -> int:
    group = args.group[0]
    described = _describe_group(wire, group)
    if described.error_code == ErrorCode.none and described.members:
        raise ToolError(
            f"Error: Assignments can only be reset if the group '{group}' is inactive, but the "
            f"current state is {described.group_state}."
        )
    plan = reset_plan(wire, args, topic_partitions(wire, args.topic))
    if args.execute:
        t = request_types(*OFFSET_COMMIT)
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for topic, p, offset in plan:
            by_topic.setdefault(topic, []).append((p, offset))
        answer = wire.request(
            t.OffsetCommitRequest(
                group_id=group,
                generation_id_or_member_epoch=-1,
                member_id="",
                group_instance_id=None,
                topics=tuple(
                    t.OffsetCommitRequestTopic(
                        name=topic,
                        partitions=tuple(
                            t.OffsetCommitRequestPartition(
                                partition_index=p, committed_offset=o, committed_metadata=""
                            )
                            for p, o in parts
                        ),
                    )
                    for topic, parts in by_topic.items()
                ),
            )
        )
        errors = {p.error_code for topic in answer.topics for p in topic.partitions} - {
            ErrorCode.none
        }
        if errors:
            names = ", ".join(sorted(e.name.upper() for e in errors))
            raise ToolError(f"Error: resetting offsets of streams group '{group}' failed: {names}")
    else:
        print("WARN: No action will be performed as the --execute option is missing. "
              "Add --execute to apply the new offsets.", file=sys.stderr)  # fmt: skip
    print()
    print(format_table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                       [[group, topic, p, o] for topic, p, o in plan]))  # fmt: skip
    return EXIT_OK


def _tasks(kind: str, tasks: Any) -> str:
    ids = [f"{t.subtopology_id}_{p}" for t in tasks for p in sorted(t.partitions)]
    return f"{kind}:[{', '.join(ids)}]" if ids else ""


def _describe(wire: WireSession, args: argparse.Namespace) -> int:
    status = EXIT_OK
    for group in args.group:
        described = _describe_group(wire, group)
        if described.error_code != ErrorCode.none:
            print(f"Error: Streams group '{group}' does not exist.", file=sys.stderr)
            status = EXIT_FAILURE
            continue
        print()
        if args.state:
            print(format_table(
                ["GROUP", "COORDINATOR (ID)", "STATE", "#MEMBERS"],
                [[group, f"{args.bootstrap_server.split(',')[0]} (0)",
                  described.group_state, len(described.members)]],
            ))  # fmt: skip
            continue
        if args.members:
            rows = []
            for m in described.members:
                a = m.assignment
                tasks = " ".join(
                    x
                    for x in (
                        _tasks("ACTIVE", a.active_tasks),
                        _tasks("STANDBY", a.standby_tasks),
                        _tasks("WARMUP", a.warmup_tasks),
                    )
                    if x
                )
                rows.append([group, m.member_id, m.process_id, m.client_id, tasks or "-"])
            print(format_table(["GROUP", "MEMBER", "PROCESS", "CLIENT-ID", "ASSIGNMENTS"], rows))
            continue
        print(format_table(
            ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"],
            _offset_rows(wire, group),
        ))  # fmt: skip
    return status


def _offset_rows(wire: WireSession, group: str) -> list[list[Any]]:
    t = request_types(*OFFSET_FETCH)
    answer = wire.request(
        t.OffsetFetchRequest(
            groups=(t.OffsetFetchRequestGroup(group_id=group, topics=None),),
            require_stable=False,
        )
    )
    committed = {
        (str(topic.name), int(p.partition_index)): int(p.committed_offset)
        for g in answer.groups
        for topic in g.topics
        for p in topic.partitions
        if p.committed_offset >= 0
    }
    ends = list_offsets(wire, sorted(committed), LATEST)
    return [
        [group, topic, partition, offset, ends.get((topic, partition), "-"),
         max(ends[(topic, partition)] - offset, 0) if (topic, partition) in ends else "-"]
        for (topic, partition), offset in sorted(committed.items())
    ]  # fmt: skip


def _delete(wire: WireSession, groups: list[str]) -> int:
    t = request_types(*DELETE_GROUPS)
    answer = wire.request(t.DeleteGroupsRequest(groups_names=tuple(groups)))
    failed = False
    for r in answer.results:
        if r.error_code == ErrorCode.none:
            print(f"Deletion of requested streams groups ('{r.group_id}') was successful.")
        else:
            failed = True
            name = r.error_code.name.upper()
            print(
                f"Error: Deletion of streams group '{r.group_id}' failed: {name}", file=sys.stderr
            )
    return EXIT_FAILURE if failed else EXIT_OK
