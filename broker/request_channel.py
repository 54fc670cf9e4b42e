"""What a request turns into: the answer kinds the router, the connection, security and the
handlers share (Kafka's ``RequestChannel`` holds its ``Response`` kinds the same way).

A leaf: it imports no other broker module but ``broker/sendfile.py`` (``FileAnswer``, record
data sent from the segment files), so the connection (``broker/kafka_channel.py``), SASL
(``broker/security/sasl.py``) and the handlers (``broker/handlers/base.py``) name these kinds
without importing each other.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from tidelog.broker.sendfile import FileAnswer

__all__ = ("Answer", "Close", "Outcome", "RawBody", "Throttled")


@dataclass(frozen=True, slots=True)
class Close:
    """Close the connection after the answers before this one are written.

    ``linger_s`` > 0: the close comes that long after those answers, unless the peer closes
    (or sends another frame) first, so that a client reading the last answer together with
    the end of the stream does not lose the answer.
    """

    reason: str
    linger_s: float = 0.0


@dataclass(frozen=True, slots=True)
class RawBody:
    """A response body encoded by the handler itself (lean encoders for hot APIs).

    ``chunks`` are written after the response header in order; record data may be a
    memoryview of file bytes, so nothing is copied to build the answer.
    """

    chunks: tuple[bytes | memoryview, ...]


@dataclass(frozen=True, slots=True)
class Throttled:
    """An answer (or none, ``answer`` None) after which the connection is muted, not read, for
    ``throttle_ms`` (a client over its quota: KIP-219, the answer goes out at once and carries
    the throttle time)."""

    answer: bytes | list[bytes | memoryview] | FileAnswer | None
    throttle_ms: int


#: What a request turns into: a framed answer, several chunks of one, no answer, or a close.
#: ``FileAnswer``: record data the connection sends from the segment files (broker.sendfile).
Answer = bytes | list[bytes | memoryview] | FileAnswer | Close | Throttled | None
#: What the router's dispatch returns: the answer now, or a coroutine/future of it.
Outcome = Answer | Coroutine[Any, Any, Answer] | asyncio.Future[Answer]
