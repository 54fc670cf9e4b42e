"""Client quota configs (KIP-13, KIP-124, KIP-546): what AlterClientQuotas sets and
DescribeClientQuotas reads, as Kafka's controller (``ClientQuotaControlManager``) and metadata
image (``ClientQuotasImage``) keep them.

An entity is a set of ``(entity type, name)`` pairs: ``user``, ``client-id`` (alone or both) or
``ip``; a null name is the type's ``<default>``. Each entity holds quota values by key:
``producer_byte_rate`` and ``consumer_byte_rate`` (bytes/s, whole numbers),
``request_percentage`` (percent of one request thread), ``controller_mutation_rate`` (stored,
no effect: tidelog has no controller quota), and for ``ip`` entities ``connection_creation_rate``
(stored, no effect). ``broker/client_quota_manager.py`` enforces the first three.

State changes only by ``apply`` (one ``QuotaRecord``: Kafka's ClientQuotaRecord), the same
function live (AlterClientQuotas) and at load (the records stored in
``tidelog-dynamic-configs.json`` under ``client_quotas``, ``broker/dynamic_configs.py``).

Validation and messages are Kafka's: an empty entity, a duplicate or unknown entity type, an
empty name, ``ip`` combined with another type, an unknown key ("Invalid configuration key X"),
a value not above 0, a fractional value for a whole-number key, a key given twice: INVALID_REQUEST
for that entity, the others of the request still applied. Describe filters: exact name,
default, or any name of a type (``MATCH_TYPE_SPECIFIED``), ``strict`` keeping only entities with
exactly the filtered types; a bad filter fails the whole request (INVALID_REQUEST, or
UNSUPPORTED_VERSION for an unknown entity type).

Kafka divergence: an ``ip`` entity name must be an IP address literal (Kafka also accepts a host
name it can resolve; resolving would block the event loop).

Threading: event loop only.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tidelog.protocol.errors import ErrorCode

__all__ = (
    "CLIENT_ID",
    "IP",
    "QUOTA_KEYS",
    "USER",
    "ClientQuotaConfigs",
    "ComponentFilter",
    "Entity",
    "QuotaFilterError",
    "QuotaRecord",
)

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

#: Key -> Kafka's ConfigDef type (QuotaConfig): "long" and "int" values must be whole numbers.
USER_CLIENT_QUOTA_KEYS: dict[str, str] = {
    PRODUCER_BYTE_RATE: "long",
    CONSUMER_BYTE_RATE: "long",
    REQUEST_PERCENTAGE: "double",
    CONTROLLER_MUTATION_RATE: "double",
}
IP_QUOTA_KEYS: dict[str, str] = {CONNECTION_CREATION_RATE: "int"}
QUOTA_KEYS = frozenset(USER_CLIENT_QUOTA_KEYS) | frozenset(IP_QUOTA_KEYS)

#: Kafka's MatchType ids (DescribeClientQuotas).
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

_INT_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1

#: An entity: sorted ``(entity type, name or None for <default>)`` pairs.
Entity = tuple[tuple[str, str | None], ...]


def entity_of(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    return tuple(sorted(pairs, key=lambda p: p[0]))


def describe_entity(entity: Entity) -> str:
    """Kafka's ClientQuotaEntity.toString: ``ClientQuotaEntity(entries={user=alice})``."""
    inner = ", ".join(f"{t}={n}" for t, n in entity)
    return f"ClientQuotaEntity(entries={{{inner}}})"


@dataclass(frozen=True, slots=True)
class QuotaRecord:
    """One change (Kafka's ClientQuotaRecord): set ``key`` of ``entity`` to ``value``, or remove
    it (``value`` None)."""

    entity: Entity
    key: str
    value: float | None


@dataclass(frozen=True, slots=True)
class ComponentFilter:
    """One DescribeClientQuotas filter component."""

    entity_type: str
    match_type: int
    match: str | None


class QuotaFilterError(ValueError):
    """A DescribeClientQuotas filter Kafka refuses: ``code`` and the message."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _validate_entity(pairs: Sequence[tuple[str, str | None]]) -> tuple[Entity, str | None]:
    """The entity, or an INVALID_REQUEST message (ClientQuotaControlManager.validateEntity and
    configKeysForEntityType)."""
    if not pairs:
        return (), "Invalid empty client quota entity"
    seen: dict[str, str | None] = {}
    for entity_type, name in pairs:
        if entity_type in seen:
            return (), f"Invalid client quota entity, duplicate entity entry {entity_type}"
        if entity_type not in (USER, CLIENT_ID, IP):
            return (), f"Unhandled client quota entity type: {entity_type}"
        seen[entity_type] = name
        if name is not None and name == "":
            return (), f"Empty {entity_type} not supported"
    if IP in seen:
        if USER in seen or CLIENT_ID in seen:
            # Kafka's message, its missing space included.
            return (), (
                "Invalid quota entity combination, IP entity shouldnot be combined with User "
                "or ClientId"
            )
        ip = seen[IP]
        if ip is not None:
            try:
                ipaddress.ip_address(ip)
            except ValueError:
                return (), f"{ip} is not a valid IP or resolvable host."
    return entity_of(seen.items()), None


def _validate_value(keys: Mapping[str, str], key: str, value: float) -> str | None:
    """An INVALID_REQUEST message for ``key=value``, or None (validateQuotaKeyValue)."""
    kind = keys.get(key)
    if kind is None:
        return f"Invalid configuration key {key}"
    if value <= 0.0:
        return f"Quota {key} must be greater than 0"
    if kind == "double":
        return None
    if kind == "int" and value > _INT_MAX:
        return f"Proposed value for {key} is too large for an INT."
    if kind == "long" and value > _LONG_MAX:
        return f"Proposed value for {key} is too large for a LONG."
    if abs(value % 1.0) > 1e-6:
        return f"{key} cannot be a fractional value."
    return None


class ClientQuotaConfigs:
    """Every quota entity and its values (see the module docstring)."""

    def __init__(self) -> None:
        self._entities: dict[Entity, dict[str, float]] = {}

    def apply(self, record: QuotaRecord) -> None:
        """The one way the state changes (live and at load)."""
        if record.value is None:
            values = self._entities.get(record.entity)
            if values is not None:
                values.pop(record.key, None)
                if not values:
                    del self._entities[record.entity]
        else:
            self._entities.setdefault(record.entity, {})[record.key] = float(record.value)

    def records(self) -> list[QuotaRecord]:
        """The state as records (what is stored)."""
        return [
            QuotaRecord(entity, key, value)
            for entity, values in self._entities.items()
            for key, value in values.items()
        ]

    def entities(self) -> dict[Entity, dict[str, float]]:
        return {e: dict(v) for e, v in self._entities.items()}

    # -- AlterClientQuotas -----------------------------------------------------------------------
    def alter(
        self,
        entries: Sequence[
            tuple[Sequence[tuple[str, str | None]], Sequence[tuple[str, float, bool]]]
        ],
    ) -> tuple[dict[Entity, tuple[ErrorCode, str | None]], list[QuotaRecord]]:
        """Each entity's ``(error, message)`` (one per entity, as Kafka's answer: in the order
        first named) and the records that apply the valid entries (nothing is applied here:
        ``apply`` them, unless validate-only).

        An entry is ``(entity pairs, ops)``, an op ``(key, value, remove)``. As Kafka's
        controller: a key given twice, or an entity named again, answers "Ignoring duplicate
        entity" for it (the first entry of a named-again entity is still applied).
        """
        results: dict[Entity, tuple[ErrorCode, str | None]] = {}
        records: list[QuotaRecord] = []
        for pairs, ops in entries:
            named = entity_of(pairs)
            changes: dict[str, float | None] = {}
            for key, value, remove in ops:
                if key in changes:
                    results[named] = (
                        ErrorCode.invalid_request,
                        f"Duplicate quota key {key} not updating quota for this entity "
                        f"{describe_entity(named)}",
                    )
                else:
                    changes[key] = None if remove else float(value)
            if named in results:
                results[named] = (
                    ErrorCode.invalid_request,
                    f"Ignoring duplicate entity {describe_entity(named)}",
                )
                continue
            results[named], mine = self._alter_entity(pairs, changes)
            records.extend(mine)
        return results, records

    def _alter_entity(
        self, pairs: Sequence[tuple[str, str | None]], changes: Mapping[str, float | None]
    ) -> tuple[tuple[ErrorCode, str | None], list[QuotaRecord]]:
        entity, problem = _validate_entity(pairs)
        if problem is not None:
            return (ErrorCode.invalid_request, problem), []
        keys = IP_QUOTA_KEYS if entity[0][0] == IP else USER_CLIENT_QUOTA_KEYS
        current = self._entities.get(entity, {})
        mine: list[QuotaRecord] = []
        for key, new_value in changes.items():
            if new_value is None:
                if key in current:
                    mine.append(QuotaRecord(entity, key, None))
                continue
            problem = _validate_value(keys, key, new_value)
            if problem is not None:
                return (ErrorCode.invalid_request, problem), []
            if current.get(key) != new_value:
                mine.append(QuotaRecord(entity, key, new_value))
        return (ErrorCode.none, None), mine

    # -- DescribeClientQuotas --------------------------------------------------------------------
    def describe(
        self, components: Sequence[ComponentFilter], strict: bool
    ) -> list[tuple[Entity, dict[str, float]]]:
        """The entities matching the filter and their values; ``QuotaFilterError`` for a filter
        Kafka refuses."""
        exact: dict[str, str | None] = {}
        typed: set[str] = set()
        for c in components:
            if not c.entity_type:
                raise QuotaFilterError(ErrorCode.invalid_request, "Invalid empty entity type.")
            if c.entity_type in exact or c.entity_type in typed:
                raise QuotaFilterError(
                    ErrorCode.invalid_request,
                    f"Entity type {c.entity_type} cannot appear more than once in the filter.",
                )
            if c.entity_type not in (IP, USER, CLIENT_ID):
                raise QuotaFilterError(
                    ErrorCode.unsupported_version, f"Unsupported entity type {c.entity_type}"
                )
            if c.match_type == MATCH_EXACT:
                if c.match is None:
                    raise QuotaFilterError(
                        ErrorCode.invalid_request,
                        "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                    )
                exact[c.entity_type] = c.match
            elif c.match_type == MATCH_DEFAULT:
                if c.match is not None:
                    raise QuotaFilterError(
                        ErrorCode.invalid_request,
                        "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                    )
                exact[c.entity_type] = None
            elif c.match_type == MATCH_SPECIFIED:
                if c.match is not None:
                    raise QuotaFilterError(
                        ErrorCode.invalid_request,
                        "Request specified MATCH_TYPE_SPECIFIED, but also specified a match "
                        "string.",
                    )
                typed.add(c.entity_type)
            else:
                raise QuotaFilterError(
                    ErrorCode.invalid_request, f"Unknown match type {c.match_type}"
                )
        if (IP in exact or IP in typed) and (
            USER in exact or USER in typed or CLIENT_ID in exact or CLIENT_ID in typed
        ):
            raise QuotaFilterError(
                ErrorCode.invalid_request,
                "Invalid entity filter component combination. IP filter component should not "
                "be used with user or clientId filter component.",
            )
        out = []
        for entity, values in self._entities.items():
            names = dict(entity)
            if strict and len(names) != len(exact) + len(typed):
                continue
            if any(t not in names or names[t] != n for t, n in exact.items()):
                continue
            if any(t not in names for t in typed):
                continue
            out.append((entity, dict(values)))
        return out
