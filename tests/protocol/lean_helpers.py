"""Helpers of the lean-parser tests (test_fast_produce.py, test_fast_fetch.py): kio-encoded
frames without the size prefix, and the generic path's decode to compare with."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings

from tests.support.kafka_wire import encode_request
from tidelog.protocol import codec

SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None
)


def frame(request: Any, correlation_id: int, client_id: str | None) -> bytes:
    """``request`` with its request header, as the router gets it (no size prefix)."""
    return encode_request(request, correlation_id, client_id)[4:]


def kio_decode(data: bytes) -> tuple[int, str | None, Any]:
    """``(correlation_id, client_id, request)`` as the generic path (guard + kio) reads it."""
    header, offset = codec.decode_request_header(data)
    request = codec.decode_request(data, header.api_key, header.api_version, offset)
    return header.correlation_id, header.client_id, request
