"""SASL/OAUTHBEARER on the broker (RFC 7628; Kafka's KIP-255 and KIP-768).

The client's first message is the GS2 header and key/value pairs separated by ``\\x01``::

    n,[a=<authzid>],\\x01auth=Bearer <token>\\x01[<extension>=<value>\\x01...]\\x01

The token goes to the listener's validator: ``UnsecuredValidator`` (unsigned JWS tokens, Kafka's
``OAuthBearerUnsecuredValidatorCallbackHandler``, for development) or
``broker.security.jwt_validator.JwtValidator`` (signed JWTs checked against a JWKS, Kafka's
``OAuthBearerValidatorCallbackHandler``). A valid token completes the exchange with an empty
answer; the principal is ``User:<subject>`` and the session ends at the token's expiry
(``exp``). An invalid token is answered, as RFC 7628 asks, with an error JSON
(``{"status":"invalid_token"}``) and a SASL success code; the client acknowledges it with a single
``\\x01``, which fails the exchange with SASL_AUTHENTICATION_FAILED and that JSON as its message.
Why the token was refused is logged by the broker only (rate-limited, without the token).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from typing import Any, Protocol

from tidelog.broker.security.scram import ScramError

__all__ = (
    "InvalidClientFirst",
    "OAuthBearerRefused",
    "OAuthBearerServer",
    "TokenError",
    "TokenRefused",
    "TokenValidator",
    "UnsecuredValidator",
    "ValidatedToken",
    "parse_client_first",
    "scopes_of",
)

LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
SEPARATOR = "\x01"

_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7e \t\r\n]+"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+))?,\x01"
    rf"(?P<pairs>(?:{_KEY}={_VALUE}\x01)*)\x01"
)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")
_EXTENSION_KEY = re.compile(_KEY)
_EXTENSION_VALUE = re.compile(_VALUE)


class InvalidClientFirst(ScramError):
    """A malformed client first message. Kafka answers its generic "invalid credentials"
    message (``client_message``); the reason goes to the broker log only."""

    client_message = (
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism OAUTHBEARER"
    )


class TokenRefused(ScramError):
    """The client acknowledged our error JSON: the exchange fails with it (already logged
    when the token was refused)."""


class TokenError(Exception):
    """A token the validator refuses; ``str()`` says why (for the broker log, never the token).

    ``scope`` is set when the token lacks a required scope (RFC 6750 ``insufficient_scope``)."""

    def __init__(self, reason: str, scope: str | None = None) -> None:
        super().__init__(reason)
        self.scope = scope

    def error_json(self) -> str:
        """The RFC 7628 error the client gets (Kafka's format: no space after the first ':')."""
        if self.scope is None:
            return '{"status":"invalid_token"}'
        return '{"status":"insufficient_scope", "scope":' + json.dumps(self.scope) + "}"


@dataclass(frozen=True, slots=True)
class ValidatedToken:
    principal_name: str
    #: The token's expiry (ms since the epoch): the session ends then.
    lifetime_ms: int
    scopes: frozenset[str]


class TokenValidator(Protocol):
    def validate(self, token: str, now_ms: int) -> ValidatedToken: ...


@dataclass(frozen=True, slots=True)
class ClientFirst:
    token: str
    authzid: str
    extensions: dict[str, str]


def parse_client_first(message: bytes) -> ClientFirst:
    """The client's first message; InvalidClientFirst with Kafka's reason when malformed."""
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidClientFirst("Invalid OAUTHBEARER client first message") from None
    m = _CLIENT_FIRST.fullmatch(text)
    if m is None:
        raise InvalidClientFirst("Invalid OAUTHBEARER client first message")
    pairs: dict[str, str] = {}
    for pair in m.group("pairs").split(SEPARATOR):
        if pair:
            key, _, value = pair.partition("=")
            pairs[key] = value
    auth = pairs.pop("auth", None)
    if auth is None:
        raise InvalidClientFirst("Invalid OAUTHBEARER client first message: 'auth' not specified")
    for key, value in pairs.items():
        if not _EXTENSION_KEY.fullmatch(key) or not _EXTENSION_VALUE.fullmatch(value):
            raise InvalidClientFirst(f"Invalid OAUTHBEARER client first message: extension {key!r}")
    am = _AUTH.fullmatch(auth)
    if am is None:
        raise InvalidClientFirst("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if am.group("scheme").lower() != "bearer":
        raise InvalidClientFirst(
            f"Invalid scheme in OAUTHBEARER client first message: {am.group('scheme')}"
        )
    authzid = (m.group("authzid") or "").replace("=2C", ",").replace("=3D", "=")
    return ClientFirst(am.group("token"), authzid, pairs)


class OAuthBearerServer:
    """One OAUTHBEARER exchange (``step`` per SaslAuthenticate token)."""

    __slots__ = ("_error", "_now_ms", "_validator", "complete", "token", "user")

    def __init__(self, validator: TokenValidator, now_ms: Any) -> None:
        self._validator = validator
        self._now_ms = now_ms
        self._error: TokenError | None = None
        self.user: str | None = None
        self.complete = False
        self.token: ValidatedToken | None = None

    @property
    def lifetime_ms(self) -> int | None:
        """When the credential expires (ms since the epoch), once complete."""
        return None if self.token is None else self.token.lifetime_ms

    def step(self, message: bytes) -> bytes:
        if message == SEPARATOR.encode() and self._error is not None:
            # The client acknowledged our error: the exchange fails with it.
            raise TokenRefused(self._error.error_json())
        self._error = None
        first = parse_client_first(message)
        try:
            token = self._validator.validate(first.token, self._now_ms())
        except TokenError as exc:
            self._error = exc
            raise OAuthBearerRefused(exc) from None
        self.user = token.principal_name
        if first.authzid and first.authzid != token.principal_name:
            raise ScramError(
                f"Authentication failed: Client requested an authorization id "
                f"({first.authzid}) that is different from the token's principal name "
                f"({token.principal_name})"
            )
        self.token = token
        self.complete = True
        return b""


class OAuthBearerRefused(Exception):
    """The token was refused: answer the error JSON (a challenge), not a failure, yet."""

    def __init__(self, error: TokenError) -> None:
        super().__init__(str(error))
        self.error = error


# ---------------------------------------------------------------------- unsecured tokens


def _b64url_json(part: str, what: str) -> dict[str, Any]:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        value = json.loads(raw)
    except (binascii.Error, ValueError):
        raise TokenError(f"the {what} of the token is not base64url-encoded JSON") from None
    if not isinstance(value, dict):
        raise TokenError(f"the {what} of the token is not a JSON object")
    return value


def scopes_of(value: Any, claim: str) -> frozenset[str]:
    """A scope claim: a space-separated string or a list of strings."""
    if value is None:
        return frozenset()
    items = value.split(" ") if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(s, str) for s in items):
        raise TokenError(f"the '{claim}' claim is neither a string nor a list of strings")
    return frozenset(s for s in items if s)


def _number(claims: dict[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TokenError(f"the '{name}' claim is not a number")
    return float(value)


class UnsecuredValidator:
    """Unsigned JWS tokens (``alg`` none, empty signature), checked as Kafka's unsecured
    validator does. JAAS options (of the broker's OAuthBearerLoginModule entry):
    ``unsecuredValidatorPrincipalClaimName`` (sub), ``unsecuredValidatorScopeClaimName``
    (scope), ``unsecuredValidatorRequiredScope`` (space-separated),
    ``unsecuredValidatorAllowableClockSkewMs`` (0)."""

    def __init__(self, options: dict[str, str]) -> None:
        self.principal_claim = (options.get("unsecuredValidatorPrincipalClaimName") or "").strip()
        self.principal_claim = self.principal_claim or "sub"
        self.scope_claim = (options.get("unsecuredValidatorScopeClaimName") or "").strip()
        self.scope_claim = self.scope_claim or "scope"
        required = (options.get("unsecuredValidatorRequiredScope") or "").strip()
        self.required_scope = tuple(s for s in required.split(" ") if s)
        raw_skew = (options.get("unsecuredValidatorAllowableClockSkewMs") or "").strip()
        try:
            self.clock_skew_ms = int(raw_skew) if raw_skew else 0
        except ValueError:
            raise ValueError(
                f"unsecuredValidatorAllowableClockSkewMs must be a whole number, not {raw_skew!r}"
            ) from None
        if self.clock_skew_ms < 0:
            raise ValueError("unsecuredValidatorAllowableClockSkewMs must not be negative")

    def validate(self, token: str, now_ms: int) -> ValidatedToken:
        parts = token.split(".")
        if len(parts) != 3 or parts[2]:
            raise TokenError("an unsecured JWS has three parts and an empty signature")
        header = _b64url_json(parts[0], "header")
        claims = _b64url_json(parts[1], "payload")
        if header.get("alg") != "none":
            raise TokenError("an unsecured JWS must have 'none' as its algorithm")
        subject = claims.get(self.principal_claim)
        if not isinstance(subject, str) or not subject.strip():
            raise TokenError(f"the '{self.principal_claim}' claim is missing or not a string")
        skew = self.clock_skew_ms
        issued_at = _number(claims, "iat")
        if issued_at is not None and issued_at * 1000 > now_ms + skew:
            raise TokenError(
                f"the token was issued at {issued_at:.3f} s, after now ({now_ms} ms) plus the "
                f"allowed clock skew ({skew} ms)"
            )
        expires = _number(claims, "exp")
        if expires is None:
            raise TokenError("the token has no 'exp' (expiration time) claim")
        if now_ms >= expires * 1000 + skew:
            raise TokenError(
                f"the token expired at {expires:.0f} s, before now ({now_ms} ms) less the "
                f"allowed clock skew ({skew} ms)"
            )
        if issued_at is not None and expires <= issued_at:
            raise TokenError("the token's 'exp' is not after its 'iat'")
        scopes = scopes_of(claims.get(self.scope_claim), self.scope_claim)
        missing = [s for s in self.required_scope if s not in scopes]
        if missing:
            raise TokenError(
                f"the token lacks the required scope {' '.join(missing)}",
                scope=" ".join(self.required_scope),
            )
        return ValidatedToken(
            principal_name=subject,
            lifetime_ms=int(expires * 1000),
            scopes=scopes,
        )
