"""What handlers call to check a request: ``allowed(ctx, operation, resource type, name)``.

Without an authorizer (``authorizer.class.name`` unset) every check is one attribute test and
returns True. A denial is logged (rate-limited) and counted by ``BrokerSecurity.denied``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidelog.broker.security.acls import CLUSTER_NAME, Operation, ResourceType

if TYPE_CHECKING:
    from tidelog.broker.handlers.base import RequestContext

__all__ = ("CLUSTER", "GROUP", "TOPIC", "TRANSACTIONAL_ID", "Operation", "allowed", "allowed_any")

TOPIC = ResourceType.TOPIC
GROUP = ResourceType.GROUP
CLUSTER = ResourceType.CLUSTER
TRANSACTIONAL_ID = ResourceType.TRANSACTIONAL_ID


def allowed(
    ctx: RequestContext,
    operation: Operation,
    rtype: ResourceType,
    name: str = CLUSTER_NAME,
    *,
    log_denial: bool = True,
) -> bool:
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return True
    if authorizer.authorize(ctx.principal, ctx.client_host, operation, rtype, name):
        return True
    if log_denial:
        api = f"api key {ctx.api_key} v{ctx.api_version}"
        ctx.broker.security.denied(ctx.principal, ctx.client_host, operation, rtype, name, api)
    return False


def allowed_any(ctx: RequestContext, operation: Operation, rtype: ResourceType) -> bool:
    """May the caller do ``operation`` on some resource of ``rtype``?"""
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize_any(ctx.principal, ctx.client_host, operation, rtype)
