"""``tidelog groups``: list, describe, reset and delete consumer groups (kafka-consumer-groups.sh).

``--describe`` prints kafka-consumer-groups' offsets table (GROUP TOPIC PARTITION CURRENT-OFFSET
LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID); ``--members`` and ``--state`` its other views.
KIP-848 consumer groups (``group.protocol=consumer``) are described with ConsumerGroupDescribe:
``--state`` adds the group epoch and target assignment epoch, ``--members`` each member's epoch,
current and target assignment (kafka-consumer-groups.sh's ``--verbose`` columns).
``--reset-offsets`` works on groups without active members, as Kafka's does: ``--dry-run`` (the
default, with a warning) shows the new offsets, ``--execute`` commits them; how the new offsets
are chosen is in ``_reset_offsets.py``.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from typing import Any

from tidelog.tools import consumer_group_describe
from tidelog.tools._common import (
    EXIT_FAILURE,
    EXIT_OK,
    GROUP_COMMAND_ERROR,
    SubParsers,
    ToolError,
    add_admin_options,
    add_timeout_ms,
    add_tool_parser,
    admin_session,
    format_table,
)
from tidelog.tools._reset_offsets import (
    new_offset,
    parse_duration_ms,
    read_reset_plan,
    reset_time_ms,
    target_partitions,
)
from tidelog.tools.probe import served_apis

__all__ = ["add_parser", "run"]

EXAMPLES = """\
  tidelog groups --bootstrap-server 127.0.0.1:9092 --list
  tidelog groups --bootstrap-server 127.0.0.1:9092 --describe --group audit
  tidelog groups --bootstrap-server 127.0.0.1:9092 --describe --group audit --members
  tidelog groups --bootstrap-server 127.0.0.1:9092 --reset-offsets --group audit \\
      --topic orders --to-earliest --dry-run
  tidelog groups --bootstrap-server 127.0.0.1:9092 --reset-offsets --group audit \\
      --topic orders:0,1 --to-datetime 2026-01-31T12:00:00.000 --execute
  tidelog groups --bootstrap-server 127.0.0.1:9092 --delete --group audit
"""

LIST_GROUPS, DESCRIBE_GROUPS, OFFSET_FETCH, DELETE_GROUPS = 16, 15, 9, 42
OFFSET_COMMIT, FIND_COORDINATOR, OFFSET_DELETE = 8, 10, 47
NEEDED = {
    "list": {LIST_GROUPS: "ListGroups"},
    "describe": {FIND_COORDINATOR: "FindCoordinator", DESCRIBE_GROUPS: "DescribeGroups",
                 OFFSET_FETCH: "OffsetFetch"},
    "reset_offsets": {FIND_COORDINATOR: "FindCoordinator", DESCRIBE_GROUPS: "DescribeGroups",
                      OFFSET_FETCH: "OffsetFetch", OFFSET_COMMIT: "OffsetCommit"},
    "delete": {FIND_COORDINATOR: "FindCoordinator", DELETE_GROUPS: "DeleteGroups"},
    "delete_offsets": {FIND_COORDINATOR: "FindCoordinator", OFFSET_DELETE: "OffsetDelete"},
}  # fmt: skip
ACTIONS = ("list", "describe", "reset_offsets", "delete", "delete_offsets")
ACTIVE_STATES = ("Stable", "PreparingRebalance", "CompletingRebalance")


def add_parser(subparsers: SubParsers) -> None:
    p = add_tool_parser(
        subparsers,
        "groups",
        help="list, describe, reset or delete consumer groups (like kafka-consumer-groups.sh)",
        description="Inspect and manage consumer groups over the Kafka protocol.",
        examples=EXAMPLES,
        run=run,
    )
    add_admin_options(
        p,
        (
            ("--list", "list groups"),
            ("--describe", "offsets and lag of a group"),
            ("--reset-offsets", "move a group's committed offsets"),
            ("--delete", "delete groups"),
            (
                "--delete-offsets",
                "delete a group's committed offsets of --topic (the group must not consume it)",
            ),
        ),
    )
    p.add_argument("--group", action="append", default=[], metavar="GROUP", help="group id")
    p.add_argument("--all-groups", action="store_true", help="every group (describe/delete)")
    p.add_argument("--offsets", action="store_true", help="--describe: offsets and lag (default)")
    p.add_argument("--members", action="store_true", help="--describe: the members")
    p.add_argument(
        "--verbose", action="store_true", help="--describe --members: each one's partitions"
    )
    p.add_argument(
        "--state",
        nargs="?",
        const="",
        default=None,
        metavar="STATE[,STATE]",
        help="--describe: state and coordinator; --list: each group's state, or only groups "
        "in these states (e.g. Stable,Empty)",
    )
    p.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="TOPIC[:P,P]",
        help="--reset-offsets: topic, optionally with partitions (repeatable)",
    )
    p.add_argument("--all-topics", action="store_true", help="--reset-offsets: every topic")
    to = p.add_mutually_exclusive_group()
    to.add_argument("--to-earliest", action="store_true", help="reset to the log start")
    to.add_argument("--to-latest", action="store_true", help="reset to the log end")
    to.add_argument("--to-current", action="store_true", help="reset to the committed offset")
    to.add_argument("--to-offset", type=int, metavar="N", help="reset to offset N")
    to.add_argument("--shift-by", type=int, metavar="N", help="move by N (may be negative)")
    to.add_argument(
        "--by-duration",
        metavar="PnDTnHnMnS",
        help="reset to the first offset at or after now minus this ISO-8601 duration "
        "(e.g. PT1H30M, P1D)",
    )
    to.add_argument(
        "--from-file",
        metavar="CSV",
        help="reset to the offsets of a CSV plan (topic,partition,offset or "
        "group,topic,partition,offset lines, as --export writes)",
    )
    to.add_argument(
        "--to-datetime",
        metavar="YYYY-MM-DDTHH:mm:SS.sss",
        help="reset to the first offset at or after this time (local time unless it ends "
        "with Z or +HH:MM)",
    )
    run_mode = p.add_mutually_exclusive_group()
    run_mode.add_argument("--dry-run", action="store_true", help="only show the new offsets")
    run_mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    p.add_argument("--export", action="store_true", help="--reset-offsets: print the plan as CSV")
    add_timeout_ms(p, "(30000)")


def _check(args: argparse.Namespace) -> str:
    action = next(a for a in ACTIONS if getattr(args, a))
    if action != "list" and not args.group and not args.all_groups:
        raise ToolError(f"--{action.replace('_', '-')} needs --group GROUP", 2)
    if args.members and args.state is not None:
        raise ToolError("--members and --state are different views: choose one", 2)
    if args.verbose and not args.members:
        raise ToolError("--verbose applies to --describe --members", 2)
    if args.export and action != "reset_offsets":
        raise ToolError("--export applies to --reset-offsets", 2)
    if action == "delete_offsets" and (len(args.group) != 1 or not args.topic):
        raise ToolError("--delete-offsets needs one --group GROUP and --topic TOPIC", 2)
    if action == "reset_offsets":
        if not args.topic and not args.all_topics and not args.from_file:
            raise ToolError("--reset-offsets needs --topic TOPIC or --all-topics", 2)
        if not any((args.to_earliest, args.to_latest, args.to_current, args.to_datetime,
                    args.by_duration, args.from_file,
                    args.to_offset is not None, args.shift_by is not None)):  # fmt: skip
            raise ToolError(
                "--reset-offsets needs one of --to-earliest, --to-latest, --to-offset N, "
                "--to-datetime T, --by-duration D, --shift-by N, --to-current, --from-file F",
                2,
            )
        if args.by_duration:
            parse_duration_ms(args.by_duration)
    return action


def _require_apis(args: argparse.Namespace, action: str) -> None:
    served = served_apis(args)
    missing = [n for k, n in NEEDED[action].items() if served and k not in served]
    if missing:
        raise ToolError(
            f"the broker at {args.bootstrap_server} does not serve consumer groups yet "
            f"({', '.join(missing)} missing from its ApiVersions)"
        )


def run(args: argparse.Namespace) -> int:
    action = _check(args)
    _require_apis(args, action)
    with admin_session(args, args.timeout_ms, GROUP_COMMAND_ERROR) as admin:
        if action == "list":
            return _list(admin, args)
        groups = sorted(_group_ids(admin)) if args.all_groups else args.group
        if action == "describe":
            return _describe(admin, args, groups)
        if action == "delete":
            return _delete(admin, groups)
        if action == "delete_offsets":
            return _delete_offsets(admin, args, groups[0])
        return _reset(admin, args, groups)


def _list(admin: Any, args: argparse.Namespace) -> int:
    """--list: ids; with --state a GROUP STATE table, only the states named when given."""
    if args.state is None:
        for gid in sorted(_group_ids(admin)):
            print(gid)
        return EXIT_OK
    wanted = {s.strip().lower() for s in args.state.split(",") if s.strip()}
    rows = []
    for g in admin.list_groups():
        gid = str(g.get("group_id") if isinstance(g, dict) else g[0])
        state = str(g.get("group_state") or "") if isinstance(g, dict) else ""
        if not state:
            state = _state(admin.describe_groups([gid]).get(gid, {}))
        if not wanted or state.lower() in wanted:
            rows.append([gid, state])
    print(format_table(["GROUP", "STATE"], sorted(rows)))
    return EXIT_OK


def _delete_offsets(admin: Any, args: argparse.Namespace, gid: str) -> int:
    """kafka-consumer-groups --delete-offsets: the group's committed offsets of --topic."""
    from kafka import TopicPartition

    committed = admin.list_group_offsets({gid: None}).get(gid, {})
    tps: list[Any] = []
    for spec in args.topic:
        topic, _, parts = spec.partition(":")
        if parts:
            tps.extend(TopicPartition(topic, int(p)) for p in parts.split(","))
        else:
            tps.extend(tp for tp in committed if tp.topic == topic)
            if not any(tp.topic == topic for tp in committed):
                tps.append(TopicPartition(topic, 0))
    result = admin.delete_group_offsets(gid, tps)
    failed = {tp: e for tp, e in result.items() if getattr(e, "errno", 0)}
    if failed:
        print("\nError: Encounter some partition level error, see the follow-up details:",
              file=sys.stderr)  # fmt: skip
    else:
        topics = ", ".join(dict.fromkeys(spec.partition(":")[0] for spec in args.topic))
        print(f"Request succeed for deleting offsets with topic {topics} group {gid}")
    print()
    print(format_table(
        ["TOPIC", "PARTITION", "STATUS"],
        [[tp.topic, tp.partition,
          f"Error: : {failed[tp].description}" if tp in failed else "Successful"]
         for tp in sorted(result, key=lambda t: (t.topic, t.partition))],
    ))  # fmt: skip
    return EXIT_FAILURE if failed else EXIT_OK


def _group_ids(admin: Any) -> list[str]:
    out = []
    for g in admin.list_groups():
        gid = g.get("group_id") if isinstance(g, dict) else (g[0] if g else None)
        if gid:
            out.append(str(gid))
    return out


def _state(desc: dict[str, Any]) -> str:
    return str(desc.get("group_state") or desc.get("state") or "Unknown")


def _assigned(member: dict[str, Any]) -> list[tuple[str, int]]:
    """(topic, partition) pairs of a described member's decoded assignment."""
    a = member.get("member_assignment")
    if a is None:
        return []
    if hasattr(a, "partitions") and callable(a.partitions):
        return [(tp.topic, tp.partition) for tp in a.partitions()]
    if isinstance(a, dict):
        out: list[tuple[str, int]] = []
        for item in a.get("assigned_partitions") or a.get("assignment") or []:
            if isinstance(item, dict):
                out.extend((item["topic"], p) for p in item.get("partitions", []))
            else:
                out.extend((item[0], p) for p in item[1])
        return out
    return []


def _describe_one(admin: Any, gid: str, bootstrap: str | None = None) -> dict[str, Any]:
    desc = admin.describe_groups([gid]).get(gid, {})
    if desc.get("error") or (_state(desc) == "Dead" and not desc.get("members")):
        # Not a classic group: a KIP-848 consumer group is "Dead" to DescribeGroups v0-5
        # (GROUP_ID_NOT_FOUND at v6); ConsumerGroupDescribe describes it, as the Java Admin's
        # describeConsumerGroups does.
        consumer = _consumer_group(bootstrap, gid)
        if consumer is not None:
            return _consumer_desc(consumer)
        if desc.get("error"):
            raise ToolError(f"Consumer group '{gid}': {desc['error']}")
    return dict(desc)


def _consumer_group(
    bootstrap: str | None, gid: str
) -> consumer_group_describe.DescribedConsumerGroup | None:
    """The consumer group ``gid`` (ConsumerGroupDescribe), or None: no such consumer group,
    or a broker without the API (it closes the connection)."""
    if not bootstrap:
        return None
    try:
        return consumer_group_describe.describe(bootstrap, gid)
    except OSError:
        return None


def _consumer_desc(group: consumer_group_describe.DescribedConsumerGroup) -> dict[str, Any]:
    """A consumer group in the shape of a classic description, plus its epochs."""
    return {
        "group_state": group.state,
        "protocol_data": group.assignor,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "members": [
            {
                "member_id": m.member_id,
                "client_host": m.client_host,
                "client_id": m.client_id,
                "member_epoch": m.member_epoch,
                "member_assignment": {"assignment": _by_topic(m.assignment)},
                "target_assignment": _by_topic(m.target),
            }
            for m in group.members
        ],
    }


def _by_topic(pairs: tuple[tuple[str, int], ...]) -> list[tuple[str, list[int]]]:
    out: dict[str, list[int]] = {}
    for topic, partition in pairs:
        out.setdefault(topic, []).append(partition)
    return sorted(out.items())


def _partitions_text(assignment: list[tuple[str, list[int]]]) -> str:
    return ",".join(f"{t}:{','.join(str(p) for p in ps)}" for t, ps in assignment) or "-"


def _end_offsets(admin: Any, tps: list[Any]) -> dict[Any, int]:
    from kafka.admin import OffsetSpec

    if not tps:
        return {}
    answer = admin.list_partition_offsets(dict.fromkeys(tps, OffsetSpec.LATEST))
    return {tp: int(o.offset) for tp, o in answer.items()}


def _describe(admin: Any, args: argparse.Namespace, groups: list[str]) -> int:
    from kafka import TopicPartition

    status = EXIT_OK
    for gid in groups:
        desc = _describe_one(admin, gid, args.bootstrap_server)
        state = _state(desc)
        members = list(desc.get("members") or [])
        if state == "Dead":
            print(f"Error: Consumer group '{gid}' does not exist.", file=sys.stderr)
            status = EXIT_FAILURE
            continue
        print()
        modern = "group_epoch" in desc  # a KIP-848 consumer group
        if args.state is not None:
            coordinator = _coordinator(admin)
            headers = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE"]
            row: list[object] = [gid, coordinator, desc.get("protocol_data") or "", state]
            if modern:
                headers += ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"]
                row += [desc["group_epoch"], desc["assignment_epoch"]]
            print(format_table([*headers, "#MEMBERS"], [[*row, len(members)]]))
            continue
        if args.members:
            if not members:
                print(f"Consumer group '{gid}' has no active members.")
                continue
            headers = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
            rows: list[list[object]] = [
                [gid, m.get("member_id", ""), m.get("client_host", ""), m.get("client_id", ""),
                 len(_assigned(m))] for m in members
            ]  # fmt: skip
            if args.verbose and not modern:
                headers.append("ASSIGNMENT")
                for row_, m in zip(rows, members, strict=True):
                    row_.append(_assignment_text(_assigned(m)))
            if modern:  # kafka-consumer-groups.sh --members --verbose columns of KIP-848
                headers += ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH",
                            "TARGET-ASSIGNMENT"]  # fmt: skip
                for row_, m in zip(rows, members, strict=True):
                    row_ += [
                        m["member_epoch"],
                        _partitions_text(m["member_assignment"]["assignment"]),
                        desc["assignment_epoch"],
                        _partitions_text(m["target_assignment"]),
                    ]
            print(format_table(headers, rows))
            continue
        if not members:
            print(f"Consumer group '{gid}' has no active members.\n")
        committed = admin.list_group_offsets({gid: None}).get(gid, {})
        owner: dict[tuple[str, int], dict[str, Any]] = {}
        for m in members:
            for tp in _assigned(m):
                owner[tp] = m
        keys = sorted(set(owner) | {(tp.topic, tp.partition) for tp in committed})
        tps = [TopicPartition(t, p) for t, p in keys]
        ends = _end_offsets(admin, tps)
        rows = []
        for tp in tps:
            c = committed.get(tp)
            current = int(c.offset) if c is not None and c.offset >= 0 else None
            end = ends.get(tp)
            lag = end - current if current is not None and end is not None else None
            m = owner.get((tp.topic, tp.partition), {})
            rows.append([
                gid, tp.topic, tp.partition, _dash(current), _dash(end), _dash(lag),
                m.get("member_id") or "-", m.get("client_host") or "-", m.get("client_id") or "-",
            ])  # fmt: skip
        print(format_table(
            ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
             "CONSUMER-ID", "HOST", "CLIENT-ID"],
            rows,
        ))  # fmt: skip
    return status


def _assignment_text(pairs: list[tuple[str, int]]) -> str:
    """``topic(0,1), other(2)`` as --members --verbose prints a member's partitions."""
    if not pairs:
        return "-"
    by_topic: dict[str, list[int]] = {}
    for topic, partition in pairs:
        by_topic.setdefault(topic, []).append(partition)
    return ", ".join(
        sorted(f"{t}({','.join(str(p) for p in sorted(ps))})" for t, ps in by_topic.items())
    )


def _coordinator(admin: Any) -> str:
    """``host:port (id)`` of the coordinator: the only broker of a single-node cluster."""
    try:
        brokers = admin.describe_cluster().get("brokers") or []
    except Exception:
        return "-"
    if len(brokers) != 1:
        return "-"
    b = brokers[0]
    return f"{b['host']}:{b['port']} ({b['broker_id']})"


def _dash(v: int | None) -> str:
    return "-" if v is None else str(v)


def _delete(admin: Any, groups: list[str]) -> int:
    result = admin.delete_groups(groups)
    pairs = result.items() if isinstance(result, dict) else result
    failed = [(g, e) for g, e in pairs if str(e) not in ("OK", "NoError", "None")]
    if failed:
        print("Deletion of some consumer groups failed:", file=sys.stderr)
        for gid, err in failed:
            reason = "it does not exist" if "GroupIdNotFound" in str(err) else str(err)
            print(f"* Group '{gid}' could not be deleted due to: {reason}", file=sys.stderr)
        return EXIT_FAILURE
    names = ", ".join(f"'{g}'" for g in groups)
    print(f"Deletion of requested consumer groups ({names}) was successful.")
    return EXIT_OK


def _reset(admin: Any, args: argparse.Namespace, groups: list[str]) -> int:
    from kafka.admin import OffsetSpec
    from kafka.structs import OffsetAndMetadata

    plan = read_reset_plan(args.from_file) if args.from_file else None
    exported: list[list[Any]] = []
    if not args.dry_run and not args.execute and not args.export:
        print(
            "WARN: No action will be performed as the --execute option is missing. "
            "In a future major release, the default behavior of this command will be to "
            "prompt the user before executing the reset rather than doing a dry run. "
            "You should add the --dry-run option explicitly if you are scripting this command "
            "and want to keep the current default behavior without prompting.",
            file=sys.stderr,
        )
    for gid in groups:
        desc = _describe_one(admin, gid, args.bootstrap_server)
        state = _state(desc)
        if state in ACTIVE_STATES:
            raise ToolError(
                f"Assignments can only be reset if the group '{gid}' is inactive, but the "
                f"current state is {state} (stop its consumers first)"
            )
        committed = admin.list_group_offsets({gid: None}).get(gid, {})
        planned = plan.get(gid, plan.get("", {})) if plan is not None else None
        tps = list(planned) if planned is not None else target_partitions(admin, args, committed)
        earliest = {
            tp: int(o.offset)
            for tp, o in admin.list_partition_offsets(
                dict.fromkeys(tps, OffsetSpec.EARLIEST)
            ).items()
        }
        latest = _end_offsets(admin, tps)
        by_time: dict[Any, int] = {}
        ts = reset_time_ms(args)
        if ts is not None:
            by_time = {
                tp: int(o.offset)
                for tp, o in admin.list_partition_offsets(dict.fromkeys(tps, ts)).items()
            }
        new: dict[Any, int] = {}
        for tp in tps:
            cur = committed.get(tp)
            current = int(cur.offset) if cur is not None and cur.offset >= 0 else None
            new[tp] = new_offset(
                args,
                earliest.get(tp, 0),
                latest.get(tp, 0),
                current,
                planned[tp] if planned is not None else None,
                by_time.get(tp, -1),
            )
        if args.execute and new:
            errors = admin.alter_group_offsets(
                gid, {tp: OffsetAndMetadata(off, "", -1) for tp, off in new.items()}
            )
            bad = {tp: e for tp, e in (errors or {}).items() if getattr(e, "errno", 0)}
            if bad:
                tp, err = next(iter(bad.items()))
                raise ToolError(f"committing the new offsets failed for {tp}: {err.__name__}")
        if args.export:
            exported.extend([gid, tp.topic, tp.partition, off] for tp, off in new.items())
            continue
        print()
        print(format_table(
            ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
            [[gid, tp.topic, tp.partition, off] for tp, off in new.items()],
        ))  # fmt: skip
    if args.export:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        for row in exported:
            writer.writerow(row if len(groups) > 1 else row[1:])
        sys.stdout.write(out.getvalue())
    return EXIT_OK
