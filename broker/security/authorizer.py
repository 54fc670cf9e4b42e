"""The one ``Authorizer`` every handler asks: (principal, host, operation, resource) -> allowed.

Rules of Kafka's StandardAuthorizer:

- a super user (``super.users``) may do everything;
- the ACLs that apply to a resource are the LITERAL ones with its name, the LITERAL ``*`` of its
  type, and every PREFIXED one whose prefix starts the name; of those, the ones whose principal
  is the caller or ``User:*`` and whose host is the caller's or ``*``;
- a DENY of the operation (or of ALL) wins over any ALLOW; an ALLOW counts with Kafka's
  implications (``acls.implied_by``);
- a resource with no ACL at all is allowed only with ``allow.everyone.if.no.acl.found=true``.

ACLs are held in sorted order (resource type, pattern type, name, ...) for listings, with an
index by (type, literal name) and by (type, prefix): a check costs one look-up for the literal
name, one for ``*`` and one per prefix length in use, whatever the number of ACLs.

The ACLs are durable in ``<first log dir>/__acls.json``, written as checkpoints are (tmp +
fsync + rename + directory fsync)::

    {"version": 1, "acls": [{"resource_type": "TOPIC", "pattern_type": "LITERAL",
      "resource_name": "orders", "principal": "User:alice", "host": "*",
      "operation": "READ", "permission": "ALLOW"}]}
"""

from __future__ import annotations

import bisect
import json
import threading
from collections.abc import Iterable
from pathlib import Path

from tidelog.broker.security.acls import (
    WILDCARD,
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    implied_by,
)
from tidelog.storage.metadata import atomic_write

__all__ = ("ACL_FILE", "STANDARD_AUTHORIZER", "AclFileError", "Authorizer")

ACL_FILE = "__acls.json"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
#: Older class names that mean the same thing.
AUTHORIZER_ALIASES = (STANDARD_AUTHORIZER, "kafka.security.authorizer.AclAuthorizer")
ALL_USERS = "User:*"


class AclFileError(ValueError):
    """``__acls.json`` cannot be read: the broker does not start."""


class Authorizer:
    def __init__(
        self,
        path: Path | None,
        *,
        super_users: Iterable[str] = (),
        allow_if_no_acl: bool = False,
    ) -> None:
        self.path = path
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._sorted: list[AclBinding] = []
        self._literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self._prefixed: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        #: prefix lengths in use per resource type (the look-ups a check makes)
        self._prefix_lengths: dict[ResourceType, list[int]] = {}
        self._save_lock = threading.Lock()
        self._saved_seq = 0
        self.seq = 0
        if path is not None:
            self._load(path)

    # ------------------------------------------------------------------ checks

    def _applicable(self, rtype: ResourceType, name: str) -> list[AclBinding]:
        out: list[AclBinding] = []
        literal = self._literal.get((rtype, name))
        if literal:
            out.extend(literal)
        if name != WILDCARD:
            wildcard = self._literal.get((rtype, WILDCARD))
            if wildcard:
                out.extend(wildcard)
        lengths = self._prefix_lengths.get(rtype)
        if lengths:
            for n in lengths:
                if n > len(name):
                    break
                found = self._prefixed.get((rtype, name[:n]))
                if found:
                    out.extend(found)
        return out

    def authorize(
        self, principal: str, host: str, operation: Operation, rtype: ResourceType, name: str
    ) -> bool:
        if principal in self.super_users:
            return True
        acls = self._applicable(rtype, name)
        if not acls:
            return self.allow_if_no_acl
        allowing = implied_by(operation)
        allowed = False
        for acl in acls:
            if acl.principal != principal and acl.principal != ALL_USERS:
                continue
            if acl.host != WILDCARD and acl.host != host:
                continue
            if acl.permission == Permission.DENY:
                if acl.operation == Operation.ALL or acl.operation == operation:
                    return False
            elif acl.operation == Operation.ALL or acl.operation in allowing:
                allowed = True
        return allowed

    def authorize_any(
        self, principal: str, host: str, operation: Operation, rtype: ResourceType
    ) -> bool:
        """Kafka's ``authorizeByResourceType``: may the caller do ``operation`` on at least
        one resource of ``rtype`` (used for IDEMPOTENT_WRITE = WRITE on any topic)?"""
        if principal in self.super_users:
            return True
        if self.authorize(principal, host, operation, rtype, WILDCARD):
            return True
        allowing = implied_by(operation)
        any_acl = False
        for acl in self._sorted:
            if acl.resource_type != rtype:
                continue
            any_acl = True
            if acl.principal not in (principal, ALL_USERS):
                continue
            if acl.host not in (WILDCARD, host):
                continue
            if acl.permission == Permission.ALLOW and (
                acl.operation == Operation.ALL or acl.operation in allowing
            ):
                return True
        return not any_acl and self.allow_if_no_acl

    # ------------------------------------------------------------------ changes

    def _add(self, binding: AclBinding) -> bool:
        i = bisect.bisect_left(self._sorted, binding)
        if i < len(self._sorted) and self._sorted[i] == binding:
            return False
        self._sorted.insert(i, binding)
        key = (binding.resource_type, binding.resource_name)
        if binding.pattern_type == PatternType.PREFIXED:
            self._prefixed.setdefault(key, []).append(binding)
            lengths = self._prefix_lengths.setdefault(binding.resource_type, [])
            n = len(binding.resource_name)
            j = bisect.bisect_left(lengths, n)
            if j == len(lengths) or lengths[j] != n:
                lengths.insert(j, n)
        else:
            self._literal.setdefault(key, []).append(binding)
        return True

    def _remove(self, binding: AclBinding) -> None:
        i = bisect.bisect_left(self._sorted, binding)
        if i < len(self._sorted) and self._sorted[i] == binding:
            del self._sorted[i]
        key = (binding.resource_type, binding.resource_name)
        index = self._prefixed if binding.pattern_type == PatternType.PREFIXED else self._literal
        entries = index.get(key)
        if entries and binding in entries:
            entries.remove(binding)
            if not entries:
                del index[key]
                if binding.pattern_type == PatternType.PREFIXED:
                    n = len(binding.resource_name)
                    if not any(
                        t == binding.resource_type and len(name) == n for t, name in self._prefixed
                    ):
                        self._prefix_lengths[binding.resource_type].remove(n)

    def create(self, bindings: Iterable[AclBinding]) -> list[str | None]:
        """Add bindings (in memory; ``save`` makes them durable): per binding, why it was
        refused or None."""
        out: list[str | None] = []
        for binding in bindings:
            reason = binding.invalid_reason()
            if reason is None:
                self._add(binding)
            out.append(reason)
        self.seq += 1
        return out

    def describe(self, acl_filter: AclFilter) -> list[AclBinding]:
        return [b for b in self._sorted if acl_filter.matches(b)]

    def delete(self, filters: Iterable[AclFilter]) -> list[list[AclBinding]]:
        results = []
        for acl_filter in filters:
            matched = self.describe(acl_filter)
            for binding in matched:
                self._remove(binding)
            results.append(matched)
        self.seq += 1
        return results

    def __len__(self) -> int:
        return len(self._sorted)

    # ------------------------------------------------------------------ durability

    def snapshot(self) -> tuple[int, bytes]:
        items = [
            {
                "resource_type": b.resource_type.name,
                "pattern_type": b.pattern_type.name,
                "resource_name": b.resource_name,
                "principal": b.principal,
                "host": b.host,
                "operation": b.operation.name,
                "permission": b.permission.name,
            }
            for b in self._sorted
        ]
        return self.seq, json.dumps({"version": 1, "acls": items}, indent=1).encode("utf-8")

    def save(self, seq: int, data: bytes) -> None:
        """Write a snapshot (blocking: a worker thread); an older snapshot than the last one
        written is skipped."""
        if self.path is None:
            return
        with self._save_lock:
            if seq < self._saved_seq:
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, data)
            self._saved_seq = seq

    def _load(self, path: Path) -> None:
        try:
            raw = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return  # no file yet (a log dir that is not a directory: start() says so)
        try:
            for item in json.loads(raw)["acls"]:
                self._add(
                    AclBinding(
                        ResourceType[item["resource_type"]],
                        PatternType[item["pattern_type"]],
                        str(item["resource_name"]),
                        str(item["principal"]),
                        str(item["host"]),
                        Operation[item["operation"]],
                        Permission[item["permission"]],
                    )
                )
        except (ValueError, KeyError, TypeError) as exc:
            raise AclFileError(
                f"{path} is not a readable ACL file ({exc}): restore it from a backup, or move "
                "it away to start with no ACLs and add them again (tidelog acls --add, "
                "kafka-acls.sh --add) as a super user"
            ) from None
