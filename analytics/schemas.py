"""Typed replay: keys and values in the Schema Registry wire format decoded into Spark columns.

``SchemaCatalog`` holds the registry's schemas, read from its REST API (``from_url``: any
Confluent-compatible registry, tidelog's own among them) or offline from the ``_schemas`` topic
of a log dir (``from_log_dir``), replayed with the same function the broker's registry uses
(``tidelog.schema.state``). ``TopicDecoder`` turns one topic's records into typed columns:
the reader schema is the latest version of the topic's subject (``<topic>-key`` /
``<topic>-value``, Confluent's TopicNameStrategy), so records written under several versions
land in one DataFrame with the evolved schema (Avro by schema resolution with fastavro,
Protobuf by field numbers, JSON Schema by property names). ``decode`` runs it over a
DataFrame with ``mapPartitions``; records that do not decode go to a side table.

Types: Avro record -> struct, array -> array, map -> map<string, _>, enum -> string,
``[null, T]`` -> nullable T, other unions -> their JSON text, logical date -> date,
timestamp-millis/micros -> timestamp, local-timestamp-* -> timestamp_ntz, decimal ->
decimal(p, s), uuid -> string, time-millis -> int (ms), time-micros -> long (us). Protobuf
message -> struct, repeated -> array, map -> map, enum -> its name, 32-bit ints -> int
(uint32, fixed32 -> long), 64-bit ints -> long, ``google.protobuf.Timestamp`` -> timestamp,
a message nested in itself past ``MAX_DEPTH`` -> its JSON text. JSON Schema object with
properties -> struct, array -> array, string/integer/number/boolean -> string/long/double/
boolean, anything else -> its JSON text.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tidelog.schema.formats import Dependency
from tidelog.schema.records import (
    AVRO,
    PROTOBUF,
    SCHEMAS_TOPIC,
    RecordFormatError,
    RegistryKey,
    SchemaReference,
    SchemaValue,
    decode_key,
    decode_value,
)
from tidelog.schema.state import RegistryState
from tidelog.schema.wire import FrameError, parse_frame

__all__ = (
    "MODES",
    "SCHEMAS_TOPIC",
    "DecodeError",
    "SchemaCatalog",
    "TopicDecoder",
    "decode",
    "parse_decode_option",
    "source_decoder",
    "source_schema",
    "decode_batch",
)

MODES = ("raw", "decoded", "both")
MAX_DEPTH = 4


class DecodeError(ValueError):
    """A record that does not decode (the message goes to the side table)."""


# -- the catalog -----------------------------------------------------------------------------------
@dataclass
class SchemaCatalog:
    state: RegistryState = field(default_factory=RegistryState)

    @staticmethod
    def from_url(url: str, timeout_s: float = 30.0) -> SchemaCatalog:
        """Every schema version of a registry (``GET /schemas?deleted=true``)."""
        query = urllib.parse.urlencode({"deleted": "true"})
        with urllib.request.urlopen(f"{url.rstrip('/')}/schemas?{query}", timeout=timeout_s) as r:
            rows = json.loads(r.read())
        state = RegistryState()
        for row in rows:
            value = SchemaValue(
                subject=row["subject"],
                version=int(row["version"]),
                id=int(row["id"]),
                schema=row["schema"],
                schema_type=row.get("schemaType") or AVRO,
                references=tuple(
                    SchemaReference(x["name"], x["subject"], int(x["version"]))
                    for x in row.get("references") or []
                ),
            )
            state.replay(RegistryKey.schema(value.subject, value.version), value)
        return SchemaCatalog(state)

    @staticmethod
    def from_log_dir(path: str | Path, topic: str = SCHEMAS_TOPIC) -> SchemaCatalog:
        """The registry as the ``_schemas`` topic of a log dir holds it (no broker needed)."""
        from tidelog.analytics.logdir import LogDir
        from tidelog.analytics.plan import OffsetRange

        backend = LogDir(path)
        state = RegistryState()
        tp = (topic, 0)
        if 0 not in backend.topics().get(topic, []):
            return SchemaCatalog(state)
        start, end = backend.earliest([tp])[tp], backend.latest([tp])[tp]
        for cols in backend.read(OffsetRange(topic, 0, start, end)):
            for raw_key, raw_value in zip(cols.keys, cols.values, strict=True):
                if raw_key is None:
                    continue
                try:
                    key = decode_key(raw_key)
                    state.replay(key, decode_value(key, raw_value))
                except RecordFormatError:
                    continue
        return SchemaCatalog(state)

    def latest(self, subject: str) -> SchemaValue | None:
        versions = self.state.versions(subject)
        return versions[-1] if versions else None

    def by_id(self, schema_id: int) -> SchemaValue:
        value = self.state.by_id.get(schema_id)
        if value is None:
            raise DecodeError(f"schema id {schema_id} is not in the registry")
        return value

    def dependencies(self, value: SchemaValue) -> list[Dependency]:
        out: list[Dependency] = []
        seen: set[tuple[str, int]] = set()

        def walk(refs: tuple[SchemaReference, ...]) -> None:
            for ref in refs:
                versions = self.state.versions(ref.subject, deleted=True)
                found = [v for v in versions if v.version == ref.version or ref.version == -1]
                if not found:
                    raise DecodeError(f"reference {ref.subject} v{ref.version} is missing")
                target = found[-1]
                if (target.subject, target.version) in seen:
                    continue
                seen.add((target.subject, target.version))
                walk(target.references)
                out.append(Dependency(ref.name, target.schema_type, target.schema))

        walk(value.references)
        return out

    def subject_version(self, schema_id: int, subject: str) -> int | None:
        for value in self.state.versions(subject, deleted=True):
            if value.id == schema_id:
                return value.version
        return None


# -- Avro ------------------------------------------------------------------------------------------
_AVRO_PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")


def _full_name(schema: dict[str, Any], namespace: str) -> tuple[str, str]:
    name = str(schema["name"])
    if "." in name:
        return name, name.rsplit(".", 1)[0]
    space = schema.get("namespace", namespace) or ""
    return (f"{space}.{name}" if space else name), space


class _AvroTypes:
    """Spark types and value conversion for one Avro reader schema (with its named types)."""

    def __init__(self, schema: Any, deps: list[Dependency]) -> None:
        self.named: dict[str, Any] = {}
        for dep in deps:
            if dep.schema_type == AVRO:
                self._collect(json.loads(dep.schema), "")
        self.schema = schema
        self._collect(schema, "")

    def _collect(self, schema: Any, namespace: str) -> None:
        if isinstance(schema, list):
            for branch in schema:
                self._collect(branch, namespace)
        elif isinstance(schema, dict):
            kind = schema.get("type")
            if kind in ("record", "error", "enum", "fixed"):
                full, namespace = _full_name(schema, namespace)
                self.named[full] = (schema, namespace)
                self.named.setdefault(str(schema["name"]).rsplit(".", 1)[-1], (schema, namespace))
            for f in schema.get("fields", []) if kind in ("record", "error") else []:
                self._collect(f["type"], namespace)
            if kind == "array":
                self._collect(schema["items"], namespace)
            if kind == "map":
                self._collect(schema["values"], namespace)

    def _resolve(self, schema: Any, namespace: str) -> tuple[Any, str]:
        if isinstance(schema, str) and schema not in _AVRO_PRIMITIVES:
            key = schema if "." in schema or not namespace else f"{namespace}.{schema}"
            found = self.named.get(key) or self.named.get(schema)
            if found is None:
                raise DecodeError(f"unknown Avro type {schema!r}")
            return found[0], found[1]
        if isinstance(schema, dict) and schema.get("type") in ("record", "error", "enum", "fixed"):
            return schema, _full_name(schema, namespace)[1]
        return schema, namespace

    def spark_type(self, schema: Any = None, namespace: str = "", depth: int = 0) -> Any:
        from pyspark.sql import types as T

        if schema is None:
            schema = self.schema
        schema, namespace = self._resolve(schema, namespace)
        if depth > 32:
            return T.StringType()
        if isinstance(schema, list):
            branches = [b for b in schema if b != "null"]
            if len(branches) == 1:
                return self.spark_type(branches[0], namespace, depth + 1)
            return T.StringType()
        if isinstance(schema, str):
            schema = {"type": schema}
        kind, logical = schema.get("type"), schema.get("logicalType")
        if isinstance(kind, dict | list):
            return self.spark_type(kind, namespace, depth + 1)
        if logical == "date" and kind == "int":
            return T.DateType()
        if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
            return T.TimestampType()
        if logical in ("local-timestamp-millis", "local-timestamp-micros") and kind == "long":
            return T.TimestampNTZType()
        if logical == "decimal" and kind in ("bytes", "fixed"):
            return T.DecimalType(int(schema["precision"]), int(schema.get("scale", 0)))
        simple = {
            "null": T.NullType(),
            "boolean": T.BooleanType(),
            "int": T.IntegerType(),
            "long": T.LongType(),
            "float": T.FloatType(),
            "double": T.DoubleType(),
            "bytes": T.BinaryType(),
            "string": T.StringType(),
            "enum": T.StringType(),
            "fixed": T.BinaryType(),
        }
        if kind in simple:
            return simple[kind]
        if kind in ("record", "error"):
            return T.StructType(
                [
                    T.StructField(f["name"], self.spark_type(f["type"], namespace, depth + 1), True)
                    for f in schema["fields"]
                ]
            )
        if kind == "array":
            return T.ArrayType(self.spark_type(schema["items"], namespace, depth + 1), True)
        if kind == "map":
            value_type = self.spark_type(schema["values"], namespace, depth + 1)
            return T.MapType(T.StringType(), value_type, True)
        raise DecodeError(f"unsupported Avro type {kind!r}")

    def converter(self) -> Callable[[Any], Any]:
        """``convert`` compiled once for the reader schema: a function per schema node, the
        identity where fastavro's value is Spark-ready already (most of them)."""
        compiled = self._compile(self.schema, "", 0)
        return compiled if compiled is not None else _identity

    def _compile(self, schema: Any, namespace: str, depth: int) -> Callable[[Any], Any] | None:
        schema, namespace = self._resolve(schema, namespace)
        if depth > 32:
            return lambda v: self.convert(v, schema, namespace)
        if isinstance(schema, list):
            branches = [b for b in schema if b != "null"]
            if len(branches) != 1:
                return lambda v: None if v is None else json.dumps(v, default=str, sort_keys=True)
            return self._compile(branches[0], namespace, depth + 1)  # None passes through
        if isinstance(schema, str):
            schema = {"type": schema}
        kind = schema.get("type")
        if isinstance(kind, dict | list):
            return self._compile(kind, namespace, depth + 1)
        if kind in ("record", "error"):
            subs = [
                (f["name"], self._compile(f["type"], namespace, depth + 1))
                for f in schema["fields"]
            ]
            active = [(n, c) for n, c in subs if c is not None]
            if not active:
                return None

            def record(v: Any) -> Any:
                if v is None:
                    return None
                for name, sub in active:
                    if v[name] is not None:
                        v[name] = sub(v[name])
                return v

            return record
        if kind == "array":
            item = self._compile(schema["items"], namespace, depth + 1)
            if item is None:
                return None
            return lambda v: None if v is None else [None if x is None else item(x) for x in v]
        if kind == "map":
            sub = self._compile(schema["values"], namespace, depth + 1)
            if sub is None:
                return None
            return lambda v: (
                None if v is None else {k: None if x is None else sub(x) for k, x in v.items()}
            )
        logical = schema.get("logicalType")
        if logical in ("time-millis", "time-micros", "uuid"):
            return lambda v: self.convert(v, schema, namespace)
        if logical is not None:
            # a reader default arrives without fastavro's logical conversion
            return lambda v: (
                _avro_logical_default(v, logical, schema) if isinstance(v, int | str | bytes) else v
            )
        return None

    def convert(self, value: Any, schema: Any = None, namespace: str = "") -> Any:
        if schema is None:
            schema = self.schema
        if value is None:
            return None
        schema, namespace = self._resolve(schema, namespace)
        if isinstance(schema, list):
            branches = [b for b in schema if b != "null"]
            if len(branches) == 1:
                return self.convert(value, branches[0], namespace)
            return json.dumps(value, default=str, sort_keys=True)
        if isinstance(schema, str):
            schema = {"type": schema}
        kind = schema.get("type")
        if isinstance(kind, dict | list):
            return self.convert(value, kind, namespace)
        if kind in ("record", "error"):
            return {
                f["name"]: self.convert(value.get(f["name"]), f["type"], namespace)
                for f in schema["fields"]
            }
        if kind == "array":
            return [self.convert(v, schema["items"], namespace) for v in value]
        if kind == "map":
            return {k: self.convert(v, schema["values"], namespace) for k, v in value.items()}
        logical = schema.get("logicalType")
        if logical is not None and isinstance(value, int | str | bytes):
            # a reader default: fastavro hands defaults over without the logical conversion
            return _avro_logical_default(value, logical, schema)
        if isinstance(value, dt.time):
            micros = (value.hour * 3600 + value.minute * 60 + value.second) * 10**6
            micros += value.microsecond
            return micros // 1000 if schema.get("logicalType") == "time-millis" else micros
        if kind == "string" and not isinstance(value, str):
            return str(value)  # uuid
        return value


def _avro_logical_default(value: Any, logical: str, schema: dict[str, Any]) -> Any:
    import decimal

    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    if isinstance(value, int):
        if logical == "date":
            return dt.date(1970, 1, 1) + dt.timedelta(days=value)
        if logical == "timestamp-millis":
            return epoch + dt.timedelta(milliseconds=value)
        if logical == "timestamp-micros":
            return epoch + dt.timedelta(microseconds=value)
        if logical.startswith("local-timestamp-"):
            unit = 1000 if logical.endswith("millis") else 1
            return dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=value * unit)
        return value
    if logical == "decimal":
        raw = value.encode("latin-1") if isinstance(value, str) else value
        unscaled = int.from_bytes(raw, "big", signed=True) if raw else 0
        return decimal.Decimal(unscaled).scaleb(-int(schema.get("scale", 0)))
    return value


# -- Protobuf --------------------------------------------------------------------------------------
_PB_INT = {5, 17, 15}  # int32, sint32, sfixed32
_PB_LONG = {3, 4, 6, 16, 18, 13, 7}  # int64, uint64, fixed64, sfixed64, sint64, uint32, fixed32


def _pb_spark_type(desc: Any, seen: tuple[str, ...] = ()) -> Any:
    from pyspark.sql import types as T

    if desc.full_name == "google.protobuf.Timestamp":
        return T.TimestampType()
    if desc.full_name in seen or len(seen) > MAX_DEPTH:
        return T.StringType()
    fields = []
    for fd in desc.fields:
        fields.append(T.StructField(fd.name, _pb_field_type(fd, (*seen, desc.full_name)), True))
    return T.StructType(fields)


def _pb_scalar_type(fd: Any, seen: tuple[str, ...]) -> Any:
    from pyspark.sql import types as T

    if fd.type == 11:
        return _pb_spark_type(fd.message_type, seen)
    if fd.type == 14:
        return T.StringType()
    if fd.type in _PB_INT:
        return T.IntegerType()
    if fd.type in _PB_LONG:
        return T.LongType()
    return {
        1: T.DoubleType(),
        2: T.FloatType(),
        8: T.BooleanType(),
        9: T.StringType(),
        12: T.BinaryType(),
    }[fd.type]


def _is_map(fd: Any) -> bool:
    return bool(fd.type == 11 and fd.message_type.GetOptions().map_entry)


def _is_repeated(fd: Any) -> bool:
    if hasattr(fd, "is_repeated"):  # protobuf 5.28 and later
        return bool(fd.is_repeated)
    return bool(fd.label == 3)


def _pb_field_type(fd: Any, seen: tuple[str, ...]) -> Any:
    from pyspark.sql import types as T

    if _is_map(fd):
        key, value = fd.message_type.fields_by_name["key"], fd.message_type.fields_by_name["value"]
        return T.MapType(_pb_scalar_type(key, seen), _pb_scalar_type(value, seen), True)
    if _is_repeated(fd):
        return T.ArrayType(_pb_scalar_type(fd, seen), True)
    return _pb_scalar_type(fd, seen)


def _pb_converter(desc: Any, seen: tuple[str, ...] = ()) -> Callable[[Any], Any]:
    """``_pb_convert`` for one message type, planned once: per field its name and how its
    value becomes a Spark value."""
    if desc.full_name == "google.protobuf.Timestamp" or desc.full_name in seen:
        return lambda m: _pb_convert(m, seen)
    if len(seen) > MAX_DEPTH:
        return lambda m: _pb_convert(m, seen)
    inner = (*seen, desc.full_name)
    plan: list[tuple[str, int, Any]] = []
    for fd in desc.fields:
        if _is_map(fd):
            value_fd = fd.message_type.fields_by_name["value"]
            plan.append((fd.name, 0, _pb_field_converter(value_fd, inner)))
        elif _is_repeated(fd):
            plan.append((fd.name, 1, _pb_field_converter(fd, inner)))
        elif fd.type == 11 or getattr(fd, "has_presence", False):
            plan.append((fd.name, 2, _pb_field_converter(fd, inner)))
        else:
            plan.append((fd.name, 3, _pb_field_converter(fd, inner)))

    # Unset fields keep these (ListFields gives only the set ones, in one call into C).
    template: dict[str, Any] = {}
    by_number: dict[int, tuple[str, int, Any]] = {}
    for fd, (name, how, sub) in zip(desc.fields, plan, strict=True):
        by_number[fd.number] = (name, how, sub)
        if how == 3:
            template[name] = fd.default_value if sub is None else sub(fd.default_value)
        else:
            template[name] = None if how == 2 else [] if how == 1 else {}

    def convert(message: Any) -> Any:
        out = dict(template)
        for fd, value in message.ListFields():
            name, how, sub = by_number[fd.number]
            if how >= 2:
                out[name] = value if sub is None else sub(value)
            elif how == 1:
                out[name] = list(value) if sub is None else [sub(v) for v in value]
            else:
                out[name] = dict(value) if sub is None else {k: sub(v) for k, v in value.items()}
        return out

    return convert


def _pb_field_converter(fd: Any, seen: tuple[str, ...]) -> Callable[[Any], Any] | None:
    if fd.type == 11:
        return _pb_converter(fd.message_type, seen)
    if fd.type == 14:
        names = {v.number: v.name for v in fd.enum_type.values}
        return lambda v: names.get(v, str(v))
    return None


def _identity(value: Any) -> Any:
    return value


def _pb_convert(message: Any, seen: tuple[str, ...] = ()) -> Any:
    desc = message.DESCRIPTOR
    if desc.full_name == "google.protobuf.Timestamp":
        return dt.datetime.fromtimestamp(message.seconds, dt.UTC) + dt.timedelta(
            microseconds=message.nanos // 1000
        )
    if desc.full_name in seen or len(seen) > MAX_DEPTH:
        from google.protobuf import json_format

        return json_format.MessageToJson(message, indent=None)
    inner = (*seen, desc.full_name)
    out: dict[str, Any] = {}
    for fd in desc.fields:
        value = getattr(message, fd.name)
        if _is_map(fd):
            value_fd = fd.message_type.fields_by_name["value"]
            out[fd.name] = {k: _pb_value(value_fd, v, inner) for k, v in value.items()}
        elif _is_repeated(fd):
            out[fd.name] = [_pb_value(fd, v, inner) for v in value]
        elif _unset(message, fd):
            out[fd.name] = None
        else:
            out[fd.name] = _pb_value(fd, value, inner)
    return out


def _unset(message: Any, fd: Any) -> bool:
    """A singular message, or a scalar with presence (proto2, proto3 ``optional``), not set."""
    has_presence = fd.type == 11 or getattr(fd, "has_presence", False)
    return bool(has_presence and not message.HasField(fd.name))


def _pb_value(fd: Any, value: Any, seen: tuple[str, ...]) -> Any:
    if fd.type == 11:
        return _pb_convert(value, seen)
    if fd.type == 14:
        found = fd.enum_type.values_by_number.get(value)
        return found.name if found is not None else str(value)
    return value


def _pb_message(pool_fdp: Any, indexes: tuple[int, ...]) -> Any:
    """The descriptor named by the message indexes in a file."""
    pool, fdp = pool_fdp
    file = pool.FindFileByName(fdp.name)
    ordered = [file.message_types_by_name[m.name] for m in fdp.message_type]
    if not indexes or not ordered:
        raise DecodeError("the schema has no message")
    if indexes[0] >= len(ordered):
        raise DecodeError(f"message index {indexes[0]} is past the file's messages")
    desc = ordered[indexes[0]]
    for index in indexes[1:]:
        if index >= len(desc.nested_types):
            raise DecodeError(f"message index {index} is past {desc.full_name}'s nested types")
        desc = desc.nested_types[index]
    return desc


# -- JSON Schema -----------------------------------------------------------------------------------
def _json_spark_type(schema: Any, depth: int = 0) -> Any:
    from pyspark.sql import types as T

    if not isinstance(schema, dict) or depth > 16:
        return T.StringType()
    kind = schema.get("type")
    if isinstance(kind, list):
        others = [k for k in kind if k != "null"]
        kind = others[0] if len(others) == 1 else None
    if kind == "object" and isinstance(schema.get("properties"), dict):
        return T.StructType(
            [
                T.StructField(name, _json_spark_type(sub, depth + 1), True)
                for name, sub in schema["properties"].items()
            ]
        )
    if kind == "array" and isinstance(schema.get("items"), dict):
        return T.ArrayType(_json_spark_type(schema["items"], depth + 1), True)
    simple = {
        "string": T.StringType(),
        "integer": T.LongType(),
        "number": T.DoubleType(),
        "boolean": T.BooleanType(),
    }
    return simple.get(str(kind), T.StringType())


def _json_convert(value: Any, spark_type: Any) -> Any:
    from pyspark.sql import types as T

    if value is None:
        return None
    if isinstance(spark_type, T.StructType):
        if not isinstance(value, dict):
            raise DecodeError(f"expected an object, found {type(value).__name__}")
        return {f.name: _json_convert(value.get(f.name), f.dataType) for f in spark_type.fields}
    if isinstance(spark_type, T.ArrayType):
        if not isinstance(value, list):
            raise DecodeError(f"expected an array, found {type(value).__name__}")
        return [_json_convert(v, spark_type.elementType) for v in value]
    if isinstance(spark_type, T.StringType):
        return value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    if isinstance(spark_type, T.LongType):
        if isinstance(value, bool) or not isinstance(value, int):
            raise DecodeError(f"expected an integer, found {value!r}")
        return value
    if isinstance(spark_type, T.DoubleType):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise DecodeError(f"expected a number, found {value!r}")
        return float(value)
    if isinstance(spark_type, T.BooleanType) and not isinstance(value, bool):
        raise DecodeError(f"expected a boolean, found {value!r}")
    return value


# -- one field of one topic ------------------------------------------------------------------------
class FieldDecoder:
    """Decodes the key or the value of one topic with the subject's latest schema."""

    def __init__(self, catalog: SchemaCatalog, subject: str) -> None:
        latest = catalog.latest(subject)
        if latest is None:
            raise DecodeError(f"subject {subject!r} is not in the registry")
        self.catalog = catalog
        self.subject = subject
        self.reader = latest
        self._cache: dict[int, Any] = {}
        self._reader_parsed: Any = None
        self._reader_fast: Any = None
        self._avro_convert: Callable[[Any], Any] | None = None
        self.spark_type = self._spark_type()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_cache"] = {}
        state["_reader_parsed"] = None
        state["_reader_fast"] = None
        state["_avro_convert"] = None
        return state

    def _spark_type(self) -> Any:
        kind = self.reader.schema_type
        if kind == AVRO:
            return self._avro_types().spark_type()
        if kind == PROTOBUF:
            pool_fdp = self._protobuf(self.reader)
            return _pb_spark_type(_pb_message(pool_fdp, (0,)))
        return _json_spark_type(json.loads(self.reader.schema))

    # readers, built once per process
    def _avro_types(self) -> _AvroTypes:
        if self._reader_parsed is None:
            self._reader_parsed = _AvroTypes(
                json.loads(self.reader.schema), self.catalog.dependencies(self.reader)
            )
        return self._reader_parsed  # type: ignore[no-any-return]

    def _avro_parsed(self, value: SchemaValue) -> Any:
        import fastavro

        named: dict[str, Any] = {}
        for dep in self.catalog.dependencies(value):
            if dep.schema_type == AVRO:
                fastavro.parse_schema(json.loads(dep.schema), named_schemas=named)
        return fastavro.parse_schema(json.loads(value.schema), named_schemas=named)

    def _protobuf(self, value: SchemaValue) -> Any:
        from tidelog.schema.formats import parse_schema

        key = -value.id
        if key not in self._cache:
            parsed = parse_schema(PROTOBUF, value.schema, self.catalog.dependencies(value))
            self._cache[key] = parsed.parsed
        return self._cache[key]

    def decode(self, raw: bytes) -> tuple[Any, int]:
        kind = self.reader.schema_type
        try:
            frame = parse_frame(raw, protobuf=kind == PROTOBUF)
        except FrameError as exc:
            raise DecodeError(str(exc)) from None
        writer = self.catalog.by_id(frame.schema_id)
        if writer.schema_type != kind:
            raise DecodeError(f"schema id {frame.schema_id} is {writer.schema_type}, not {kind}")
        payload = raw[frame.offset :]
        try:
            if kind == AVRO:
                return self._decode_avro(writer, payload), frame.schema_id
            if kind == PROTOBUF:
                cls, convert = self._message_class(frame.message_indexes)
                return convert(cls.FromString(payload)), frame.schema_id
            value = json.loads(payload)
            return _json_convert(value, self.spark_type), frame.schema_id
        except DecodeError:
            raise
        except Exception as exc:  # the codec's own error on bad bytes: the side table says it
            raise DecodeError(f"{type(exc).__name__}: {exc}") from None

    def _decode_avro(self, writer: SchemaValue, payload: bytes) -> Any:
        import fastavro

        if writer.id not in self._cache:
            self._cache[writer.id] = self._avro_parsed(writer)
        if self._reader_fast is None:
            self._reader_fast = self._avro_parsed(self.reader)
        buffer = io.BytesIO(payload)
        # the reader schema only when it differs: fastavro resolves schemas on every call
        reader = None if writer.id == self.reader.id else self._reader_fast
        value = fastavro.schemaless_reader(buffer, self._cache[writer.id], reader)
        if buffer.tell() != len(payload):
            raise DecodeError(f"{len(payload) - buffer.tell()} bytes left after the record")
        if self._avro_convert is None:
            self._avro_convert = self._avro_types().converter()
        return self._avro_convert(value)

    def _message_class(self, indexes: tuple[int, ...]) -> Any:
        """The latest schema's message class for ``indexes`` (made once per process)."""
        key = ("message", indexes)
        cls = self._cache.get(key)  # type: ignore[call-overload]
        if cls is None:
            from google.protobuf import message_factory

            desc = _pb_message(self._protobuf(self.reader), indexes)
            cls = (message_factory.GetMessageClass(desc), _pb_converter(desc))
            self._cache[key] = cls  # type: ignore[index]
        return cls


@dataclass
class TopicDecoder:
    topic: str
    mode: str
    key: FieldDecoder | None
    value: FieldDecoder | None

    @staticmethod
    def for_topic(catalog: SchemaCatalog, topic: str, mode: str) -> TopicDecoder:
        key = value = None
        if catalog.latest(f"{topic}-key") is not None:
            key = FieldDecoder(catalog, f"{topic}-key")
        if catalog.latest(f"{topic}-value") is not None:
            value = FieldDecoder(catalog, f"{topic}-value")
        return TopicDecoder(topic, mode, key, value)


def parse_decode_option(text: str | None) -> dict[str, str]:
    """``"orders=decoded,payments=both,*=raw"`` -> {topic: mode}; ``*`` is every other topic."""
    out: dict[str, str] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        topic, sep, mode = item.strip().rpartition("=")
        if not sep or not topic or mode not in MODES:
            raise ValueError(
                f"decode {item!r}: write TOPIC=MODE (MODE one of {', '.join(MODES)}; * for "
                "every topic), for example orders=decoded,*=raw"
            )
        out[topic] = mode
    return out


def decode(df: Any, decoder: TopicDecoder) -> tuple[Any, Any]:
    """(decoded rows, undecodable rows) of ``decoder.topic`` in ``df`` (the ``tidelog``
    source's columns). ``decoded`` mode: ``key``/``value`` become the typed columns (a field
    without a subject stays bytes); ``both``: they stay bytes beside ``key_decoded`` /
    ``value_decoded``. ``key_schema_id`` / ``value_schema_id`` name the writer schemas. The
    side table has the raw bytes and ``decode_error``."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    rows = df.where(F.col("topic") == decoder.topic)
    fields = list(rows.schema.fields)
    extra: list[Any] = []
    decoders = [("key", decoder.key), ("value", decoder.value)]
    for name, field_decoder in decoders:
        if field_decoder is not None:
            extra.append(T.StructField(f"{name}_decoded", field_decoder.spark_type, True))
            extra.append(T.StructField(f"{name}_schema_id", T.IntegerType(), True))
    extra.append(T.StructField("decode_error", T.StringType(), True))
    out_schema = T.StructType(fields + extra)

    def run(records: Iterator[Any]) -> Iterator[tuple[Any, ...]]:
        for record in records:
            added: list[Any] = []
            errors = []
            for name, field_decoder in decoders:
                if field_decoder is None:
                    continue
                data = record[name]
                decoded = schema_id = None
                if data is not None:
                    try:
                        decoded, schema_id = field_decoder.decode(bytes(data))
                    except DecodeError as exc:
                        errors.append(f"{name}: {exc}")
                added += [decoded, schema_id]
            yield (*record, *added, "; ".join(errors) or None)

    # Rows through Python (no pandas needed, unlike mapInArrow): the decoders are per record.
    both = rows.sparkSession.createDataFrame(rows.rdd.mapPartitions(run), out_schema)
    good = both.where(F.col("decode_error").isNull()).drop("decode_error")
    bad_cols = [c for c in ("topic", "partition", "offset", "timestamp", "key", "value")]
    bad_cols += [f.name for f in extra if f.name.endswith("_schema_id")] + ["decode_error"]
    bad = both.where(F.col("decode_error").isNotNull()).select(*bad_cols)
    if decoder.mode == "decoded":
        for name, field_decoder in decoders:
            if field_decoder is not None:
                good = good.drop(name).withColumnRenamed(f"{name}_decoded", name)
    return good, bad


def schema_versions(df: Any, catalog: SchemaCatalog, topics: list[str]) -> list[dict[str, Any]]:
    """Per topic, field (key or value) and writer schema id: the subject and version, how many
    records and their first and last offsets and times (the replay report's "Schemas over
    time" table)."""
    from pyspark.sql import functions as F

    out: list[dict[str, Any]] = []
    for name in ("key", "value"):
        col = F.col(name)
        framed = df.where(
            col.isNotNull() & (F.length(col) >= 5) & (F.substring(col, 1, 1) == F.lit(b"\x00"))
        )
        schema_id = F.conv(F.hex(F.substring(col, 2, 4)), 16, 10).cast("long")
        grouped = (
            framed.where(F.col("topic").isin(topics))
            .groupBy("topic", schema_id.alias("schema_id"))
            .agg(
                F.count(F.lit(1)).alias("records"),
                F.min("offset").alias("first_offset"),
                F.max("offset").alias("last_offset"),
                F.min("timestamp").alias("first_timestamp"),
                F.max("timestamp").alias("last_timestamp"),
            )
            .orderBy("topic", "first_timestamp")
        )
        for row in grouped.collect():
            subject = f"{row['topic']}-{name}"
            version = catalog.subject_version(int(row["schema_id"]), subject)
            if version is None:
                continue  # bytes that only look framed, or another naming strategy
            out.append(
                {
                    "topic": row["topic"],
                    "field": name,
                    "subject": subject,
                    "version": version,
                    "schema_id": int(row["schema_id"]),
                    "records": int(row["records"]),
                    "first_offset": int(row["first_offset"]),
                    "last_offset": int(row["last_offset"]),
                    "first_timestamp": row["first_timestamp"],
                    "last_timestamp": row["last_timestamp"],
                }
            )
    out.sort(key=lambda r: (r["topic"], r["field"], r["version"]))
    return out


# -- the tidelog Spark source: options decode and schemaRegistryUrl --------------------------------
_BASE_FIELDS = (
    ("key", "binary"),
    ("value", "binary"),
    ("topic", "string"),
    ("partition", "int"),
    ("offset", "long"),
    ("timestamp", "timestamp"),
    ("timestampType", "int"),
)


def source_decoder(options: dict[str, str]) -> TopicDecoder | None:
    """The decoder the ``tidelog`` source's options ask for (``decode=TOPIC=MODE``, the
    registry at ``schemaRegistryUrl`` or the ``_schemas`` topic of ``path``), or None."""
    from tidelog.analytics.options import OptionError

    opts = {k.lower(): str(v) for k, v in options.items()}
    try:
        modes = parse_decode_option(opts.get("decode"))
    except ValueError as exc:
        raise OptionError(f"option {exc}") from None
    wanted = {t: m for t, m in modes.items() if m != "raw"}
    if not wanted:
        return None
    topics = [t.strip() for t in opts.get("subscribe", "").split(",") if t.strip()]
    if len(topics) != 1 or set(wanted) - {topics[0], "*"}:
        raise OptionError(
            "option decode: a read with typed columns reads one topic (its columns are that "
            "topic's schema): set subscribe=<that topic> and decode=<that topic>=decoded|both"
        )
    topic = topics[0]
    url = opts.get("schemaregistryurl")
    if url:
        catalog = SchemaCatalog.from_url(url)
    elif opts.get("path"):
        catalog = SchemaCatalog.from_log_dir(opts["path"])
    else:
        raise OptionError(
            "option decode needs schemaRegistryUrl (or path: the log dir's _schemas topic)"
        )
    decoder = TopicDecoder.for_topic(catalog, topic, wanted.get(topic, wanted.get("*", "raw")))
    if decoder.key is None and decoder.value is None:
        raise OptionError(
            f"option decode: the registry has no subject {topic}-key or {topic}-value"
        )
    return decoder


def _source_extra(decoder: TopicDecoder) -> list[tuple[str, Any]]:
    from pyspark.sql import types as T

    out: list[tuple[str, Any]] = []
    for name, field_decoder in (("key", decoder.key), ("value", decoder.value)):
        if field_decoder is None:
            continue
        if decoder.mode == "both":
            out.append((f"{name}_decoded", field_decoder.spark_type))
        else:
            out.append((f"undecoded_{name}", T.BinaryType()))
        out.append((f"{name}_schema_id", T.IntegerType()))
    out.append(("decode_error", T.StringType()))
    return out


def source_schema(decoder: TopicDecoder, include_headers: bool) -> Any:
    """The source's columns with typed ones: ``decoded`` replaces ``key``/``value`` by their
    types and keeps an undecodable record's bytes in ``undecoded_key``/``undecoded_value``;
    ``both`` adds ``key_decoded``/``value_decoded``. ``*_schema_id`` and ``decode_error``
    always (a record that does not decode is kept, with the reason)."""
    from pyspark.sql import types as T

    simple = {
        "binary": T.BinaryType(),
        "string": T.StringType(),
        "int": T.IntegerType(),
        "long": T.LongType(),
        "timestamp": T.TimestampType(),
    }
    fields = []
    typed = {"key": decoder.key, "value": decoder.value} if decoder.mode == "decoded" else {}
    for name, kind in _BASE_FIELDS:
        field_decoder = typed.get(name)
        data_type = field_decoder.spark_type if field_decoder is not None else simple[kind]
        fields.append(T.StructField(name, data_type, True))
    if include_headers:
        header = T.StructType(
            [
                T.StructField("key", T.StringType(), True),
                T.StructField("value", T.BinaryType(), True),
            ]
        )
        fields.append(T.StructField("headers", T.ArrayType(header, True), True))
    fields += [T.StructField(n, t, True) for n, t in _source_extra(decoder)]
    return T.StructType(fields)


def decode_batch(decoder: TopicDecoder, batch: Any) -> Any:
    """One Arrow batch of the source's base columns -> the batch of ``source_schema``."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type

    columns: dict[str, Any] = {n: batch.column(n) for n in batch.schema.names}
    errors: list[list[str]] = [[] for _ in range(batch.num_rows)]
    for name, field_decoder in (("key", decoder.key), ("value", decoder.value)):
        if field_decoder is None:
            continue
        raw = columns[name].to_pylist()
        decoded: list[Any] = []
        ids: list[int | None] = []
        kept: list[bytes | None] = []
        for i, data in enumerate(raw):
            value = schema_id = None
            if data is not None:
                try:
                    value, schema_id = field_decoder.decode(bytes(data))
                except DecodeError as exc:
                    errors[i].append(f"{name}: {exc}")
            decoded.append(value)
            ids.append(schema_id)
            kept.append(data if data is not None and schema_id is None else None)
        typed = pa.array(decoded, type=to_arrow_type(field_decoder.spark_type, timezone="UTC"))
        if decoder.mode == "both":
            columns[f"{name}_decoded"] = typed
        else:
            columns[name] = typed
            columns[f"undecoded_{name}"] = pa.array(kept, type=pa.binary())
        columns[f"{name}_schema_id"] = pa.array(ids, type=pa.int32())
    columns["decode_error"] = pa.array(["; ".join(e) or None for e in errors], type=pa.string())
    order = [n for n in batch.schema.names] + [n for n, _ in _source_extra(decoder)]
    return pa.RecordBatch.from_arrays([columns[n] for n in order], names=order)
