"""Shared by CreateAcls, DescribeAcls and DeleteAcls: the refusal of a whole request, wire numbers
to the ACL model."""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING, Any, TypeVar

from tidelog.broker.security.access import CLUSTER, allowed
from tidelog.broker.security.acls import (
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from tidelog.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from tidelog.broker.handlers.base import RequestContext
    from tidelog.broker.security.authorizer import Authorizer

E = TypeVar("E", bound=IntEnum)
NO_AUTHORIZER = "No authorizer is configured."


def acl_authorizer(
    ctx: RequestContext, operation: Operation, no_authorizer: str = NO_AUTHORIZER
) -> Authorizer | tuple[ErrorCode, str | None]:
    """The authorizer an ACL request may use, or why the whole request is refused (error code,
    message): SECURITY_DISABLED without an authorizer, CLUSTER_AUTHORIZATION_FAILED without
    ``operation`` on the cluster."""
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return ErrorCode.security_disabled, no_authorizer
    if not allowed(ctx, operation, CLUSTER):
        return ErrorCode.cluster_authorization_failed, None
    return authorizer


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
