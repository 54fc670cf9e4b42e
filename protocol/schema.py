"""Version-agnostic access to kio's per-version response classes.

kio generates one module per (API, version), each with its own dataclasses that have exactly the
fields of that version. Handlers that serve many versions build responses through these helpers:
``response_types(api_key, version).PartitionData`` is that version's class, and ``build(cls, ...)``
drops keyword arguments the version does not have (``log_start_offset`` before Produce v5, ...).
"""

from __future__ import annotations

import dataclasses
import functools
from types import ModuleType
from typing import Any

from kio.index import load_payload_module
from kio.static.constants import EntityType

__all__ = (
    "build",
    "field_names",
    "has_field",
    "request_types",
    "response_types",
    "top_level_error_response",
    "zero_entity",
)


@functools.cache
def response_types(api_key: int, api_version: int) -> Any:
    """The kio module of this response version (attributes are its dataclasses)."""
    module: ModuleType = load_payload_module(api_key, api_version, EntityType.response)
    return module


@functools.cache
def request_types(api_key: int, api_version: int) -> Any:
    """The kio module of this request version."""
    module: ModuleType = load_payload_module(api_key, api_version, EntityType.request)
    return module


@functools.cache
def field_names(cls: type) -> frozenset[str]:
    """Names of a kio dataclass's fields."""
    return frozenset(f.name for f in dataclasses.fields(cls))


def has_field(cls: type, name: str) -> bool:
    return name in field_names(cls)


def build(cls: Any, /, **kwargs: Any) -> Any:
    """``cls(**kwargs)`` keeping only the fields that ``cls`` has."""
    names = field_names(cls)
    return cls(**{k: v for k, v in kwargs.items() if k in names})


def _zero_value(field: dataclasses.Field[Any], error_code: int) -> Any:
    """A neutral value for a required field: empty arrays, zero numbers, null where allowed."""
    from datetime import timedelta

    from kio.serial._introspect import (
        EntityField,
        PrimitiveTupleField,
        classify_field,
        is_optional,
    )
    from kio.static.constants import uuid_zero

    kind = classify_field(field)
    if kind.is_array:
        return ()
    if is_optional(field):
        return None
    if isinstance(kind, EntityField):
        return zero_entity(kind.type_, error_code)
    assert not isinstance(kind, PrimitiveTupleField)
    kafka_type = field.metadata.get("kafka_type")
    match kafka_type:
        case "error_code":
            from kio.schema.errors import ErrorCode

            return ErrorCode(error_code)
        case "string":
            return ""
        case "bytes" | "records":
            return b""
        case "bool":
            return False
        case "uuid":
            return uuid_zero
        case "timedelta_i32" | "timedelta_i64":
            return timedelta(0)
        case "datetime_i64":
            from kio.serial.readers import tz_aware_from_i64
            from kio.static.primitive import i64

            return tz_aware_from_i64(i64(-1))
        case "float64":
            return 0.0
        case _:
            return -1 if field.name.endswith(("_id", "offset", "epoch")) else 0


def zero_entity(cls: Any, error_code: int) -> Any:
    """An instance of ``cls`` with every required field neutral and error codes set."""
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            kwargs[f.name] = _zero_value(f, error_code)
    return cls(**kwargs)


def top_level_error_response(cls: Any, error_code: int) -> Any | None:
    """A response carrying ``error_code`` in its top-level ``error_code`` field, else None."""
    if "error_code" not in field_names(cls):
        return None
    return zero_entity(cls, error_code)
