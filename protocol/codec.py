"""Kafka wire codec on top of kio: request headers and bodies in, framed responses out.

No I/O here. Every schema look-up, reader and writer is cached per (api_key, version): kio's
``load_request_schema`` is not cached and costs ~5x a native parse when called per request.

Framing: a request or response on the wire is ``int32 size`` followed by ``size`` bytes. The
functions here take a *frame* (the bytes after the size prefix) and return framed responses
(size prefix included), ready for ``transport.write``.

Header versions follow the API's flexible versions: request header v2 (with tagged fields) for
flexible request versions, else v1; response header v1 for flexible response versions, else v0.
ApiVersions always answers with response header v0 (kio's schemas already say so), so that a
client that does not know our flexible versions can still read the error code.
"""

from __future__ import annotations

import functools
import io
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader, entity_writer
from kio.serial.readers import Reader
from kio.static.constants import EntityType
from kio.static.protocol import RequestPayload, ResponsePayload

from tidelog.protocol.errors import ErrorCode, FrameDecodeError
from tidelog.protocol.guard import check_request_body

__all__ = (
    "API_VERSIONS_KEY",
    "FrameDecodeError",
    "RequestHeader",
    "decode_request",
    "decode_request_header",
    "encode_api_versions_fallback",
    "encode_response",
    "encode_response_header",
    "frame",
    "frame_size",
    "is_known",
    "peek_request_header",
    "request_header_version",
    "request_schema",
    "response_header_version",
    "response_schema",
)

API_VERSIONS_KEY: Final = 18

_PEEK = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")
_INT16 = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """The decoded request header (any version)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


# --------------------------------------------------------------------------- schema look-ups


@functools.cache
def is_known(api_key: int, api_version: int) -> bool:
    """Whether kio has a request schema for this API version (index look-up, no import)."""
    name = api_key_map.get(api_key)
    if name is None:
        return False
    return EntityType.request in schema_name_map.get(name, {}).get(api_version, {})


@functools.cache
def request_schema(api_key: int, api_version: int) -> type[RequestPayload]:
    """The kio request class (raises kio's UnknownAPIKey / UnknownEntity when unknown)."""
    return load_request_schema(api_key, api_version)


@functools.cache
def response_schema(api_key: int, api_version: int) -> type[ResponsePayload]:
    """The kio response class (raises kio's UnknownAPIKey / UnknownEntity when unknown)."""
    return load_response_schema(api_key, api_version)


@functools.cache
def request_header_version(api_key: int, api_version: int) -> int:
    """1 or 2 (2 for flexible request versions)."""
    return int(request_schema(api_key, api_version).__header_schema__.__version__)


@functools.cache
def response_header_version(api_key: int, api_version: int) -> int:
    """0 or 1 (1 for flexible response versions, except ApiVersions which is always 0)."""
    return int(response_schema(api_key, api_version).__header_schema__.__version__)


@functools.cache
def _request_header_reader(header_version: int) -> Reader[Any]:
    if header_version == 2:
        from kio.schema.request_header.v2.header import RequestHeader as Header2

        return entity_reader(Header2)
    from kio.schema.request_header.v1.header import RequestHeader as Header1

    return entity_reader(Header1)


@functools.cache
def _request_reader(api_key: int, api_version: int) -> Reader[Any]:
    return entity_reader(request_schema(api_key, api_version))


@functools.cache
def _response_writer(api_key: int, api_version: int) -> Callable[[Any, Any], None]:
    writer: Callable[[Any, Any], None] = entity_writer(response_schema(api_key, api_version))
    return writer


# --------------------------------------------------------------------------- requests


def peek_request_header(frame: bytes | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) from the fixed start of any request header."""
    if len(frame) < _PEEK.size:
        raise FrameDecodeError(f"request frame of {len(frame)} bytes is shorter than a header")
    api_key, api_version, correlation_id = _PEEK.unpack_from(frame, 0)
    return api_key, api_version, correlation_id


def decode_request_header(frame: bytes | memoryview) -> tuple[RequestHeader, int]:
    """Decode the header of a known API version; returns it and the offset of the body.

    Raises FrameDecodeError for anything else (unknown API key or version included).
    """
    api_key, api_version, _ = peek_request_header(frame)
    if not is_known(api_key, api_version):
        raise FrameDecodeError(f"unknown API key {api_key} version {api_version}")
    reader = _request_header_reader(request_header_version(api_key, api_version))
    try:
        header, offset = reader(frame, 0)
    except Exception as exc:
        raise FrameDecodeError(f"bad request header: {exc!r}") from exc
    return (
        RequestHeader(
            api_key=api_key,
            api_version=api_version,
            correlation_id=int(header.correlation_id),
            client_id=header.client_id,
        ),
        offset,
    )


def decode_request(frame: bytes | memoryview, api_key: int, api_version: int, offset: int) -> Any:
    """Decode a request body that starts at ``offset`` in ``frame``.

    ``frame`` must be ``bytes`` or a read-only memoryview (kio rejects writable buffers).
    Raises FrameDecodeError for any malformed input; trailing bytes are ignored, as Kafka does.
    """
    if not is_known(api_key, api_version):
        raise FrameDecodeError(f"unknown API key {api_key} version {api_version}")
    # kio's native reader trusts array lengths (a huge one aborts the process): walk first.
    check_request_body(request_schema(api_key, api_version), frame, offset)
    try:
        request, _ = _request_reader(api_key, api_version)(frame, offset)
    except Exception as exc:
        raise FrameDecodeError(
            f"bad request body for API key {api_key} v{api_version}: {exc!r}"
        ) from exc
    return request


# --------------------------------------------------------------------------- responses


def frame(header_and_body: bytes) -> bytes:
    """Prefix with the int32 size."""
    return _SIZE.pack(len(header_and_body)) + header_and_body


def frame_size(size: int) -> bytes:
    """The int32 size prefix alone."""
    return _SIZE.pack(size)


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    """Response header v0 (correlation id) or v1 (plus an empty tagged-field section)."""
    if header_version == 0:
        return _SIZE.pack(correlation_id)
    return _SIZE.pack(correlation_id) + b"\x00"


def encode_response(api_key: int, api_version: int, correlation_id: int, response: Any) -> bytes:
    """Encode a kio response body with its header, size-prefixed, ready for the socket."""
    buffer = io.BytesIO()
    buffer.write(b"\x00\x00\x00\x00")
    buffer.write(
        encode_response_header(correlation_id, response_header_version(api_key, api_version))
    )
    _response_writer(api_key, api_version)(buffer, response)
    size = buffer.tell() - 4
    view = buffer.getbuffer()
    view[0:4] = _SIZE.pack(size)
    view.release()
    return buffer.getvalue()


def encode_api_versions_fallback(correlation_id: int, min_version: int, max_version: int) -> bytes:
    """The KIP-511 answer to an ApiVersions request of a version we cannot parse.

    v0-shaped body (error_code, [api_key, min, max]) behind a v0 response header, with
    UNSUPPORTED_VERSION and only our own ApiVersions range, as Kafka sends: the client then
    retries with the highest version both sides know.
    """
    body = struct.pack(
        ">ihih hh",
        correlation_id,
        int(ErrorCode.unsupported_version),
        1,
        API_VERSIONS_KEY,
        min_version,
        max_version,
    )
    return frame(body)
