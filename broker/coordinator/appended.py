"""What a write to a coordinator's log gives back: ``Appended`` (the batch's first offset and an
awaitable resolved once the batch is durable) or ``CoordinatorLogError`` (the error a client is
told).

Apart from ``broker/coordinator/log.py`` (which re-exports both) so that the one
``PartitionWriter``, made before a broker's first answer, does not import the record codec: an
empty log dir needs it only with its first partition.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

__all__ = ("Appended", "CoordinatorLogError")


class CoordinatorLogError(Exception):
    """An append or read failed; ``error`` is what the client should be told."""

    def __init__(self, error: ErrorCode, message: str = "") -> None:
        super().__init__(message or error.name)
        self.error = error


@dataclass(frozen=True, slots=True)
class Appended:
    """A batch written: its first offset and an awaitable resolved once it is durable."""

    first_offset: int
    durable: Awaitable[None]
