"""kafka-configs.sh's SCRAM syntax, shared by ``tidelog configs`` and ``tidelog storage``:
``SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=...]``
(``name=alice`` inside the brackets for ``storage format --add-scram``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from tidelog.tools._common import ToolError

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_ITERATIONS = 4096


@dataclass(frozen=True, slots=True)
class ScramSpec:
    mechanism: str
    options: dict[str, str] = field(repr=False)

    @property
    def iterations(self) -> int:
        raw = self.options.get("iterations", str(DEFAULT_ITERATIONS))
        if not raw.isdigit():
            raise ToolError(f"iterations={raw!r} of {self.mechanism} is not a number", 2)
        return int(raw)

    @property
    def password(self) -> str:
        password = self.options.get("password")
        if not password:
            raise ToolError(f"{self.mechanism} needs password=... inside the brackets", 2)
        return password


def split_top(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def parse_scram_specs(text: str) -> list[ScramSpec]:
    """``MECH=[k=v,...],MECH=[...]``; the error never repeats a password."""
    specs = []
    for part in split_top(text):
        mechanism, sep, rest = part.partition("=")
        mechanism = mechanism.strip().upper()
        if mechanism not in MECHANISMS:
            raise ToolError(
                f"unknown SCRAM mechanism {mechanism!r}: use {' or '.join(MECHANISMS)}", 2
            )
        rest = rest.strip()
        if not sep or not (rest.startswith("[") and rest.endswith("]")):
            raise ToolError(f"write {mechanism}=[iterations=8192,password=...]", 2)
        options: dict[str, str] = {}
        for item in rest[1:-1].split(","):
            key, eq, value = item.partition("=")
            if not eq:
                raise ToolError(f"{mechanism}: options inside [...] are key=value", 2)
            options[key.strip().lower()] = value.strip()
        specs.append(ScramSpec(mechanism, options))
    if not specs:
        raise ToolError("no SCRAM credential given", 2)
    return specs
