"""Kafka's ACL model: bindings, filters and the rules of matching.

A binding is (resource type, resource name, pattern type, principal, host, operation,
permission), numbered as on the wire (CreateAcls, DescribeAcls, DeleteAcls):

- resource types: TOPIC 2, GROUP 3, CLUSTER 4 (name ``kafka-cluster``), TRANSACTIONAL_ID 5;
- pattern types: LITERAL 3 (the name, or ``*`` for every resource), PREFIXED 4; filters also
  take ANY 1 and MATCH 2 (the patterns that would match a name);
- operations: ALL 2, READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8,
  CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12;
- permissions: DENY 2, ALLOW 3.

Kafka's implications: an ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE; an ALLOW of
ALTER_CONFIGS also allows DESCRIBE_CONFIGS; ALL covers every operation (allowing or denying).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

__all__ = (
    "CLUSTER_NAME",
    "AclBinding",
    "AclFilter",
    "Operation",
    "PatternType",
    "Permission",
    "ResourceType",
    "implied_by",
)

CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_IMPLIES: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset(
        {Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
    ),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
}


def implied_by(operation: Operation) -> frozenset[Operation]:
    """The operations whose ALLOW allows ``operation`` (ALL aside)."""
    return _IMPLIES.get(operation, frozenset({operation}))


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    resource_type: ResourceType
    pattern_type: PatternType
    resource_name: str
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def invalid_reason(self) -> str | None:
        """Why CreateAcls refuses this binding (Kafka's InvalidRequestException), or None."""
        if self.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            return "resource type must be TOPIC, GROUP, CLUSTER or TRANSACTIONAL_ID"
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            return "pattern type must be LITERAL or PREFIXED"
        if self.operation in (Operation.UNKNOWN, Operation.ANY):
            return "operation must not be UNKNOWN or ANY"
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            return "permission must be ALLOW or DENY"
        if not self.resource_name:
            return "resource name must not be empty"
        if self.resource_type == ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            return f"the cluster resource is named {CLUSTER_NAME}"
        if self.pattern_type == PatternType.PREFIXED and self.resource_name == WILDCARD:
            return "a PREFIXED pattern cannot be '*'"
        if ":" not in self.principal:
            return f"principal {self.principal!r} must be written Type:name (User:alice)"
        if not self.host:
            return "host must not be empty (use '*')"
        return None


@dataclass(frozen=True, slots=True)
class AclFilter:
    """DescribeAcls / DeleteAcls filter: None fields (and ANY) match everything."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and b.resource_type != self.resource_type:
            return False
        if not self._pattern_matches(b):
            return False
        if self.principal is not None and b.principal != self.principal:
            return False
        if self.host is not None and b.host != self.host:
            return False
        if self.operation != Operation.ANY and b.operation != self.operation:
            return False
        return self.permission == Permission.ANY or b.permission == self.permission

    def _pattern_matches(self, b: AclBinding) -> bool:
        name = self.resource_name
        if self.pattern_type == PatternType.MATCH:
            if name is None:
                return True
            if b.pattern_type == PatternType.LITERAL:
                return b.resource_name in (name, WILDCARD)
            return b.pattern_type == PatternType.PREFIXED and name.startswith(b.resource_name)
        if self.pattern_type != PatternType.ANY and b.pattern_type != self.pattern_type:
            return False
        return name is None or b.resource_name == name
