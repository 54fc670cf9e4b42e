"""Principals (``User:alice``) and ``ssl.principal.mapping.rules``.

A client certificate's subject becomes a distinguished name written as Java's
``X500Principal.getName()`` writes it (RFC 2253: most specific RDN first, ``CN=alice,O=Acme,C=US``),
then the mapping rules turn it into the principal name, as Kafka's ``SslPrincipalMapper``:

- ``DEFAULT``: the DN unchanged;
- ``RULE:pattern/replacement/[LU]``: when ``pattern`` (a regular expression) matches the whole
  DN, the name is ``replacement`` with ``$1``.. filled from its groups, then lower-cased (``L``)
  or upper-cased (``U``).

Rules are tried in order, separated by commas or new lines; a DN no rule matches fails the
authentication, as in Kafka.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ("ANONYMOUS", "SslPrincipalMapper", "dn_of_peercert", "user")

ANONYMOUS = "User:ANONYMOUS"

#: Short names Java's RFC 2253 writer uses; other attributes are written by OID.
_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
_OIDS = {
    "emailAddress": "1.2.840.113549.1.9.1",
    "serialNumber": "2.5.4.5",
    "title": "2.5.4.12",
    "surname": "2.5.4.4",
    "givenName": "2.5.4.42",
}


def user(name: str) -> str:
    return f"User:{name}"


def _escape(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (i == 0 and ch in "# ") or (i == len(value) - 1 and ch == " "):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _hex_ia5(value: str) -> str:
    raw = value.encode("ascii", "replace")
    return "#16" + f"{len(raw):02x}" + raw.hex()


def dn_of_peercert(peercert: dict[str, Any]) -> str:
    """The subject DN of ``SSLSocket.getpeercert()`` as Java's RFC 2253 ``getName()``."""
    rdns = []
    for rdn in reversed(peercert.get("subject", ())):
        parts = []
        for key, value in rdn:
            if key in _KEYWORDS:
                parts.append(f"{_KEYWORDS[key]}={_escape(str(value))}")
            elif key in _OIDS:
                parts.append(f"{_OIDS[key]}={_hex_ia5(str(value))}")
            else:
                parts.append(f"{key}={_escape(str(value))}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str
    case: str  # "", "L" or "U"

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        m = self.pattern.fullmatch(dn)
        if m is None:
            return None
        name = m.expand(self.replacement)
        if self.case == "L":
            name = name.lower()
        elif self.case == "U":
            name = name.upper()
        return name


_RULE = re.compile(
    r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))\s*(?:[,\n]\s*|$)"
)


class SslPrincipalMapper:
    """``ssl.principal.mapping.rules`` parsed once; ``name(dn)`` maps one DN."""

    def __init__(self, rules: str | None) -> None:
        text = (rules or "DEFAULT").strip()
        self.rules: list[_Rule] = []
        pos = 0
        while pos < len(text):
            m = _RULE.match(text, pos)
            if m is None or m.end() == pos:
                raise ValueError(
                    f"Invalid rule in ssl.principal.mapping.rules at {text[pos:]!r}: write "
                    "RULE:pattern/replacement/[LU] or DEFAULT, separated by commas."
                )
            pos = m.end()
            if m.group(1):
                self.rules.append(_Rule(None, "", ""))
                continue
            # Java's replacement syntax ($1) -> Python's (\g<1>); slashes were escaped.
            pattern = m.group(2).replace("\\/", "/")
            replacement = re.sub(r"\$(\d+)", r"\\g<\1>", m.group(3).replace("\\/", "/"))
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                raise ValueError(
                    f"Invalid pattern {pattern!r} in ssl.principal.mapping.rules: {exc}"
                ) from None
            self.rules.append(_Rule(compiled, replacement, m.group(4)))

    def name(self, dn: str) -> str:
        for rule in self.rules:
            mapped = rule.apply(dn)
            if mapped is not None:
                return mapped
        raise LookupError(f"no rule of ssl.principal.mapping.rules matches {dn!r}")
