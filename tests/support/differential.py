"""The differential harness: one request, sent to tidelog and to Apache Kafka, answers compared.

A request is data: an API name (kio's module name, e.g. ``"list_offsets"``), a version and a dict
of fields (nested dicts and lists for nested entities; fields left out take kio's defaults).
``build`` turns it into kio's request; ``plain`` turns an answer into dicts, lists and scalars;
``normalise`` replaces what must differ between two brokers (ids, ports, times, free text) by
markers. String values ``"$name.path"`` in a request refer to an earlier answer of the same
broker (``$join.member_id``), for ids that each broker picks itself.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import typing
import uuid
from collections.abc import Mapping
from types import NoneType, UnionType
from typing import Any

from kio.schema.errors import ErrorCode

__all__ = (
    "FREE_TEXT",
    "NORMALISED",
    "build",
    "errors",
    "normalise",
    "plain",
    "request_class",
    "resolve",
)

# Fields whose values each broker picks for itself; compared as "present" only.
NORMALISED = {
    "throttle_time_ms": "<throttle>",
    "cluster_id": "<cluster>",
    "topic_id": "<topic-id>",
    "port": "<port>",
    "member_id": "<member>",
    "leader": "<member>",
    "producer_id": "<producer-id>",
    "session_id": "<session>",
    "log_append_time_ms": "<time>",
    "log_append_time": "<time>",
    "timestamp": "<time>",
    "current_state_timestamp": "<time>",
    "transaction_start_time_ms": "<time>",
    "transaction_start_time": "<time>",
    "last_timestamp": "<time>",
    "authorized_operations": "<ops>",
    "topic_authorized_operations": "<ops>",
    "cluster_authorized_operations": "<ops>",
    "finalized_features_epoch": "<epoch>",
    "supported_features": "<features>",
    "finalized_features": "<features>",
}


def request_class(api: str, version: int, kind: str = "request") -> type[Any]:
    """kio's ``<Api>Request`` (or Response) class of ``api`` at ``version``."""
    module = importlib.import_module(f"kio.schema.{api}.v{version}.{kind}")
    name = "".join(p.capitalize() for p in api.split("_")) + kind.capitalize()
    return typing.cast(type[Any], getattr(module, name))


def _coerce(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, UnionType):
        inner = [a for a in typing.get_args(hint) if a is not NoneType]
        return _coerce(inner[0], value)
    if origin is tuple:
        (item, *_rest) = typing.get_args(hint)
        return tuple(_coerce(item, v) for v in value)
    if dataclasses.is_dataclass(hint) and isinstance(value, Mapping):
        return build(typing.cast(type[Any], hint), value)
    if _is(hint, datetime.timedelta) and isinstance(value, int):
        return hint(datetime.timedelta(milliseconds=value))
    if _is(hint, datetime.datetime) and isinstance(value, int):
        return hint(datetime.datetime.fromtimestamp(value / 1000, datetime.UTC))
    if hint is uuid.UUID and isinstance(value, str):
        return uuid.UUID(value)
    if isinstance(hint, type) and issubclass(hint, ErrorCode):
        return ErrorCode(value)
    if isinstance(hint, type) and not isinstance(value, hint):
        return hint(value)
    return value


def _is(hint: Any, base: type[Any]) -> bool:
    return isinstance(hint, type) and issubclass(hint, base)


def build(cls: type[Any], fields: Mapping[str, Any]) -> Any:
    """An instance of the kio entity ``cls`` from plain ``fields`` (nested dicts and lists)."""
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in fields:
            kwargs[f.name] = _coerce(hints[f.name], fields[f.name])
    unknown = set(fields) - {f.name for f in dataclasses.fields(cls)}
    assert not unknown, f"{cls.__name__} has no fields {sorted(unknown)}"
    return cls(**kwargs)


def plain(value: Any) -> Any:
    """An answer as dicts, lists and scalars (error codes by name, times in milliseconds)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, ErrorCode):
        return value.name
    if isinstance(value, datetime.timedelta):
        return int(value / datetime.timedelta(milliseconds=1))
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, int | str | float | bool) or value is None:
        return value if type(value) in (int, str, float, bool) else _scalar(value)
    return repr(value)


def _scalar(value: Any) -> Any:
    for t in (bool, int, float, str):
        if isinstance(value, t):
            return t(value)
    return value


# Free text: replaced whether present or not (Kafka leaves some null that tidelog fills, and
# the other way round; clients show them, never parse them).
FREE_TEXT = {"error_message": "<message>"}


def normalise(value: Any, extra: Mapping[str, str] | None = None) -> Any:
    """``value`` (from ``plain``) with the fields of ``NORMALISED`` (and ``extra``) replaced by
    markers: present or absent (null, or a null UUID) still tells them apart. Lists of configs
    and of groups are sorted by name: their order follows each broker's own maps."""
    markers = {**NORMALISED, **(extra or {})}
    if isinstance(value, dict):
        out = {}
        for key, v in value.items():
            if key in FREE_TEXT:
                out[key] = FREE_TEXT[key]
            elif key in markers and v not in (None, -1, "00000000-0000-0000-0000-000000000000"):
                out[key] = markers[key]
            else:
                out[key] = normalise(v, extra)
        return out
    if isinstance(value, list):
        items = [normalise(v, extra) for v in value]
        for key in ("config_source", "group_id"):
            if items and all(isinstance(i, dict) and key in i for i in items):
                items.sort(key=lambda i: str(i.get("name", i.get("group_id"))))
        return items
    return value


def resolve(fields: Any, answers: Mapping[str, Any]) -> Any:
    """``fields`` with every ``"$name.path.to.field"`` string replaced from ``answers[name]``
    (plain answers; list items by index)."""
    if isinstance(fields, dict):
        return {k: resolve(v, answers) for k, v in fields.items()}
    if isinstance(fields, list):
        return [resolve(v, answers) for v in fields]
    if isinstance(fields, str) and fields.startswith("$"):
        name, *path = fields[1:].split(".")
        value = answers[name]
        for part in path:
            value = value[int(part)] if isinstance(value, list) else value[part]
        return value
    return fields


def errors(answer: Any) -> list[str]:
    """Every error code in a plain answer (``plain``), the answer's own first."""
    if isinstance(answer, dict):
        own = [answer["error_code"]] if "error_code" in answer else []
        return own + [e for v in answer.values() for e in errors(v)]
    if isinstance(answer, list):
        return [e for v in answer for e in errors(v)]
    return []
