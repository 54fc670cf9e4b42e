"""Shared by CreateAcls, DescribeAcls and DeleteAcls: wire numbers to the ACL model."""

from __future__ import annotations

from enum import IntEnum
from typing import Any, TypeVar

from tidelog.broker.security.acls import (
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

E = TypeVar("E", bound=IntEnum)


def enum_of(cls: type[E], value: int) -> E:
    try:
        return cls(int(value))
    except ValueError:
        return cls(0)  # UNKNOWN


def binding_of(c: Any) -> AclBinding:
    return AclBinding(
        enum_of(ResourceType, c.resource_type),
        enum_of(PatternType, getattr(c, "resource_pattern_type", 3)),
        str(c.resource_name),
        str(c.principal),
        str(c.host),
        enum_of(Operation, c.operation),
        enum_of(Permission, c.permission_type),
    )


def filter_of(f: Any) -> tuple[AclFilter, str | None]:
    """The filter and why it is invalid (UNKNOWN values), or None."""
    acl_filter = AclFilter(
        enum_of(ResourceType, f.resource_type_filter),
        f.resource_name_filter,
        enum_of(PatternType, getattr(f, "pattern_type_filter", 3)),
        f.principal_filter,
        f.host_filter,
        enum_of(Operation, f.operation),
        enum_of(Permission, f.permission_type),
    )
    unknown = [
        label
        for label, value in (
            ("resource type", acl_filter.resource_type),
            ("pattern type", acl_filter.pattern_type),
            ("operation", acl_filter.operation),
            ("permission type", acl_filter.permission),
        )
        if value == 0
    ]
    return acl_filter, (f"unknown {', '.join(unknown)} in the filter" if unknown else None)
