"""``tidelog acls``: add, remove and list ACLs (kafka-acls.sh).

Speaks CreateAcls, DescribeAcls and DeleteAcls through kafka-python's admin client, with
kafka-acls.sh's options: ``--add`` / ``--remove`` / ``--list``; ``--allow-principal``,
``--deny-principal``, ``--allow-host``, ``--deny-host``, ``--operation`` (repeatable);
resources ``--topic``, ``--group``, ``--cluster``, ``--transactional-id``;
``--resource-pattern-type literal|prefixed`` (and ``any|match`` for ``--list``/``--remove``);
``--principal`` filters ``--list``. ``--producer`` / ``--consumer`` add kafka-acls.sh's
convenience sets (WRITE, DESCRIBE, CREATE on topics; READ, DESCRIBE on topics and READ on groups).
"""

from __future__ import annotations

import argparse
from typing import Any

from tidelog.tools._common import (
    EXIT_OK,
    SubParsers,
    ToolError,
    add_admin_options,
    add_timeout_ms,
    add_tool_parser,
    admin_session,
)

__all__ = ["add_parser", "run"]

EXAMPLES = """\
  tidelog acls --bootstrap-server 127.0.0.1:9092 --add --allow-principal User:alice \\
      --operation Read --operation Describe --topic orders
  tidelog acls --bootstrap-server 127.0.0.1:9092 --add --allow-principal User:alice \\
      --operation Read --group orders- --resource-pattern-type prefixed
  tidelog acls --bootstrap-server 127.0.0.1:9092 --add --deny-principal User:mallory \\
      --operation All --topic '*'
  tidelog acls --bootstrap-server 127.0.0.1:9092 --add --allow-principal User:bob \\
      --producer --topic orders
  tidelog acls --bootstrap-server 127.0.0.1:9092 --list --topic orders
  tidelog acls --bootstrap-server 127.0.0.1:9092 --remove --allow-principal User:alice \\
      --operation Read --topic orders
"""

OPERATIONS = (
    "All",
    "Read",
    "Write",
    "Create",
    "Delete",
    "Alter",
    "Describe",
    "ClusterAction",
    "DescribeConfigs",
    "AlterConfigs",
    "IdempotentWrite",
)


def add_parser(subparsers: SubParsers) -> None:
    p = add_tool_parser(
        subparsers,
        "acls",
        help="add, remove or list ACLs (like kafka-acls.sh)",
        description="Manage the authorizer's ACLs over the Kafka protocol with kafka-acls.sh's "
        "options. The broker needs authorizer.class.name set, and the caller ALTER (add, "
        "remove) or DESCRIBE (list) on the cluster.",
        examples=EXAMPLES,
        run=run,
    )
    add_admin_options(
        p,
        (
            ("--add", "add ACLs"),
            ("--remove", "remove matching ACLs"),
            ("--list", "list ACLs"),
        ),
    )
    p.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL")
    p.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL")
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST")
    p.add_argument("--deny-host", action="append", default=[], metavar="HOST")
    p.add_argument(
        "--operation",
        action="append",
        default=[],
        metavar="OPERATION",
        help=f"one of {', '.join(OPERATIONS)} (repeatable)",
    )
    p.add_argument("--principal", metavar="PRINCIPAL", help="with --list: only this principal")
    p.add_argument("--topic", action="append", default=[], metavar="TOPIC")
    p.add_argument("--group", action="append", default=[], metavar="GROUP")
    p.add_argument("--transactional-id", action="append", default=[], metavar="ID")
    p.add_argument("--cluster", action="store_true", help="the cluster resource")
    p.add_argument(
        "--resource-pattern-type",
        default=None,
        choices=("literal", "prefixed", "any", "match"),
        type=str.lower,
        help="literal (default for --add) or prefixed; any/match for --list and --remove",
    )
    p.add_argument("--producer", action="store_true", help="the ACLs a producer needs")
    p.add_argument("--consumer", action="store_true", help="the ACLs a consumer needs")
    p.add_argument("--force", action="store_true", help="accepted: --remove never prompts")
    add_timeout_ms(p)


def _norm(name: str) -> str:
    return "".join(ch for ch in name.upper() if ch.isalpha())


def _kafka() -> Any:
    import kafka.admin as admin

    return admin


def _resources(args: argparse.Namespace, k: Any, pattern: Any) -> list[Any]:
    out = []
    for name in args.topic:
        out.append(k.ResourcePattern(k.ResourceType.TOPIC, name, pattern))
    for name in args.group:
        out.append(k.ResourcePattern(k.ResourceType.GROUP, name, pattern))
    for name in args.transactional_id:
        out.append(k.ResourcePattern(k.ResourceType.TRANSACTIONAL_ID, name, pattern))
    if args.cluster:
        out.append(k.ResourcePattern(k.ResourceType.CLUSTER, "kafka-cluster", pattern))
    return out


def _operations(args: argparse.Namespace, k: Any, resource: Any) -> list[Any]:
    names = list(args.operation)
    rtype = resource.resource_type
    if args.producer and rtype == k.ResourceType.TOPIC:
        names += ["Write", "Describe", "Create"]
    if args.consumer and rtype in (k.ResourceType.TOPIC, k.ResourceType.GROUP):
        names += ["Read", "Describe"] if rtype == k.ResourceType.TOPIC else ["Read"]
    by_name = {_norm(o.name): o for o in k.ACLOperation}
    ops = []
    for name in dict.fromkeys(names):
        op = by_name.get(_norm(name))
        if op is None or _norm(name) in ("ANY", "UNKNOWN"):
            raise ToolError(f"unknown --operation {name!r}: use one of {', '.join(OPERATIONS)}", 2)
        ops.append(op)
    return ops


def _pattern(args: argparse.Namespace, k: Any, default: str) -> Any:
    return k.ACLResourcePatternType[(args.resource_pattern_type or default).upper()]


def run(args: argparse.Namespace) -> int:
    k = _kafka()
    has_resource = args.topic or args.group or args.transactional_id or args.cluster
    if (args.add or args.remove) and not has_resource:
        raise ToolError("give a resource: --topic, --group, --transactional-id or --cluster", 2)
    with admin_session(args, args.timeout_ms) as admin:
        if args.add:
            return _add(admin, args, k)
        if args.remove:
            return _remove(admin, args, k)
        return _list(admin, args, k)


def _entries(args: argparse.Namespace, k: Any) -> list[tuple[str, str, Any]]:
    """(principal, host, permission) of each --allow/--deny-principal."""
    allow_hosts = args.allow_host or ["*"]
    deny_hosts = args.deny_host or ["*"]
    out = [(p, h, k.ACLPermissionType.ALLOW) for p in args.allow_principal for h in allow_hosts]
    out += [(p, h, k.ACLPermissionType.DENY) for p in args.deny_principal for h in deny_hosts]
    for principal, _, _ in out:
        if ":" not in principal:
            raise ToolError(f"principal {principal!r} must be written Type:name (User:alice)", 2)
    return out


def _add(admin: Any, args: argparse.Namespace, k: Any) -> int:
    entries = _entries(args, k)
    if not entries:
        raise ToolError("--add needs --allow-principal or --deny-principal", 2)
    acls = []
    for resource in _resources(args, k, _pattern(args, k, "literal")):
        ops = _operations(args, k, resource)
        if not ops:
            raise ToolError("--add needs --operation (or --producer / --consumer)", 2)
        for principal, host, permission in entries:
            for op in ops:
                acls.append(k.ACL(principal, host, op, permission, resource))
    result = admin.create_acls(acls)
    failed = result.get("failed", [])
    for acl in result.get("succeeded", []):
        print(f"Added ACL: {_format(acl)}")
    for acl, error in failed:
        print(f"Failed to add ACL {_format(acl)}: {error}")
    if failed:
        raise ToolError(f"{len(failed)} ACL(s) were not added")
    return EXIT_OK


def _filter(
    args: argparse.Namespace,
    k: Any,
    resource: Any,
    principal: Any,
    host: Any,
    op: Any,
    permission: Any,
) -> Any:
    pattern_filter = k.ResourcePatternFilter(
        resource.resource_type, resource.resource_name, resource.pattern_type
    )
    return k.ACLFilter(principal, host, op, permission, pattern_filter)


def _remove(admin: Any, args: argparse.Namespace, k: Any) -> int:
    filters = []
    pattern = _pattern(args, k, "literal")
    for resource in _resources(args, k, k.ACLResourcePatternType.LITERAL):
        resource.pattern_type = pattern
        entries: list[tuple[Any, Any, Any]] = list(_entries(args, k)) or [
            (None, None, k.ACLPermissionType.ANY)
        ]
        ops = _operations(args, k, resource) or [k.ACLOperation.ANY]
        for principal, host, permission in entries:
            for op in ops:
                filters.append(_filter(args, k, resource, principal, host, op, permission))
    removed = 0
    for _, acls, error in admin.delete_acls(filters):
        if _failed(error):
            raise ToolError(f"removing ACLs failed: {getattr(error, '__name__', error)}")
        for acl in acls:
            removed += 1
            print(f"Removed ACL: {_format(acl)}")
    print(f"Removed {removed} ACL(s).")
    return EXIT_OK


def _list(admin: Any, args: argparse.Namespace, k: Any) -> int:
    resources = _resources(args, k, k.ACLResourcePatternType.LITERAL)
    pattern = _pattern(args, k, "any" if not resources else "literal")
    if not resources:
        resources = [k.ResourcePatternFilter(k.ResourceType.ANY, None, pattern)]
    else:
        for resource in resources:
            resource.pattern_type = pattern
    for resource in resources:
        acl_filter = k.ACLFilter(
            args.principal,
            None,
            k.ACLOperation.ANY,
            k.ACLPermissionType.ANY,
            k.ResourcePatternFilter(resource.resource_type, resource.resource_name, pattern),
        )
        acls, error = admin.describe_acls(acl_filter)
        if _failed(error):
            raise ToolError(f"listing ACLs failed: {error}")
        by_resource: dict[tuple[str, str, str], list[Any]] = {}
        for acl in acls:
            rp = acl.resource_pattern
            key = (rp.resource_type.name, rp.resource_name, rp.pattern_type.name)
            by_resource.setdefault(key, []).append(acl)
        for (rtype, name, ptype), items in sorted(by_resource.items()):
            print(
                f"Current ACLs for resource `ResourcePattern(resourceType={rtype}, "
                f"name={name}, patternType={ptype})`:"
            )
            for acl in items:
                print(
                    f" \t(principal={acl.principal}, host={acl.host}, "
                    f"operation={acl.operation.name}, permissionType={acl.permission_type.name})"
                )
            print()
    return EXIT_OK


def _failed(error: Any) -> bool:
    """kafka-python returns an error class or instance; NoError has errno 0."""
    return error is not None and bool(getattr(error, "errno", 0))


def _format(acl: Any) -> str:
    rp = acl.resource_pattern
    return (
        f"(principal={acl.principal}, host={acl.host}, operation={acl.operation.name}, "
        f"permissionType={acl.permission_type.name}) on {rp.resource_type.name}:"
        f"{rp.pattern_type.name}:{rp.resource_name}"
    )
