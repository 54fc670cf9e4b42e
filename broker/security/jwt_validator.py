"""Signed OAUTHBEARER tokens: JWTs checked against the keys of a JWKS, as Kafka's
``OAuthBearerValidatorCallbackHandler`` (``BrokerJwtValidator``, jose4j) checks them.

A token is accepted when (the settings are ``sasl.oauthbearer.*``, per listener as Kafka reads
them):

- its header names a signing algorithm other than ``none``, and one key of the JWKS
  (``jwks.endpoint.url``) whose id is the header's ``kid`` (any key of the set when the header
  has none) verifies its signature (PyJWT does the cryptography);
- it has ``exp`` and ``iat``; ``exp`` (and ``nbf`` when present) hold at the broker's clock,
  give or take ``clock.skew.seconds``;
- its ``aud`` holds one of ``expected.audience`` (when that is empty, a token with an ``aud``
  is refused, as jose4j does), its ``iss`` is ``expected.issuer`` (when set);
- ``sub.claim.name`` holds a non-empty string: the principal is ``User:<that>``;
  ``scope.claim.name`` holds a string or a list of strings.

Keys: a ``file:`` URL is read once at start-up. An ``https:`` (or ``http:``) URL is fetched at
start-up (the broker waits up to ``jwks.endpoint.retry.backoff.max.ms`` for the first answer),
then by a background thread every ``jwks.endpoint.refresh.ms``, and soon after a token names a
key id the set does not have (once a minute per id); failed fetches are retried after
``jwks.endpoint.retry.backoff.ms``, doubled up to ``jwks.endpoint.retry.backoff.max.ms``. The
last good set stays in use meanwhile. Nothing here runs on the event loop but ``validate``,
which only reads the current set.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt

from tidelog.broker.security.oauthbearer import TokenError, ValidatedToken, scopes_of

log = logging.getLogger("tidelog.security")

__all__ = ("JwksKey", "JwksSource", "JwtSettings", "JwtValidator", "check_claims", "load_jwks")

#: A JWKS answer larger than this is refused (read before parsing).
MAX_JWKS_BYTES = 1 << 20
#: How long a key id the set lacked is remembered (no second early refresh for it meanwhile).
MISSING_KEY_ID_MS = 60_000
_MAX_MISSING_IDS = 16
_FETCH_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class JwtSettings:
    jwks_url: str
    refresh_ms: int = 3_600_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 10_000
    expected_audience: tuple[str, ...] = ()
    expected_issuer: str | None = None
    clock_skew_s: int = 30
    scope_claim: str = "scope"
    sub_claim: str = "sub"


@dataclass(frozen=True, slots=True)
class JwksKey:
    jwk: jwt.PyJWK
    #: The JWK's own "alg", when it names one: only tokens signed with it are checked.
    algorithm: str | None


def load_jwks(raw: bytes, where: str) -> dict[str, JwksKey]:
    """The usable keys of a JWKS document by key id ("" for keys without one); ValueError."""
    try:
        document = json.loads(raw)
    except ValueError:
        raise ValueError(f"the JWKS at {where} is not JSON") from None
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise ValueError(f"the JWKS at {where} has no 'keys' list")
    keys: dict[str, JwksKey] = {}
    for item in document["keys"]:
        if not isinstance(item, dict) or item.get("use", "sig") != "sig":
            continue
        try:
            key = jwt.PyJWK(item)
        except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError):
            continue  # a key type or algorithm we cannot use (jose4j skips these too)
        alg = item.get("alg")
        keys[str(key.key_id or "")] = JwksKey(key, alg if isinstance(alg, str) else None)
    if not keys:
        raise ValueError(f"the JWKS at {where} has no usable signing key")
    return keys


class JwksSource:
    """The current keys of a JWKS URL (see the module's docstring)."""

    def __init__(
        self,
        settings: JwtSettings,
        *,
        ssl_context: ssl.SSLContext | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.url = settings.jwks_url
        self._ssl_context = ssl_context
        self._monotonic = monotonic
        self.keys: dict[str, JwksKey] = {}
        self._missing: dict[str, float] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        scheme = urllib.parse.urlsplit(self.url).scheme.lower()
        if scheme == "file":
            path = Path(urllib.parse.unquote(urllib.parse.urlsplit(self.url).path))
            try:
                raw = path.read_bytes()[: MAX_JWKS_BYTES + 1]
            except OSError as exc:
                raise ValueError(f"cannot read the JWKS file {path}: {exc.strerror}") from None
            if len(raw) > MAX_JWKS_BYTES:
                raise ValueError(f"the JWKS file {path} is larger than {MAX_JWKS_BYTES} bytes")
            self.keys = load_jwks(raw, str(path))
        elif scheme in ("https", "http"):
            self._thread = threading.Thread(
                target=self._run, name="tidelog-jwks-refresh", daemon=True
            )
            self._first = threading.Event()
            self._thread.start()
            # Kafka fetches the set while it configures the listener: wait for the first one.
            # Kafka divergence: Kafka's listener fails when that fetch fails; we start and
            # refuse OAUTHBEARER tokens until the keys arrive (docs/kafka-differences.md).
            self._first.wait(max(settings.retry_backoff_max_ms, 1000) / 1000)
            if not self.keys:
                log.warning(
                    "no JWKS from %s yet: OAUTHBEARER tokens are refused until it answers",
                    self.url,
                )
        else:
            raise ValueError(
                f"sasl.oauthbearer.jwks.endpoint.url must be an https://, http:// or file:// "
                f"URL, not {self.url!r}"
            )

    def key_for(self, kid: str | None) -> list[JwksKey]:
        """The keys that may have signed a token with this ``kid``; an unknown id asks for an
        early refresh (at most once a minute per id)."""
        keys = self.keys
        if kid is None:
            return list(keys.values())
        key = keys.get(kid)
        if key is not None:
            return [key]
        if self._thread is not None:
            now = self._monotonic()
            seen = self._missing.get(kid)
            if seen is None or (now - seen) * 1000 >= MISSING_KEY_ID_MS:
                if len(self._missing) >= _MAX_MISSING_IDS:
                    self._missing.clear()
                self._missing[kid] = now
                self._wake.set()
        return []

    def close(self) -> None:
        self._stop.set()
        self._wake.set()

    # ------------------------------------------------------------------ the refresh thread

    def _fetch(self) -> dict[str, JwksKey]:
        request = urllib.request.Request(self.url, headers={"Accept": "application/json"})
        with urllib.request.urlopen(
            request, timeout=_FETCH_TIMEOUT_S, context=self._ssl_context
        ) as answer:
            raw = answer.read(MAX_JWKS_BYTES + 1)
        if len(raw) > MAX_JWKS_BYTES:
            raise ValueError(f"the JWKS at {self.url} is larger than {MAX_JWKS_BYTES} bytes")
        return load_jwks(raw, self.url)

    def _refresh(self) -> None:
        """One refresh with retries (backoff doubling up to the maximum, Kafka's Retry)."""
        settings = self.settings
        backoff_ms = max(settings.retry_backoff_ms, 1)
        waited_ms = 0
        while not self._stop.is_set():
            try:
                keys = self._fetch()
            except Exception as exc:  # any failure: keep the last good set, retry
                if waited_ms >= settings.retry_backoff_max_ms:
                    log.warning("fetching the JWKS from %s failed: %s", self.url, exc)
                    return
                wait_ms = min(backoff_ms, settings.retry_backoff_max_ms - waited_ms)
                log.debug("fetching the JWKS from %s failed (%s); retry in %d ms", self.url, exc,
                          wait_ms)  # fmt: skip
                if self._stop.wait(wait_ms / 1000):
                    return
                waited_ms += wait_ms
                backoff_ms *= 2
                continue
            if set(keys) != set(self.keys):
                log.info("JWKS from %s: key ids %s", self.url, sorted(keys))
            self.keys = keys
            return

    def _run(self) -> None:
        try:
            self._refresh()
        finally:
            self._first.set()
        interval_s = self.settings.refresh_ms / 1000 if self.settings.refresh_ms > 0 else None
        while not self._stop.is_set():
            self._wake.wait(interval_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            self._refresh()


_SKIP_TIME_CHECKS: jwt.types.Options = {
    "verify_exp": False,
    "verify_iat": False,
    "verify_nbf": False,
    "verify_aud": False,
    "verify_iss": False,
    "require": [],
}


class JwtValidator:
    """Kafka's broker-side JWT checks (module docstring) over a ``JwksSource``."""

    def __init__(self, settings: JwtSettings, source: JwksSource) -> None:
        self.settings = settings
        self.source = source

    def validate(self, token: str, now_ms: int) -> ValidatedToken:
        settings = self.settings
        try:
            header = jwt.get_unverified_header(token)
        except jwt.DecodeError as exc:
            raise TokenError(f"the token is not a JWS: {exc}") from None
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or algorithm.lower() == "none":
            raise TokenError("the token is not signed ('alg' none is refused)")
        kid = header.get("kid")
        keys = self.source.key_for(kid if isinstance(kid, str) else None)
        if not keys:
            raise TokenError(f"no key of the JWKS at {self.source.url} has the token's kid {kid!r}")
        claims: dict[str, Any] | None = None
        failure = "no key"
        for key in keys:
            if key.algorithm not in (algorithm, None):
                failure = f"the key is for {key.algorithm}, the token is signed with {algorithm}"
                continue
            try:
                claims = jwt.decode(
                    token, key.jwk.key, algorithms=[algorithm], options=_SKIP_TIME_CHECKS
                )
                break
            except jwt.InvalidTokenError as exc:
                failure = str(exc) or type(exc).__name__
        if claims is None:
            raise TokenError(f"the signature of the token does not verify: {failure}")
        return check_claims(claims, settings, now_ms, token)


def _numeric(claims: dict[str, Any], name: str, label: str) -> float:
    value = claims.get(name)
    if value is None:
        raise TokenError(f"the token has no {label} ({name}) claim")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TokenError(f"the {label} ({name}) claim is not a number")
    return float(value)


def check_claims(
    claims: dict[str, Any], settings: JwtSettings, now_ms: int, token: str
) -> ValidatedToken:
    """The claim checks of a JWT whose signature verified (module docstring)."""
    del token  # never kept nor logged
    now_s = now_ms / 1000
    skew = settings.clock_skew_s
    expires = _numeric(claims, "exp", "expiration time")
    _numeric(claims, "iat", "issued at")  # required: a token without a numeric iat is refused
    if now_s >= expires + skew:
        raise TokenError(
            f"the token expired at {expires:.0f} (now {now_s:.0f}, clock skew allowed {skew} s)"
        )
    if "nbf" in claims:
        not_before = _numeric(claims, "nbf", "not before")
        if now_s + skew < not_before:
            raise TokenError(f"the token is not valid before {not_before:.0f} (now {now_s:.0f})")
    audience = claims.get("aud")
    audiences = [audience] if isinstance(audience, str) else audience
    if audiences is not None and (
        not isinstance(audiences, list) or not all(isinstance(a, str) for a in audiences)
    ):
        raise TokenError("the audience (aud) claim is neither a string nor a list of strings")
    if settings.expected_audience:
        if not audiences:
            raise TokenError("the token has no audience (aud) claim")
        if not set(audiences) & set(settings.expected_audience):
            raise TokenError(
                f"the token's audience {audiences} has none of the expected "
                f"{list(settings.expected_audience)} (sasl.oauthbearer.expected.audience)"
            )
    elif audiences:
        raise TokenError(
            f"the token has an audience {audiences} but sasl.oauthbearer.expected.audience is "
            "not set"
        )
    if settings.expected_issuer is not None:
        issuer = claims.get("iss")
        if issuer is None:
            raise TokenError(
                f"the token has no issuer (iss) claim; expected {settings.expected_issuer!r}"
            )
        if issuer != settings.expected_issuer:
            raise TokenError(
                f"the token's issuer {issuer!r} is not the expected {settings.expected_issuer!r} "
                "(sasl.oauthbearer.expected.issuer)"
            )
    subject = claims.get(settings.sub_claim)
    if not isinstance(subject, str) or not subject.strip():
        raise TokenError(f"the '{settings.sub_claim}' claim is missing, empty or not a string")
    raw_scope = claims.get(settings.scope_claim)
    scopes = (
        frozenset([raw_scope])
        if isinstance(raw_scope, str)
        else scopes_of(raw_scope, settings.scope_claim)
    )
    if any(not s.strip() for s in scopes):
        raise TokenError(f"the '{settings.scope_claim}' claim holds an empty scope")
    return ValidatedToken(
        principal_name=subject.strip(),
        lifetime_ms=int(expires * 1000),
        scopes=scopes,
    )
