"""Parsing and printing of config values by their Kafka type."""

from __future__ import annotations

from collections.abc import Iterable

from tidelog.config.definitions import ConfigDef

_INT_RANGE = {"short": (-(2**15), 2**15 - 1), "int": (-(2**31), 2**31 - 1)}
_LONG_RANGE = (-(2**63), 2**63 - 1)


class ConfigError(ValueError):
    """A setting that is unknown or has a value its definition does not allow.

    ``name`` is the property; ``str(error)`` is a sentence that names it and what is allowed.
    """

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


def unknown_name_error(name: str, known: Iterable[str], what: str = "setting") -> ConfigError:
    import difflib  # only on an error

    names = list(known)
    close = difflib.get_close_matches(name, names, n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    return ConfigError(name, f"Unknown {what} '{name}'.{hint}")


def _describe_allowed(d: ConfigDef) -> str:
    if d.choices:
        return "one of " + ", ".join(d.choices)
    kind = f"an {d.type}" if d.type[0] in "aeiou" else f"a {d.type}"
    low, high = d.min_value, d.max_value
    if low is not None and high is not None:
        if low == high:  # default.replication.factor on a single node: one value allowed
            return f"{_fmt_number(low)} (the only value allowed)"
        return f"{kind} from {_fmt_number(low)} to {_fmt_number(high)}"
    if low is not None:
        return f"{kind} >= {_fmt_number(low)}"
    if high is not None:
        return f"{kind} <= {_fmt_number(high)}"
    return kind


def _fmt_number(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else str(v)


def parse_value(d: ConfigDef, raw: object) -> object:
    """Turn ``raw`` (a YAML scalar or list, or a string) into the typed value for ``d``."""
    if raw is None:
        return None
    try:
        value = _parse(d, raw)
    except (ValueError, TypeError):
        shown = "[hidden]" if d.type == "password" else repr(raw)  # never echo a secret
        raise ConfigError(
            d.name, f"Invalid value {shown} for '{d.name}': expected {_describe_allowed(d)}."
        ) from None
    _check(d, value, raw)
    return value


def _parse(d: ConfigDef, raw: object) -> object:
    t = d.type
    if t in ("int", "long", "short"):
        if isinstance(raw, bool):
            raise ValueError("bool is not a number")
        if isinstance(raw, int):
            n = raw
        elif isinstance(raw, str):
            n = int(raw.strip())
        elif isinstance(raw, float) and raw.is_integer():
            n = int(raw)
        else:
            raise ValueError(f"not an integer: {raw!r}")
        lo, hi = _INT_RANGE.get(t, _LONG_RANGE)
        if not lo <= n <= hi:
            raise ValueError(f"{n} outside the {t} range")
        return n
    if t == "double":
        if isinstance(raw, bool):
            raise ValueError("bool is not a number")
        if isinstance(raw, int | float):
            return float(raw)
        if isinstance(raw, str):
            return float(raw.strip())
        raise ValueError(f"not a number: {raw!r}")
    if t == "boolean":
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
            return raw.strip().lower() == "true"
        raise ValueError(f"not a boolean: {raw!r}")
    if t == "list":
        if isinstance(raw, list | tuple):
            items = [str(x).strip() for x in raw]
        elif isinstance(raw, str):
            items = [x.strip() for x in raw.split(",")]
        else:
            raise ValueError(f"not a list: {raw!r}")
        return [x for x in items if x]
    if t in ("string", "password"):
        if isinstance(raw, str | int | float) and not isinstance(raw, bool):
            return str(raw)
        raise ValueError(f"not a string: {raw!r}")
    raise ValueError(f"unknown type {t}")


def _check(d: ConfigDef, value: object, raw: object) -> None:
    def bad() -> ConfigError:
        return ConfigError(
            d.name, f"Invalid value {raw!r} for '{d.name}': expected {_describe_allowed(d)}."
        )

    if d.choices is not None:
        items = value if isinstance(value, list) else [value]
        lowered = {c.lower(): c for c in d.choices}
        if d.type == "list" and not items:
            raise bad()
        for item in items:
            if not isinstance(item, str) or item.lower() not in lowered:
                raise bad()
    if isinstance(value, int | float) and not isinstance(value, bool):
        if d.min_value is not None and value < d.min_value:
            raise bad()
        if d.max_value is not None and value > d.max_value:
            raise bad()


def format_value(value: object) -> str | None:
    """Kafka's string form of a value, as DescribeConfigs shows it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(x) for x in value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(value)
    return str(value)
