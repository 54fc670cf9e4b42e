"""The Schema Registry's operations, as Confluent's REST API v1 defines them.

Reads answer from ``RegistryState``. Writes run one at a time (``asyncio.Lock``): decide from
the state, hand the records to ``write`` (which returns once they are durable in ``_schemas``
and replayed into the state: the state changes only by replay), then answer from the state.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from tidelog.broker.schema_registry.errors import RegistryError
from tidelog.schema.compatibility import COMPATIBILITY_LEVELS, check_compatibility
from tidelog.schema.formats import (
    Dependency,
    InvalidSchemaError,
    ParsedSchema,
    parse_schema,
    serialized,
)
from tidelog.schema.records import (
    AVRO,
    PROTOBUF,
    SCHEMA_TYPES,
    ConfigValue,
    DeleteSubjectValue,
    ModeValue,
    RegistryKey,
    SchemaReference,
    SchemaValue,
    Value,
)
from tidelog.schema.state import RegistryState

__all__ = ("MODES", "SchemaRegistry")

Write = Callable[[list[tuple[RegistryKey, Value]]], Awaitable[None]]
RunBlocking = Callable[..., Awaitable[Any]]
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
_MAX_VERSION = 2**31 - 1
#: Parsed schemas kept (by type, text and references).
_PARSED_CACHE = 1024
Identity = tuple[str, str, tuple[SchemaReference, ...]]


def _json_value(value: SchemaValue, *, with_subject: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if with_subject:
        out = {"subject": value.subject, "version": value.version, "id": value.id}
    if value.schema_type != AVRO:
        out["schemaType"] = value.schema_type
    if value.references:
        out["references"] = [r.to_json() for r in value.references]
    out["schema"] = value.schema
    return out


def _flag(query: Mapping[str, str], name: str) -> bool:
    return query.get(name, "false").lower() == "true"


class SchemaRegistry:
    def __init__(
        self,
        state: RegistryState,
        write: Write,
        *,
        default_compatibility: str = "BACKWARD",
        run_blocking: RunBlocking | None = None,
    ) -> None:
        self.state = state
        self._write = write
        #: Parsing a schema and checking compatibility run here (a worker thread in the broker:
        #: a large schema must not stall the event loop).
        self._run_blocking = run_blocking
        self.default_compatibility = default_compatibility
        self._lock = asyncio.Lock()
        self._parsed: dict[Identity, ParsedSchema] = {}

    # -- helpers -------------------------------------------------------------------------------
    def _parse(
        self, schema_type: str, text: str, references: tuple[SchemaReference, ...]
    ) -> ParsedSchema:
        key = (schema_type, text, references)
        parsed = self._parsed.get(key)
        if parsed is None:
            parsed = parse_schema(schema_type, text, self._dependencies(references, set()))
            if len(self._parsed) >= _PARSED_CACHE:
                self._parsed.pop(next(iter(self._parsed)))
            self._parsed[key] = parsed
        return parsed

    def _parsed_value(self, value: SchemaValue) -> ParsedSchema:
        return self._parse(value.schema_type, value.schema, value.references)

    def _dependencies(
        self, references: Sequence[SchemaReference], seen: set[tuple[str, int]]
    ) -> list[Dependency]:
        out: list[Dependency] = []
        for ref in references:
            value = self._referenced(ref)
            if (value.subject, value.version) in seen:
                continue
            seen.add((value.subject, value.version))
            out += self._dependencies(value.references, seen)
            out.append(Dependency(ref.name, value.schema_type, value.schema))
        return out

    def _referenced(self, ref: SchemaReference) -> SchemaValue:
        versions = self.state.versions(ref.subject)
        if ref.version == -1 and versions:
            return versions[-1]
        for value in versions:
            if value.version == ref.version:
                return value
        raise InvalidSchemaError(
            f"Invalid schema: the reference {ref.name!r} names subject {ref.subject!r} version "
            f"{ref.version}, which is not registered: register it first"
        )

    def _live(self, subject: str, deleted: bool = False) -> list[SchemaValue]:
        versions = self.state.versions(subject, deleted=deleted)
        if not versions:
            raise RegistryError.subject_not_found(subject)
        return versions

    @staticmethod
    def _version_number(text: str) -> int | None:
        """None for "latest" (or -1)."""
        if text == "latest" or text == "-1":
            return None
        try:
            number = int(text)
        except ValueError:
            raise RegistryError.invalid_version(text) from None
        if not 1 <= number <= _MAX_VERSION:
            raise RegistryError.invalid_version(text)
        return number

    def _version(self, subject: str, text: str, deleted: bool = False) -> SchemaValue:
        number = self._version_number(text)
        versions = self._live(subject, deleted)
        if number is None:
            return versions[-1]
        for value in versions:
            if value.version == number:
                return value
        raise RegistryError.version_not_found(number)

    def compatibility_level(self, subject: str | None) -> str:
        configs = self.state.configs
        if subject is not None and subject in configs:
            return configs[subject]
        return configs.get(None, self.default_compatibility)

    def mode(self, subject: str | None) -> str:
        modes = self.state.modes
        if subject is not None and subject in modes:
            return modes[subject]
        return modes.get(None, "READWRITE")

    @staticmethod
    def _body_schema(body: Mapping[str, Any]) -> tuple[str, str, tuple[SchemaReference, ...]]:
        schema = body.get("schema")
        if not isinstance(schema, str) or not schema:
            raise RegistryError.invalid_schema("Empty schema")
        schema_type = body.get("schemaType") or AVRO
        if schema_type not in SCHEMA_TYPES:
            raise RegistryError.invalid_schema(
                f"Invalid schema type {schema_type!r}: use one of {', '.join(SCHEMA_TYPES)}"
            )
        refs = body.get("references") or []
        if not isinstance(refs, list):
            raise RegistryError.invalid_schema("references must be a list")
        references = []
        for ref in refs:
            if not isinstance(ref, dict):
                raise RegistryError.invalid_schema("a reference is an object")
            name, subject, version = ref.get("name"), ref.get("subject"), ref.get("version", -1)
            if not (
                isinstance(name, str) and isinstance(subject, str) and isinstance(version, int)
            ):
                raise RegistryError.invalid_schema(
                    "a reference needs name, subject and an integer version"
                )
            references.append(SchemaReference(name, subject, version))
        return schema, str(schema_type), tuple(references)

    async def _off_loop(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self._run_blocking is None:
            return fn(*args)
        return await self._run_blocking(fn, *args)

    async def _parse_body(
        self, body: Mapping[str, Any]
    ) -> tuple[ParsedSchema, tuple[SchemaReference, ...]]:
        """The request's schema, parsed off the loop (its references resolved on it)."""
        schema, schema_type, references = self._body_schema(body)
        key = (schema_type, schema, references)
        cached = self._parsed.get(key)
        if cached is not None:
            return cached, references
        try:
            deps = self._dependencies(references, set())
            parsed: ParsedSchema = await self._off_loop(parse_schema, schema_type, schema, deps)
        except InvalidSchemaError as exc:
            raise RegistryError.invalid_schema(str(exc)) from None
        if len(self._parsed) >= _PARSED_CACHE:
            self._parsed.pop(next(iter(self._parsed)))
        self._parsed[key] = parsed
        return parsed, references

    def _identity(self, value: SchemaValue) -> Identity | None:
        try:
            parsed = self._parsed_value(value)
        except InvalidSchemaError:
            return None
        return (value.schema_type, parsed.canonical, value.references)

    # -- schemas -------------------------------------------------------------------------------
    def schema_types(self) -> list[str]:
        return list(SCHEMA_TYPES)

    def _by_id(self, schema_id: int, subject: str | None) -> SchemaValue:
        if subject:
            for value in self.state.versions(subject, deleted=True):
                if value.id == schema_id:
                    return value
        known = self.state.by_id.get(schema_id)
        if known is None:
            raise RegistryError.schema_not_found(schema_id)
        return known

    def schema_by_id(self, schema_id: int, query: Mapping[str, str]) -> dict[str, Any]:
        value = self._by_id(schema_id, query.get("subject"))
        out = _json_value(value, with_subject=False)
        if query.get("format") == "serialized" and value.schema_type == PROTOBUF:
            out["schema"] = serialized(self._parsed_value(value))
        return out

    def raw_schema_by_id(self, schema_id: int, query: Mapping[str, str]) -> str:
        return self._by_id(schema_id, query.get("subject")).schema

    def subjects_of_id(self, schema_id: int, query: Mapping[str, str]) -> list[str]:
        uses = self.state.uses_of_id(schema_id, deleted=_flag(query, "deleted"))
        if not uses and schema_id not in self.state.by_id:
            raise RegistryError.schema_not_found(schema_id)
        return sorted({v.subject for v in uses})

    def versions_of_id(self, schema_id: int, query: Mapping[str, str]) -> list[dict[str, Any]]:
        uses = self.state.uses_of_id(schema_id, deleted=_flag(query, "deleted"))
        if not uses and schema_id not in self.state.by_id:
            raise RegistryError.schema_not_found(schema_id)
        return [{"subject": v.subject, "version": v.version} for v in uses]

    def list_schemas(self, query: Mapping[str, str]) -> list[dict[str, Any]]:
        prefix = query.get("subjectPrefix", "")
        deleted, latest = _flag(query, "deleted"), _flag(query, "latestOnly")
        out = []
        for subject in sorted(self.state.subjects):
            if subject.startswith(prefix):
                versions = self.state.versions(subject, deleted=deleted)
                out += [_json_value(v) for v in (versions[-1:] if latest else versions)]
        return out

    # -- subjects ------------------------------------------------------------------------------
    def subjects(self, query: Mapping[str, str]) -> list[str]:
        prefix = query.get("subjectPrefix", "")
        deleted = _flag(query, "deleted")
        return [
            s
            for s in sorted(self.state.subjects)
            if s.startswith(prefix) and self.state.versions(s, deleted=deleted)
        ]

    def versions(self, subject: str, query: Mapping[str, str]) -> list[int]:
        return [v.version for v in self._live(subject, _flag(query, "deleted"))]

    def get_version(self, subject: str, version: str, query: Mapping[str, str]) -> dict[str, Any]:
        value = self._version(subject, version, _flag(query, "deleted"))
        out = _json_value(value)
        if query.get("format") == "serialized" and value.schema_type == PROTOBUF:
            out["schema"] = serialized(self._parsed_value(value))
        return out

    def raw_version(self, subject: str, version: str, query: Mapping[str, str]) -> str:
        return self._version(subject, version, _flag(query, "deleted")).schema

    def referenced_by(self, subject: str, version: str) -> list[int]:
        value = self._version(subject, version)
        return self.state.referenced_by(subject, value.version)

    async def lookup(
        self, subject: str, body: Mapping[str, Any], query: Mapping[str, str]
    ) -> dict[str, Any]:
        deleted = _flag(query, "deleted")
        if not self.state.versions(subject, deleted=deleted):
            raise RegistryError.subject_not_found(subject)
        parsed, references = await self._parse_body(body)
        wanted = (parsed.schema_type, parsed.canonical, references)
        for value in reversed(self.state.versions(subject, deleted=deleted)):
            if self._identity(value) == wanted:
                return _json_value(value)
        raise RegistryError.schema_not_found()

    async def register(
        self, subject: str, body: Mapping[str, Any], query: Mapping[str, str]
    ) -> dict[str, Any]:
        if not subject or any(ord(c) < 32 for c in subject):
            raise RegistryError.invalid_subject(subject)
        async with self._lock:
            mode = self.mode(subject)
            if mode in ("READONLY", "READONLY_OVERRIDE"):
                raise RegistryError.not_permitted(f"Subject {subject} is in read-only mode")
            parsed, references = await self._parse_body(body)
            wanted = (parsed.schema_type, parsed.canonical, references)
            live = self.state.versions(subject)
            for value in reversed(live):
                if self._identity(value) == wanted:
                    return {"id": value.id}
            level = self.compatibility_level(subject)
            if mode != "IMPORT":
                earlier = []
                for value in live:
                    try:
                        earlier.append((value.version, self._parsed_value(value)))
                    except InvalidSchemaError:
                        continue  # a version this build cannot read (written elsewhere)
                messages = await self._off_loop(check_compatibility, level, parsed, earlier)
                if messages:
                    raise RegistryError.incompatible(subject, messages)
            schema_id = self._id_for(wanted, body, mode)
            every = self.state.versions(subject, deleted=True)
            version = (every[-1].version if every else 0) + 1
            if mode == "IMPORT" and isinstance(body.get("version"), int):
                version = int(body["version"])
            value = SchemaValue(
                subject=subject,
                version=version,
                id=schema_id,
                schema=parsed.canonical,
                schema_type=parsed.schema_type,
                references=references,
            )
            await self._write([(RegistryKey.schema(subject, version), value)])
            return {"id": schema_id}

    def _id_for(self, wanted: Identity, body: Mapping[str, Any], mode: str) -> int:
        asked = body.get("id")
        if isinstance(asked, int) and asked > 0:
            known = self.state.by_id.get(asked)
            if known is not None and self._identity(known) != wanted:
                raise RegistryError(
                    422,
                    42207,
                    f"Schema id {asked} already exists with a different schema",
                )
            if mode == "IMPORT" or known is not None:
                return asked
        for subject in self.state.subjects:
            for value in self.state.versions(subject, deleted=True):
                if self._identity(value) == wanted:
                    return value.id
        return self.state.max_id + 1

    async def check(
        self, subject: str, version: str | None, body: Mapping[str, Any], query: Mapping[str, str]
    ) -> dict[str, Any]:
        parsed, _references = await self._parse_body(body)
        live = self.state.versions(subject)
        level = self.compatibility_level(subject)
        earlier: list[tuple[int, ParsedSchema]] = []
        if version is not None:
            level = level.removesuffix("_TRANSITIVE")  # against that one version
            if live or self._version_number(version) is not None:
                target = self._version(subject, version)  # "latest" of a new subject: none
                earlier = [(target.version, self._parsed_value(target))]
        else:
            earlier = [(v.version, self._parsed_value(v)) for v in live]
        messages: list[str] = await self._off_loop(check_compatibility, level, parsed, earlier)
        out: dict[str, Any] = {"is_compatible": not messages}
        if _flag(query, "verbose"):
            out["messages"] = messages
        return out

    # -- deletes -------------------------------------------------------------------------------
    async def delete_subject(self, subject: str, query: Mapping[str, str]) -> list[int]:
        permanent = _flag(query, "permanent")
        async with self._lock:
            self._writable(subject)
            every = self.state.versions(subject, deleted=True)
            if not every:
                raise RegistryError.subject_not_found(subject)
            live = [v for v in every if not v.deleted]
            if permanent:
                if live:
                    raise RegistryError.subject_not_soft_deleted(subject)
                records: list[tuple[RegistryKey, Value]] = [
                    (RegistryKey.schema(subject, v.version), None) for v in every
                ]
                if subject in self.state.configs:
                    records.append((RegistryKey.config(subject), None))
                if subject in self.state.modes:
                    records.append((RegistryKey.mode(subject), None))
                await self._write(records)
                return [v.version for v in every]
            if not live:
                raise RegistryError.subject_soft_deleted(subject)
            for value in live:
                self._not_referenced(value)
            record = DeleteSubjectValue(subject, live[-1].version)
            await self._write([(RegistryKey.delete_subject(subject), record)])
            return [v.version for v in live]

    async def delete_version(self, subject: str, version: str, query: Mapping[str, str]) -> int:
        permanent = _flag(query, "permanent")
        async with self._lock:
            self._writable(subject)
            number = self._version_number(version)
            every = self.state.versions(subject, deleted=True)
            if not every:
                raise RegistryError.subject_not_found(subject)
            if number is None:
                live = [v for v in every if not v.deleted]
                if not live:
                    raise RegistryError.subject_soft_deleted(subject)
                number = live[-1].version
            found = [v for v in every if v.version == number]
            if not found:
                raise RegistryError.version_not_found(number)
            value = found[0]
            if permanent:
                if not value.deleted:
                    raise RegistryError.version_not_soft_deleted(subject, number)
                await self._write([(RegistryKey.schema(subject, number), None)])
                return number
            if value.deleted:
                raise RegistryError.version_soft_deleted(subject, number)
            self._not_referenced(value)
            soft = dataclasses.replace(value, deleted=True)
            await self._write([(RegistryKey.schema(subject, number), soft)])
            return number

    def _writable(self, subject: str) -> None:
        if self.mode(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise RegistryError.not_permitted(f"Subject {subject} is in read-only mode")

    def _not_referenced(self, value: SchemaValue) -> None:
        if self.state.referenced_by(value.subject, value.version):
            raise RegistryError.reference_exists(
                f"One or more references exist to the schema {{magic=1, keytype=SCHEMA, "
                f"subject={value.subject}, version={value.version}}}."
            )

    # -- config and mode -----------------------------------------------------------------------
    def get_config(self, subject: str | None, query: Mapping[str, str]) -> dict[str, str]:
        if subject is not None and subject not in self.state.configs:  # noqa: SIM102
            if not _flag(query, "defaultToGlobal"):
                raise RegistryError.compatibility_not_configured(subject)
        return {"compatibilityLevel": self.compatibility_level(subject)}

    async def set_config(self, subject: str | None, body: Mapping[str, Any]) -> dict[str, str]:
        level = body.get("compatibility", body.get("compatibilityLevel"))
        if not isinstance(level, str) or level.upper() not in COMPATIBILITY_LEVELS:
            raise RegistryError.invalid_compatibility(level)
        async with self._lock:
            await self._write([(RegistryKey.config(subject), ConfigValue(level.upper()))])
        return {"compatibility": level.upper()}

    async def delete_config(self, subject: str | None) -> dict[str, str]:
        async with self._lock:
            if subject is not None and subject not in self.state.configs:
                raise RegistryError.compatibility_not_configured(subject)
            old = self.compatibility_level(subject)
            await self._write([(RegistryKey.config(subject), None)])
        return {"compatibilityLevel": old}

    def get_mode(self, subject: str | None, query: Mapping[str, str]) -> dict[str, str]:
        if subject is not None and subject not in self.state.modes:  # noqa: SIM102
            if not _flag(query, "defaultToGlobal"):
                raise RegistryError.mode_not_configured(subject)
        return {"mode": self.mode(subject)}

    async def set_mode(
        self, subject: str | None, body: Mapping[str, Any], query: Mapping[str, str]
    ) -> dict[str, str]:
        mode = body.get("mode")
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise RegistryError.invalid_mode(mode)
        mode = mode.upper()
        async with self._lock:
            if mode == "IMPORT" and not _flag(query, "force"):
                has_schemas = (
                    bool(self.state.versions(subject, deleted=True))
                    if subject is not None
                    else bool(self.state.subjects)
                )
                if has_schemas:
                    raise RegistryError.not_permitted(
                        "Cannot import since found existing subjects: set force=true to import "
                        "anyway"
                    )
            await self._write([(RegistryKey.mode(subject), ModeValue(mode))])
        return {"mode": mode}

    async def delete_mode(self, subject: str) -> dict[str, str]:
        async with self._lock:
            if subject not in self.state.modes:
                raise RegistryError.mode_not_configured(subject)
            old = self.state.modes[subject]
            await self._write([(RegistryKey.mode(subject), None)])
        return {"mode": old}
