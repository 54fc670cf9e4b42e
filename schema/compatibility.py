"""Compatibility of a new schema with earlier versions, as Confluent's registry decides it.

Modes: BACKWARD (the new schema reads data written with the latest earlier one), FORWARD (the
latest earlier schema reads data written with the new one), FULL (both), their ``_TRANSITIVE``
forms (against every earlier version, not only the latest) and NONE.

Avro uses the ``avro`` package's ``ReaderWriterCompatibilityChecker`` (the port of Avro's
Java ``SchemaCompatibility`` that Confluent calls). Protobuf and JSON Schema have no Python
library for this: the rules below are written by hand after Confluent's
(``ProtobufSchema``'s and ``JsonSchema``'s difference types), and docs/schema-registry.md lists
the cases covered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tidelog.schema.formats import ParsedSchema
from tidelog.schema.records import AVRO, PROTOBUF

__all__ = ("COMPATIBILITY_LEVELS", "check_compatibility")

COMPATIBILITY_LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)


def check_compatibility(
    level: str, new: ParsedSchema, earlier: Sequence[tuple[int, ParsedSchema]]
) -> list[str]:
    """Messages saying why ``new`` is not compatible under ``level`` with ``earlier`` ((version,
    schema), oldest first); empty when it is."""
    if level == "NONE" or not earlier:
        return []
    targets = earlier if level.endswith("_TRANSITIVE") else earlier[-1:]
    base = level.removesuffix("_TRANSITIVE")
    messages: list[str] = []
    for version, old in reversed(targets):
        found: list[str] = []
        if base in ("BACKWARD", "FULL"):
            found += _reads(new, old)
        if base in ("FORWARD", "FULL"):
            found += _reads(old, new, reader_is_new=False)
        if found:
            messages += found
            messages.append(f"{{oldSchemaVersion: {version}}}")
            messages.append(f"{{oldSchema: '{old.canonical}'}}")
            messages.append(f"{{compatibility: '{level}'}}")
            break  # Confluent reports the first earlier version that fails
    return messages


def _reads(reader: ParsedSchema, writer: ParsedSchema, *, reader_is_new: bool = True) -> list[str]:
    if reader.schema_type != writer.schema_type:
        return ["{errorType:'TYPE_MISMATCH', description:'The schema types differ'}"]
    if reader.schema_type == AVRO:
        return _avro_reads(reader.parsed, writer.parsed, reader_is_new)
    if reader.schema_type == PROTOBUF:
        return _protobuf_reads(reader.parsed[1], writer.parsed[1])
    return _json_reads(reader.parsed, writer.parsed, "#")


# -- Avro ----------------------------------------------------------------------------------------
def _avro_reads(reader: Any, writer: Any, reader_is_new: bool) -> list[str]:
    from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

    checker = ReaderWriterCompatibilityChecker()  # type: ignore[no-untyped-call]
    result = checker.get_compatibility(reader, writer)
    if result.compatibility is SchemaCompatibilityType.compatible:
        return []
    role, other = ("new", "old") if reader_is_new else ("old", "new")
    out = []
    infos = sorted(result.messages) or [""]
    locations = sorted(result.locations) or ["/"]
    for index, kind in enumerate(result.incompatibilities):
        name = kind.name.upper()
        info = infos[min(index, len(infos) - 1)]
        path = locations[min(index, len(locations) - 1)]
        template = _AVRO_DESCRIPTIONS.get(
            name,
            "The {role} schema cannot read data written with the {other} schema at path '{path}'",
        )
        text = template.format(role=role, other=other, path=path, info=info)
        out.append(f"{{errorType:'{name}', description:'{text}', additionalInfo:'{info}'}}")
    return out


#: Descriptions worded as Confluent's registry words them (``{role}``: the reader's side).
_AVRO_DESCRIPTIONS = {
    "READER_FIELD_MISSING_DEFAULT_VALUE": "The field '{info}' at path '{path}' in the {role} "
    "schema has no default value and is missing in the {other} schema",
    "TYPE_MISMATCH": "The type (path '{path}') of a field in the {role} schema does not match "
    "with the {other} schema",
    "MISSING_ENUM_SYMBOLS": "The {role} schema is missing enum symbols '{info}' at path "
    "'{path}' in the {other} schema",
    "MISSING_UNION_BRANCH": "The {role} schema is missing a type inside a union field at path "
    "'{path}' in the {other} schema",
    "NAME_MISMATCH": "The name of the schema has changed (path '{path}')",
    "FIXED_SIZE_MISMATCH": "The size of FIXED type field at path '{path}' in the {role} schema "
    "does not match with the {other} schema",
}


# -- Protobuf ------------------------------------------------------------------------------------
#: Scalar types that read each other's wire values (Confluent's compatible groups).
_SCALAR_GROUPS = ({3, 4, 5, 8, 13}, {17, 18}, {7, 15}, {6, 16}, {9, 12})


def _messages(fdp: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def walk(prefix: str, messages: Any) -> None:
        for message in messages:
            name = f"{prefix}.{message.name}"
            out[name] = message
            walk(name, message.nested_type)

    walk("." + fdp.package if fdp.package else "", fdp.message_type)
    return out


def _protobuf_reads(reader: Any, writer: Any) -> list[str]:
    out: list[str] = []
    if reader.package != writer.package:
        out.append("{errorType:'PACKAGE_CHANGED', description:'The package changed'}")
    new_messages, old_messages = _messages(reader), _messages(writer)
    for name, old in old_messages.items():
        if old.options.map_entry:
            continue
        new = new_messages.get(name)
        if new is None:
            out.append(f"{{errorType:'MESSAGE_REMOVED', description:'Message {name[1:]} removed'}}")
            continue
        out += _protobuf_message(name[1:], new, old)
    return out


def _kind(fd: Any) -> str:
    return {11: "message", 14: "enum", 10: "group"}.get(fd.type, "scalar")


def _protobuf_message(name: str, new: Any, old: Any) -> list[str]:
    out = []
    new_fields = {f.number: f for f in new.field}
    old_fields = {f.number: f for f in old.field}

    def oneof_of(message: Any, fd: Any) -> str | None:
        if fd.HasField("oneof_index") and not fd.proto3_optional:
            return str(message.oneof_decl[fd.oneof_index].name)
        return None

    for number, old_fd in old_fields.items():
        where = f"{name}.{old_fd.name} (#{number})"
        new_fd = new_fields.get(number)
        if new_fd is None:
            if old_fd.label == 2:
                out.append(f"{{errorType:'REQUIRED_FIELD_REMOVED', description:'{where}'}}")
            if oneof_of(old, old_fd) is not None:
                out.append(f"{{errorType:'ONEOF_FIELD_REMOVED', description:'{where}'}}")
            continue
        if _kind(new_fd) != _kind(old_fd) or (new_fd.label == 3) != (old_fd.label == 3):
            out.append(f"{{errorType:'FIELD_KIND_CHANGED', description:'{where}'}}")
        elif _kind(old_fd) == "scalar" and new_fd.type != old_fd.type:
            if not any(new_fd.type in g and old_fd.type in g for g in _SCALAR_GROUPS):
                out.append(f"{{errorType:'FIELD_SCALAR_KIND_CHANGED', description:'{where}'}}")
        elif _kind(old_fd) != "scalar" and new_fd.type_name != old_fd.type_name:
            out.append(f"{{errorType:'FIELD_NAMED_TYPE_CHANGED', description:'{where}'}}")
        if old_fd.label != 2 and new_fd.label == 2:
            out.append(f"{{errorType:'REQUIRED_FIELD_ADDED', description:'{where}'}}")
        if oneof_of(old, old_fd) is None and oneof_of(new, new_fd) is not None:
            out.append(f"{{errorType:'FIELD_MOVED_TO_EXISTING_ONEOF', description:'{where}'}}")
    for number, new_fd in new_fields.items():
        if number not in old_fields and new_fd.label == 2:
            where = f"{name}.{new_fd.name} (#{number})"
            out.append(f"{{errorType:'REQUIRED_FIELD_ADDED', description:'{where}'}}")
    return out


# -- JSON Schema ---------------------------------------------------------------------------------
def _types(schema: Any) -> set[str] | None:
    if not isinstance(schema, dict) or "type" not in schema:
        return None  # any type
    kind = schema["type"]
    found = set(kind) if isinstance(kind, list) else {kind}
    if "number" in found:
        found.add("integer")
    return found


def _open(schema: dict[str, Any]) -> bool:
    extra = schema.get("additionalProperties", True)
    return extra is not False


def _json_reads(reader: Any, writer: Any, path: str) -> list[str]:
    """Every document ``writer`` accepts is accepted by ``reader`` (the rules Confluent
    checks: types, properties in open and closed content models, required, enums, bounds,
    items)."""
    if reader is True or reader == {}:
        return []
    if writer is True or writer == {}:
        return [f"{{errorType:'TYPE_NARROWED', description:'{path} now restricts any value'}}"]
    if reader is False or writer is False:
        return [] if writer is False else [f"{{errorType:'TYPE_CHANGED', description:'{path}'}}"]
    out: list[str] = []
    new_types, old_types = _types(reader), _types(writer)
    if new_types is not None and (old_types is None or not old_types <= new_types):
        out.append(f"{{errorType:'TYPE_NARROWED', description:'{path} type changed'}}")
    new_props = reader.get("properties", {}) or {}
    old_props = writer.get("properties", {}) or {}
    for prop, schema in new_props.items():
        sub = f"{path}/properties/{prop}"
        if prop in old_props:
            out += _json_reads(schema, old_props[prop], sub)
        elif _open(writer) and schema not in ({}, True):
            out.append(f"{{errorType:'PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL', description:'{sub}'}}")
    for prop in old_props:
        if prop not in new_props and not _open(reader):
            sub = f"{path}/properties/{prop}"
            out.append(
                f"{{errorType:'PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL', description:'{sub}'}}"
            )
    if _open(writer) and not _open(reader):
        out.append(f"{{errorType:'ADDITIONAL_PROPERTIES_REMOVED', description:'{path}'}}")
    added = set(reader.get("required", [])) - set(writer.get("required", []))
    for prop in sorted(added):
        out.append(
            f"{{errorType:'REQUIRED_ATTRIBUTE_ADDED', description:'{path} requires {prop}'}}"
        )
    if "enum" in reader:  # noqa: SIM102
        if "enum" not in writer or not all(v in reader["enum"] for v in writer["enum"]):
            out.append(f"{{errorType:'ENUM_ARRAY_NARROWED', description:'{path}'}}")
    for bound, narrower in (
        ("maxLength", min), ("maxItems", min), ("maximum", min), ("maxProperties", min),
        ("minLength", max), ("minItems", max), ("minimum", max), ("minProperties", max),
    ):  # fmt: skip
        if bound in reader:
            old = writer.get(bound)
            if old is None or narrower(old, reader[bound]) != old:
                kind = "ADDED" if old is None else ("DECREASED" if narrower is min else "INCREASED")
                out.append(f"{{errorType:'{bound.upper()}_{kind}', description:'{path}'}}")
    if isinstance(reader.get("items"), dict | bool) and "items" in writer:
        out += _json_reads(reader["items"], writer["items"], f"{path}/items")
    return out
