"""What the lean one-pass request parsers (``fast.produce``, ``fast.fetch``) and answer
writers (``fast.answers``, ``fast.metadata``) share.

Reading: the request header (v1, and v2 with its tagged-field section for flexible
versions), unsigned varints, UTF-8 text and the truncation error, each checked against the
bytes that remain before anything is sliced. Errors are ``FrameDecodeError`` naming the API
(``api``), as the generic path's are. Writing: unsigned varints, array lengths and
(nullable) strings, in the classic (int16/int32 lengths) or flexible (compact: length + 1 as
a varint) form. No I/O.
"""

from __future__ import annotations

import struct
from datetime import timedelta

from tidelog.protocol.errors import FrameDecodeError

__all__ = (
    "RequestHeader",
    "array_count",
    "array_len",
    "cached_timedelta",
    "check_fits",
    "compact_length",
    "encode_uvarint",
    "nullable_string",
    "read_header",
    "read_nullable_string",
    "read_string",
    "string",
    "text",
    "truncated",
    "uvarint",
)

_HEADER = struct.Struct(">hhih")  # api key, api version, correlation id, client id length
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

#: ``(buffer, end, version, correlation id, client id, position of the body)``
RequestHeader = tuple[memoryview, int, int, int, str | None, int]


def truncated(api: str, pos: int, end: int) -> FrameDecodeError:
    return FrameDecodeError(f"{api} request truncated at {pos} of {end} bytes")


def uvarint(api: str, buf: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes: ``(value, position after it)``."""
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise truncated(api, pos, end)
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise FrameDecodeError(f"varint longer than 5 bytes in a {api} request")


def compact_length(api: str, buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    """A compact length or count (uvarint n + 1): ``(n, position after it)``; n is -1 for
    null."""
    if pos < end and buf[pos] < 0x80:  # one byte: the common case
        return buf[pos] - 1, pos + 1
    n, pos = uvarint(api, buf, pos, end)
    return n - 1, pos


def array_count(api: str, buf: memoryview, pos: int, end: int, flexible: bool) -> tuple[int, int]:
    """An array count (compact when flexible, else int32): ``(count, position after it)``;
    -1 for null."""
    if flexible:
        return compact_length(api, buf, pos, end)
    if pos + 4 > end:
        raise truncated(api, pos, end)
    (n,) = _I32.unpack_from(buf, pos)
    return n, pos + 4


def check_fits(api: str, count: int, least: int, pos: int, end: int, what: str) -> None:
    """Refuse a null array, or one whose ``count`` elements of at least ``least`` bytes
    cannot fit in what remains of the frame (before anything is allocated for them)."""
    if count < 0:
        raise FrameDecodeError(f"null or negative {what} array in a {api} request")
    if count * least > end - pos:
        raise FrameDecodeError(f"{count} {what} cannot fit in {end - pos} bytes")


def read_nullable_string(
    api: str, buf: memoryview, pos: int, end: int, flexible: bool
) -> tuple[str | None, int]:
    """A nullable string (compact when flexible, else int16 length, -1 for null): ``(text or
    None, position after it)``."""
    if flexible:
        n, pos = compact_length(api, buf, pos, end)
    else:
        if pos + 2 > end:
            raise truncated(api, pos, end)
        (n,) = _I16.unpack_from(buf, pos)
        pos += 2
        if n < -1:
            raise FrameDecodeError(f"negative string length {n} in a {api} request")
    if n < 0:
        return None, pos
    if pos + n > end:
        raise truncated(api, pos, end)
    return text(api, buf, pos, n), pos + n


def read_string(
    api: str, buf: memoryview, pos: int, end: int, flexible: bool, what: str
) -> tuple[str, int]:
    """A non-nullable string: ``(text, position after it)``; null is refused, naming ``what``."""
    value, pos = read_nullable_string(api, buf, pos, end, flexible)
    if value is None:
        raise FrameDecodeError(f"null {what} in a {api} request")
    return value, pos


def text(api: str, buf: memoryview, pos: int, n: int) -> str:
    """``n`` bytes at ``pos`` as UTF-8 (the caller checked they are there)."""
    try:
        return str(buf[pos : pos + n], "utf-8")
    except UnicodeDecodeError as exc:
        raise FrameDecodeError(f"{api} request string is not UTF-8: {exc}") from exc


def cached_timedelta(cache: dict[int, timedelta], ms: int) -> timedelta:
    """``timedelta(milliseconds=ms)``, kept in ``cache`` (clients send a few distinct values;
    at most 256 are kept)."""
    value = cache.get(ms)
    if value is None:
        value = timedelta(milliseconds=ms)
        if len(cache) < 256:
            cache[ms] = value
    return value


def read_header(
    frame: bytes | memoryview, api_key: int, low: int, high: int, flexible_from: int, api: str
) -> RequestHeader | None:
    """The request header of an ``api_key`` frame of versions ``low..high``; None when the
    frame is another API or version, or carries header tagged fields (the generic path).

    The client id is a (non-compact) nullable string in header v1 and v2 alike; v2 (versions
    from ``flexible_from``) adds a tagged-field section, which must be empty here.
    """
    buf = frame if isinstance(frame, memoryview) else memoryview(frame)
    end = len(buf)
    if end < 10:
        raise truncated(api, end, end)
    key, version, correlation_id, n = _HEADER.unpack_from(buf, 0)
    if key != api_key or not low <= version <= high:
        return None
    pos = 10
    client_id: str | None
    if n < 0:
        if n != -1:
            raise FrameDecodeError(f"negative client id length {n}")
        client_id = None
    else:
        if pos + n > end:
            raise truncated(api, pos, end)
        client_id = text(api, buf, pos, n)
        pos += n
    if version >= flexible_from:
        if pos >= end:
            raise truncated(api, pos, end)
        if buf[pos] != 0:
            return None  # header tagged fields
        pos += 1
    return buf, end, version, correlation_id, client_id, pos


def encode_uvarint(value: int) -> bytes:
    """``value`` (>= 0) as an unsigned varint."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def array_len(n: int, flexible: bool) -> bytes:
    """The length of an array of ``n`` items: compact (``n + 1``) when flexible, else int32."""
    return encode_uvarint(n + 1) if flexible else _I32.pack(n)


def string(value: str, flexible: bool) -> bytes:
    data = value.encode()
    if flexible:
        return encode_uvarint(len(data) + 1) + data
    return _I16.pack(len(data)) + data


def nullable_string(value: str | None, flexible: bool) -> bytes:
    if value is None:
        return b"\x00" if flexible else b"\xff\xff"
    return string(value, flexible)
