"""Kafka's JAAS configuration syntax, as ``sasl.jaas.config`` holds it::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

One or more entries ``<login module class> <flag> [key=value ...];`` where values are quoted
(``"..."`` with backslash escapes) or bare words. For PLAIN, ``user_<name>="<password>"`` lists
the users a broker accepts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ("JaasEntry", "parse_jaas")

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s*(?:"((?:\\.|[^"\\])*)"|([^\s=;"]+)|(=)|(;))')


@dataclass(frozen=True, slots=True)
class JaasEntry:
    module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    def plain_users(self) -> dict[str, str]:
        return {k[5:]: v for k, v in self.options.items() if k.startswith("user_") and k[5:]}


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"unexpected text at position {pos} of the JAAS configuration")
        pos = m.end()
        if m.group(1) is not None:
            out.append(("str", re.sub(r"\\(.)", r"\1", m.group(1))))
        elif m.group(2) is not None:
            out.append(("word", m.group(2)))
        elif m.group(3):
            out.append(("=", "="))
        else:
            out.append((";", ";"))
    return out


def parse_jaas(text: str) -> list[JaasEntry]:
    """The entries of a JAAS configuration; ValueError (without any value in it) if invalid."""
    tokens = _tokens(text)
    entries: list[JaasEntry] = []
    i = 0
    while i < len(tokens):
        if i + 1 >= len(tokens) or tokens[i][0] != "word" or tokens[i + 1][1] not in _FLAGS:
            raise ValueError("a JAAS entry is '<LoginModule class> required key=\"value\" ...;'")
        module, flag = tokens[i][1], tokens[i + 1][1]
        i += 2
        options: dict[str, str] = {}
        while i < len(tokens) and tokens[i][0] != ";":
            if (
                i + 2 >= len(tokens)
                or tokens[i][0] != "word"
                or tokens[i + 1][0] != "="
                or tokens[i + 2][0] not in ("word", "str")
            ):
                raise ValueError(f"JAAS option of {module} is not key=value")
            options[tokens[i][1]] = tokens[i + 2][1]
            i += 3
        if i >= len(tokens):
            raise ValueError(f"the JAAS entry of {module} must end with ';'")
        i += 1
        entries.append(JaasEntry(module, flag, options))
    if not entries:
        raise ValueError("the JAAS configuration is empty")
    return entries
