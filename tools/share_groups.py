"""``tidelog share-groups``: list, describe, reset and delete share groups (kafka-share-groups.sh).

``--describe`` prints kafka-share-groups' views: ``--offsets`` (the default: GROUP TOPIC
PARTITION START-OFFSET LAG), ``--members`` (GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS
ASSIGNMENT) and ``--state`` (GROUP COORDINATOR (ID) STATE #MEMBERS). ``--reset-offsets`` moves
the share-partition start offsets of a group without members (``--to-earliest``,
``--to-latest``, ``--to-offset N``, ``--to-datetime T``; ``--dry-run`` shows the plan,
``--execute`` applies it); ``--delete-offsets`` forgets a group's state for ``--topic``;
``--delete`` removes empty groups. The share APIs go over one raw connection
(``_share_wire``): kafka-python does not speak them.
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
    add_timeout_ms,
    add_tool_parser,
    format_table,
)
from tidelog.tools._reset_offsets import parse_datetime
from tidelog.tools._share_wire import WireSession

__all__ = ["add_parser", "run"]

EXAMPLES = """\
  tidelog share-groups --bootstrap-server 127.0.0.1:9092 --list
  tidelog share-groups --bootstrap-server 127.0.0.1:9092 --describe --group jobs
  tidelog share-groups --bootstrap-server 127.0.0.1:9092 --describe --group jobs --members
  tidelog share-groups --bootstrap-server 127.0.0.1:9092 --reset-offsets --group jobs \\
      --topic orders --to-earliest --execute
  tidelog share-groups --bootstrap-server 127.0.0.1:9092 --delete --group jobs
"""

#: (API key, version) of the requests sent
LIST_GROUPS, METADATA, LIST_OFFSETS, DELETE_GROUPS = (16, 5), (3, 12), (2, 7), (42, 2)
SHARE_GROUP_DESCRIBE, DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS = (
    (77, 1),
    (90, 1),
    (91, 0),
    (92, 0),
)
ACTIONS = ("list", "describe", "reset_offsets", "delete", "delete_offsets")


def add_parser(subparsers: SubParsers) -> None:
    p = add_tool_parser(
        subparsers,
        "share-groups",
        help="list, describe, reset or delete share groups (like kafka-share-groups.sh)",
        description="Inspect and manage share groups (KIP-932) over the Kafka protocol.",
        examples=EXAMPLES,
        run=run,
    )
    add_admin_options(
        p,
        (
            ("--list", "list share groups"),
            ("--describe", "start offsets and lag, members or state of a group"),
            ("--reset-offsets", "move an empty group's share-partition start offsets"),
            ("--delete", "delete empty share groups"),
            ("--delete-offsets", "forget an empty group's state of --topic"),
        ),
    )
    add_group_arguments(
        p,
        members_help="--describe: the members",
        topic_help="--reset-offsets / --delete-offsets: topic, optionally with partitions",
    )


def add_group_arguments(p: argparse.ArgumentParser, *, members_help: str, topic_help: str) -> None:
    """What kafka-share-groups.sh and kafka-streams-groups.sh share after their actions:
    ``--group``, the ``--describe`` views, ``--topic`` and the ``--reset-offsets`` arguments."""
    p.add_argument("--group", action="append", default=[], metavar="GROUP", help="group id")
    p.add_argument("--offsets", action="store_true", help="--describe: offsets and lag (default)")
    p.add_argument("--members", action="store_true", help=members_help)
    p.add_argument("--state", action="store_true", help="--describe: state and member count")
    p.add_argument("--topic", action="append", default=[], metavar="TOPIC[:P,P]", help=topic_help)
    add_reset_arguments(p)


def add_reset_arguments(p: argparse.ArgumentParser) -> None:
    """``--to-earliest | --to-latest | --to-offset N | --to-datetime T`` and
    ``--dry-run | --execute`` of ``--reset-offsets``."""
    to = p.add_mutually_exclusive_group()
    to.add_argument("--to-earliest", action="store_true", help="reset to the log start")
    to.add_argument("--to-latest", action="store_true", help="reset to the log end")
    to.add_argument("--to-offset", type=int, metavar="N", help="reset to offset N")
    to.add_argument(
        "--to-datetime",
        metavar="YYYY-MM-DDTHH:mm:SS.sss",
        help="reset to the first offset at or after this time",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="only show the new offsets")
    mode.add_argument("--execute", action="store_true", help="apply the new offsets")
    add_timeout_ms(p, "(30000)")


def _check(args: argparse.Namespace) -> str:
    action = next(a for a in ACTIONS if getattr(args, a))
    if action != "list" and not args.group:
        raise ToolError(f"--{action.replace('_', '-')} needs --group GROUP", 2)
    if sum((args.offsets, args.members, args.state)) > 1:
        raise ToolError("--offsets, --members and --state are different views: choose one", 2)
    if action in ("reset_offsets", "delete_offsets") and (len(args.group) != 1 or not args.topic):
        raise ToolError(f"--{action.replace('_', '-')} needs one --group GROUP and --topic", 2)
    if action == "reset_offsets" and not (
        args.to_earliest or args.to_latest or args.to_datetime or args.to_offset is not None
    ):
        raise ToolError(
            "--reset-offsets needs one of --to-earliest, --to-latest, --to-offset N, "
            "--to-datetime T",
            2,
        )
    return action


def run(args: argparse.Namespace) -> int:
    action = _check(args)
    try:
        with WireSession(args.bootstrap_server, args.timeout_ms / 1000.0) as wire:
            if action == "list":
                return _list(wire)
            if action == "describe":
                return _describe(wire, args)
            if action == "delete":
                return _delete(wire, args.group)
            if action == "delete_offsets":
                return _delete_offsets(wire, args.group[0], args.topic)
            return _reset(wire, args)
    except OSError as exc:
        raise ToolError(f"cannot reach {args.bootstrap_server}: {exc}") from exc


def _types(api_key_version: tuple[int, int]) -> Any:
    return request_types(*api_key_version)


def _list(wire: WireSession) -> int:
    t = _types(LIST_GROUPS)
    answer = wire.request(t.ListGroupsRequest(states_filter=(), types_filter=("share",)))
    for g in sorted(answer.groups, key=lambda g: str(g.group_id)):
        print(g.group_id)
    return EXIT_OK


def _describe_group(wire: WireSession, group: str) -> Any:
    t = _types(SHARE_GROUP_DESCRIBE)
    answer = wire.request(
        t.ShareGroupDescribeRequest(group_ids=(group,), include_authorized_operations=False)
    )
    return answer.groups[0]


def _describe(wire: WireSession, args: argparse.Namespace) -> int:
    status = EXIT_OK
    for group in args.group:
        described = _describe_group(wire, group)
        if args.members or args.state:
            if described.error_code != ErrorCode.none:
                print(f"Error: Share group '{group}' does not exist.", file=sys.stderr)
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
            rows = []
            for m in described.members:
                parts = [
                    f"{tp.topic_name}:{','.join(str(p) for p in tp.partitions)}"
                    for tp in m.assignment.topic_partitions
                ]
                count = sum(len(tp.partitions) for tp in m.assignment.topic_partitions)
                rows.append([group, m.member_id, m.client_host, m.client_id, count,
                             ";".join(parts) or "-"])  # fmt: skip
            print(format_table(
                ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"], rows
            ))  # fmt: skip
            continue
        t = _types(DESCRIBE_OFFSETS)
        answer = wire.request(
            t.DescribeShareGroupOffsetsRequest(
                groups=(t.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None),)
            )
        )
        g = answer.groups[0]
        if g.error_code != ErrorCode.none:
            print(f"Error: Share group '{group}' does not exist.", file=sys.stderr)
            status = EXIT_FAILURE
            continue
        rows = [
            [group, topic.topic_name, p.partition_index,
             p.start_offset if p.start_offset >= 0 else "-", p.lag if p.lag >= 0 else "-"]
            for topic in g.topics
            for p in topic.partitions
        ]  # fmt: skip
        print()
        print(format_table(["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"], rows))
    return status


def _delete(wire: WireSession, groups: list[str]) -> int:
    t = _types(DELETE_GROUPS)
    answer = wire.request(t.DeleteGroupsRequest(groups_names=tuple(groups)))
    failed = False
    for r in answer.results:
        if r.error_code == ErrorCode.none:
            print(f"Deletion of requested share groups ('{r.group_id}') was successful.")
        else:
            failed = True
            print(f"Error: Deletion of share group '{r.group_id}' failed: {r.error_code.name}",
                  file=sys.stderr)  # fmt: skip
    return EXIT_FAILURE if failed else EXIT_OK


def _delete_offsets(wire: WireSession, group: str, topics: list[str]) -> int:
    t = _types(DELETE_OFFSETS)
    answer = wire.request(
        t.DeleteShareGroupOffsetsRequest(
            group_id=group,
            topics=tuple(
                t.DeleteShareGroupOffsetsRequestTopic(topic_name=s.partition(":")[0])
                for s in topics
            ),
        )
    )
    if answer.error_code != ErrorCode.none:
        raise ToolError(f"Error: deleting offsets of share group '{group}' failed: "
                        f"{answer.error_message or answer.error_code.name}")  # fmt: skip
    rows = [
        [
            r.topic_name,
            "Successful" if r.error_code == ErrorCode.none else f"Error: {r.error_code.name}",
        ]
        for r in answer.responses
    ]
    print(format_table(["TOPIC", "STATUS"], rows))
    return (
        EXIT_OK if all(r.error_code == ErrorCode.none for r in answer.responses) else EXIT_FAILURE
    )


def topic_partitions(wire: WireSession, specs: list[str]) -> list[tuple[str, int]]:
    """The partitions of ``--topic TOPIC[:P,P]`` specs (all of a topic's, from Metadata)."""
    out: list[tuple[str, int]] = []
    t = _types(METADATA)
    for spec in specs:
        topic, _, parts = spec.partition(":")
        if parts:
            out.extend((topic, int(p)) for p in parts.split(","))
            continue
        answer = wire.request(
            t.MetadataRequest(
                topics=(t.MetadataRequestTopic(topic_id=None, name=topic),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
        found = answer.topics[0]
        if found.error_code != ErrorCode.none:
            raise ToolError(f"Error: topic '{topic}': {found.error_code.name}")
        out.extend((topic, int(p.partition_index)) for p in found.partitions)
    return sorted(out)


def list_offsets(wire: WireSession, tps: list[tuple[str, int]], timestamp: int) -> dict[Any, int]:
    t = _types(LIST_OFFSETS)
    by_topic: dict[str, list[int]] = {}
    for topic, p in tps:
        by_topic.setdefault(topic, []).append(p)
    answer = wire.request(
        t.ListOffsetsRequest(
            replica_id=-1,
            isolation_level=0,
            topics=tuple(
                t.ListOffsetsTopic(
                    name=topic,
                    partitions=tuple(
                        t.ListOffsetsPartition(partition_index=p, timestamp=timestamp)
                        for p in parts
                    ),
                )
                for topic, parts in by_topic.items()
            ),
        )
    )
    return {
        (topic.name, int(p.partition_index)): int(p.offset)
        for topic in answer.topics
        for p in topic.partitions
    }


def reset_plan(
    wire: WireSession, args: argparse.Namespace, tps: list[tuple[str, int]]
) -> list[tuple[str, int, int]]:
    """(topic, partition, new offset) for ``--to-earliest``, ``--to-latest``, ``--to-offset N``
    or ``--to-datetime T``, clamped into [log start, log end] as Kafka clamps it."""
    earliest = list_offsets(wire, tps, -2)
    latest = list_offsets(wire, tps, -1)
    by_time = list_offsets(wire, tps, parse_datetime(args.to_datetime)) if args.to_datetime else {}
    plan: list[tuple[str, int, int]] = []
    for tp in tps:
        if args.to_earliest:
            target = earliest[tp]
        elif args.to_latest:
            target = latest[tp]
        elif args.to_datetime:
            target = by_time[tp] if by_time.get(tp, -1) >= 0 else latest[tp]
        else:
            target = args.to_offset
        plan.append((tp[0], tp[1], min(max(target, earliest[tp]), latest[tp])))
    return plan


def _reset(wire: WireSession, args: argparse.Namespace) -> int:
    group = args.group[0]
    tps = topic_partitions(wire, args.topic)
    plan = reset_plan(wire, args, tps)
    if args.execute:
        t = _types(ALTER_OFFSETS)
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for topic, p, offset in plan:
            by_topic.setdefault(topic, []).append((p, offset))
        answer = wire.request(
            t.AlterShareGroupOffsetsRequest(
                group_id=group,
                topics=tuple(
                    t.AlterShareGroupOffsetsRequestTopic(
                        topic_name=topic,
                        partitions=tuple(
                            t.AlterShareGroupOffsetsRequestPartition(
                                partition_index=p, start_offset=o
                            )
                            for p, o in parts
                        ),
                    )
                    for topic, parts in by_topic.items()
                ),
            )
        )
        if answer.error_code != ErrorCode.none:
            raise ToolError(f"Error: resetting offsets of share group '{group}' failed: "
                            f"{answer.error_message or answer.error_code.name}")  # fmt: skip
    else:
        print("WARN: No action will be performed as the --execute option is missing. "
              "Add --execute to apply the new offsets.", file=sys.stderr)  # fmt: skip
    print()
    print(format_table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                       [[group, topic, p, o] for topic, p, o in plan]))  # fmt: skip
    return EXIT_OK
