"""Parsing registered schemas: Avro (the ``avro`` package), JSON Schema (``jsonschema``),
Protobuf (``schema/protobuf_text.py``: proto-schema-parser and protobuf's descriptor pool).

``parse_schema`` checks a schema with its references and gives its canonical text: what the
registry stores and compares when it looks a schema up (two registrations of the same schema
get the same id).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tidelog.schema.records import AVRO, JSON, PROTOBUF

__all__ = ("Dependency", "InvalidSchemaError", "ParsedSchema", "parse_schema", "serialized")

#: The file name a registered Protobuf schema gets in a descriptor pool.
PROTOBUF_FILE = "registered.proto"


class InvalidSchemaError(ValueError):
    """A schema (or one of its references) that does not parse; the message says why."""


@dataclass(frozen=True, slots=True)
class Dependency:
    """A referenced schema: ``name`` as the referencing schema names it (an Avro full name, a
    Protobuf import path, a JSON Schema ``$ref`` URL), its type and text. Dependencies are
    given deepest first."""

    name: str
    schema_type: str
    schema: str


@dataclass(frozen=True, slots=True)
class ParsedSchema:
    schema_type: str
    canonical: str
    #: avro.schema.Schema, a JSON value, or (DescriptorPool, resolved FileDescriptorProto).
    parsed: Any


def _compact(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidSchemaError(f"Invalid {what}: {exc}") from None


def _avro(text: str, deps: Sequence[Dependency]) -> ParsedSchema:
    import avro.errors
    import avro.name
    import avro.schema

    names = avro.name.Names()
    try:
        for dep in deps:
            if dep.schema_type == AVRO:
                avro.schema.make_avsc_object(_json(dep.schema, "Avro schema"), names)
        obj = _json(text, "Avro schema")
        parsed = avro.schema.make_avsc_object(obj, names)
    except (avro.errors.AvroException, TypeError, KeyError, AttributeError) as exc:
        raise InvalidSchemaError(f"Invalid Avro schema: {exc}") from None
    return ParsedSchema(AVRO, _compact(obj), parsed)


def _json_schema(text: str) -> ParsedSchema:
    import jsonschema.exceptions
    import jsonschema.validators

    obj = _json(text, "JSON schema")
    if not isinstance(obj, dict | bool):
        raise InvalidSchemaError("Invalid JSON schema: a schema is an object or a boolean")
    cls = jsonschema.validators.validator_for(obj, default=jsonschema.validators.Draft7Validator)
    try:
        cls.check_schema(obj)
    except jsonschema.exceptions.SchemaError as exc:
        raise InvalidSchemaError(f"Invalid JSON schema: {exc.message}") from None
    return ParsedSchema(JSON, _compact(obj), obj)


def _protobuf(text: str, deps: Sequence[Dependency]) -> ParsedSchema:
    from tidelog.schema import protobuf_text

    try:
        fdp = protobuf_text.to_descriptor(text, PROTOBUF_FILE)
        files = {
            dep.name: protobuf_text.to_descriptor(dep.schema, dep.name)
            for dep in deps
            if dep.schema_type == PROTOBUF
        }
        pool, resolved = protobuf_text.build_pool(fdp, files)
    except protobuf_text.ProtobufSchemaError as exc:
        raise InvalidSchemaError(f"Invalid Protobuf schema: {exc}") from None
    return ParsedSchema(PROTOBUF, protobuf_text.descriptor_to_text(resolved), (pool, resolved))


def parse_schema(schema_type: str, text: str, deps: Sequence[Dependency] = ()) -> ParsedSchema:
    if schema_type == AVRO:
        return _avro(text, deps)
    if schema_type == JSON:
        return _json_schema(text)
    if schema_type == PROTOBUF:
        return _protobuf(text, deps)
    raise InvalidSchemaError(f"Unsupported schema type {schema_type!r}")


def serialized(parsed: ParsedSchema) -> str:
    """A Protobuf schema as a base64 ``FileDescriptorProto`` (``?format=serialized``)."""
    import base64

    _pool, resolved = parsed.parsed
    return base64.standard_b64encode(resolved.SerializeToString()).decode("ascii")
