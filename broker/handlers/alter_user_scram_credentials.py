"""AlterUserScramCredentials (key 51) v0: add, replace and delete SCRAM credentials.

The client sends the salted password (never the password); the broker keeps StoredKey and
ServerKey (``broker/security/scram.py``) and writes the store durably before answering.
Needs ALTER on the cluster. Kafka's checks: an empty user name, too few (< 4096) or too many
(> 16384) iterations -> UNACCEPTABLE_CREDENTIAL; an unknown mechanism ->
UNSUPPORTED_SASL_MECHANISM; a user named twice for one mechanism -> DUPLICATE_RESOURCE; deleting
a credential that does not exist -> RESOURCE_NOT_FOUND.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import CLUSTER, Operation, allowed
from tidelog.broker.security.scram import (
    MAX_ITERATIONS,
    MECHANISM_BY_TYPE,
    MIN_ITERATIONS,
    credential_from_salted_password,
)
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.alter_user_scram_credentials.v0.request import (
        AlterUserScramCredentialsRequest as Request,
    )
    from kio.schema.alter_user_scram_credentials.v0.response import (
        AlterUserScramCredentialsResponse as Response,
    )


API_KEY = 51


def _check(name: str, mechanism: int, iterations: int | None) -> tuple[ErrorCode, str | None]:
    if not name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if mechanism not in MECHANISM_BY_TYPE:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    if iterations is not None and iterations < MIN_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too few iterations"
    if iterations is not None and iterations > MAX_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too many iterations"
    return ErrorCode.none, None


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    store = ctx.broker.security.scram
    items: list[tuple[str, int, Any]] = [
        (d.name, int(d.mechanism), None) for d in request.deletions
    ]
    items += [(u.name, int(u.mechanism), u) for u in request.upsertions]
    results: dict[str, tuple[ErrorCode, str | None]] = {}
    if not allowed(ctx, Operation.ALTER, CLUSTER):
        for name, _, _ in items:
            results[name] = (ErrorCode.cluster_authorization_failed, None)
    else:
        seen: dict[tuple[str, int], int] = {}
        for name, mechanism, _ in items:
            seen[(name, mechanism)] = seen.get((name, mechanism), 0) + 1
        for name, mechanism, upsert in items:
            if name in results and results[name][0] != ErrorCode.none:
                continue
            if seen[(name, mechanism)] > 1:
                results[name] = (
                    ErrorCode.duplicate_resource,
                    "A user credential cannot be altered twice in the same request",
                )
                continue
            error, message = _check(
                name, mechanism, None if upsert is None else int(upsert.iterations)
            )
            if error == ErrorCode.none:
                mechanism_name = MECHANISM_BY_TYPE[mechanism]
                if upsert is None:
                    if store.get(name, mechanism_name) is None:
                        error, message = (
                            ErrorCode.resource_not_found,
                            "Attempt to delete a user credential that does not exist",
                        )
                    else:
                        store.delete(name, mechanism_name)
                else:
                    store.put(
                        name,
                        mechanism_name,
                        credential_from_salted_password(
                            mechanism_name,
                            bytes(upsert.salt),
                            bytes(upsert.salted_password),
                            int(upsert.iterations),
                        ),
                    )
            results.setdefault(name, (error, message))
            if error != ErrorCode.none:
                results[name] = (error, message)
        if any(e == ErrorCode.none for e, _ in results.values()):
            await ctx.broker.run_blocking(store.save, store.snapshot())
    return cast(
        "Response",
        build(
            types.AlterUserScramCredentialsResponse,
            throttle_time=timedelta(0),
            results=tuple(
                build(
                    types.AlterUserScramCredentialsResult,
                    user=name,
                    error_code=error,
                    error_message=message,
                )
                for name, (error, message) in results.items()
            ),
        ),
    )


SPEC = HandlerSpec(API_KEY, "AlterUserScramCredentials", 0, 0, handle)
