"""Kafka error codes by name, and the one exception the codec raises for bad input."""

from __future__ import annotations

import functools

from kio.schema.errors import ErrorCode

__all__ = ("ErrorCode", "FrameDecodeError", "error_code_for", "error_name")


class FrameDecodeError(Exception):
    """A request frame that cannot be decoded (truncated, garbage, unknown API or version).

    This is the only exception ``protocol.codec``'s decode functions raise for bad input: the
    caller closes the sender's connection and keeps serving everyone else.
    """


@functools.cache
def error_code_for(name: str) -> ErrorCode:
    """Map a Kafka error name ("CORRUPT_MESSAGE", "corrupt_message") to its ``ErrorCode``.

    Unknown names map to UNKNOWN_SERVER_ERROR (-1), as a Kafka broker answers for an exception
    it has no code for.
    """
    try:
        return ErrorCode[name.strip().lower()]
    except KeyError:
        return ErrorCode.unknown_server_error


def error_name(code: int) -> str:
    """The Kafka spelling of an error code ("UNKNOWN_TOPIC_OR_PARTITION"), for logs."""
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{code}"
