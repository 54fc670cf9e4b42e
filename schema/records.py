"""The record format of the ``_schemas`` topic, as Confluent's Schema Registry writes it.

Keys and values are JSON. A key names what it is about (Confluent's ``SchemaRegistryKey``
classes): ``{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}``,
``{"keytype":"CONFIG","subject":null,"magic":0}`` (global when ``subject`` is null),
``{"keytype":"MODE",...}``, ``{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}``,
``{"keytype":"CLEAR_SUBJECT",...}`` and ``{"keytype":"NOOP","magic":0}``. Keys are written with
Confluent's property order and no blanks, byte for byte, so compaction keeps one record per key
whichever registry wrote it. A null value (tombstone) removes what its key names (a hard
delete).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = (
    "AVRO",
    "JSON",
    "PROTOBUF",
    "SCHEMA_TYPES",
    "SCHEMAS_TOPIC",
    "ConfigValue",
    "DeleteSubjectValue",
    "ModeValue",
    "RecordFormatError",
    "RegistryKey",
    "SchemaReference",
    "SchemaValue",
    "Value",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
)

#: Confluent's default ``kafkastore.topic``.
SCHEMAS_TOPIC = "_schemas"
AVRO = "AVRO"
PROTOBUF = "PROTOBUF"
JSON = "JSON"
SCHEMA_TYPES = (JSON, PROTOBUF, AVRO)  # the order of Confluent's GET /schemas/types

_KEYTYPES = ("SCHEMA", "CONFIG", "MODE", "DELETE_SUBJECT", "CLEAR_SUBJECT", "NOOP")
#: Largest key or value parsed (a schema is text; Confluent's default max request is 20 MB).
MAX_RECORD_BYTES = 64 * 1024 * 1024


class RecordFormatError(ValueError):
    """A ``_schemas`` record that is not in the registry's format."""


@dataclass(frozen=True, slots=True)
class RegistryKey:
    keytype: str
    subject: str | None = None
    version: int | None = None
    magic: int = 0

    @staticmethod
    def schema(subject: str, version: int) -> RegistryKey:
        return RegistryKey("SCHEMA", subject, version, 1)

    @staticmethod
    def config(subject: str | None) -> RegistryKey:
        return RegistryKey("CONFIG", subject)

    @staticmethod
    def mode(subject: str | None) -> RegistryKey:
        return RegistryKey("MODE", subject)

    @staticmethod
    def delete_subject(subject: str) -> RegistryKey:
        return RegistryKey("DELETE_SUBJECT", subject)


@dataclass(frozen=True, slots=True)
class SchemaReference:
    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True, slots=True)
class SchemaValue:
    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = AVRO
    references: tuple[SchemaReference, ...] = ()
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class ConfigValue:
    compatibility_level: str


@dataclass(frozen=True, slots=True)
class ModeValue:
    mode: str


@dataclass(frozen=True, slots=True)
class DeleteSubjectValue:
    subject: str
    version: int


Value = SchemaValue | ConfigValue | ModeValue | DeleteSubjectValue | None


def _dumps(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def encode_key(key: RegistryKey) -> bytes:
    """The key's JSON in Confluent's property order (keytype, subject, version, magic)."""
    out: dict[str, Any] = {"keytype": key.keytype}
    if key.keytype != "NOOP":
        out["subject"] = key.subject
    if key.keytype == "SCHEMA":
        out["version"] = key.version
    out["magic"] = key.magic
    return _dumps(out)


def _loads(raw: bytes, what: str) -> dict[str, Any]:
    if len(raw) > MAX_RECORD_BYTES:
        raise RecordFormatError(f"{what} of {len(raw)} bytes is over {MAX_RECORD_BYTES}")
    try:
        obj = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise RecordFormatError(f"{what} is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise RecordFormatError(f"{what} is not a JSON object")
    return obj


def decode_key(raw: bytes) -> RegistryKey:
    obj = _loads(raw, "key")
    keytype = obj.get("keytype")
    if keytype not in _KEYTYPES:
        raise RecordFormatError(f"unknown keytype {keytype!r}")
    subject = obj.get("subject")
    version = obj.get("version")
    magic = obj.get("magic", 0)
    if subject is not None and not isinstance(subject, str):
        raise RecordFormatError("subject is not a string")
    if keytype == "SCHEMA" and (not isinstance(version, int) or subject is None):
        raise RecordFormatError("a SCHEMA key needs a subject and an integer version")
    if not isinstance(magic, int):
        raise RecordFormatError("magic is not an integer")
    return RegistryKey(keytype, subject, version if keytype == "SCHEMA" else None, magic)


def encode_value(value: Value) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, SchemaValue):
        out: dict[str, Any] = {
            "subject": value.subject,
            "version": value.version,
            "id": value.id,
        }
        if value.schema_type != AVRO:
            out["schemaType"] = value.schema_type
        if value.references:
            out["references"] = [r.to_json() for r in value.references]
        out["schema"] = value.schema
        out["deleted"] = value.deleted
        return _dumps(out)
    if isinstance(value, ConfigValue):
        return _dumps({"compatibilityLevel": value.compatibility_level})
    if isinstance(value, ModeValue):
        return _dumps({"mode": value.mode})
    return _dumps({"subject": value.subject, "version": value.version})


def _references(obj: Any) -> tuple[SchemaReference, ...]:
    if obj is None:
        return ()
    if not isinstance(obj, list):
        raise RecordFormatError("references is not a list")
    out = []
    for ref in obj:
        if not isinstance(ref, dict):
            raise RecordFormatError("a reference is not an object")
        name, subject, version = ref.get("name"), ref.get("subject"), ref.get("version")
        if not (isinstance(name, str) and isinstance(subject, str) and isinstance(version, int)):
            raise RecordFormatError("a reference needs name, subject and an integer version")
        out.append(SchemaReference(name, subject, version))
    return tuple(out)


def decode_value(key: RegistryKey, raw: bytes | None) -> Value:
    """The value for ``key``; None for a tombstone or a NOOP."""
    if raw is None or key.keytype == "NOOP":
        return None
    obj = _loads(raw, f"{key.keytype} value")
    if key.keytype == "SCHEMA":
        schema, sid = obj.get("schema"), obj.get("id")
        if not isinstance(schema, str) or not isinstance(sid, int):
            raise RecordFormatError("a SCHEMA value needs a schema string and an integer id")
        schema_type = obj.get("schemaType") or AVRO
        if schema_type not in SCHEMA_TYPES:
            raise RecordFormatError(f"unknown schemaType {schema_type!r}")
        return SchemaValue(
            subject=str(obj.get("subject", key.subject)),
            version=int(obj.get("version", key.version or 0)),
            id=sid,
            schema=schema,
            schema_type=schema_type,
            references=_references(obj.get("references")),
            deleted=bool(obj.get("deleted", False)),
        )
    if key.keytype == "CONFIG":
        level = obj.get("compatibilityLevel") or obj.get("compatibility")
        if not isinstance(level, str):
            raise RecordFormatError("a CONFIG value needs compatibilityLevel")
        return ConfigValue(level)
    if key.keytype == "MODE":
        mode = obj.get("mode")
        if not isinstance(mode, str):
            raise RecordFormatError("a MODE value needs mode")
        return ModeValue(mode)
    subject, version = obj.get("subject", key.subject), obj.get("version", 0)
    if not isinstance(subject, str) or not isinstance(version, int):
        raise RecordFormatError(f"a {key.keytype} value needs subject and version")
    return DeleteSubjectValue(subject, version)
