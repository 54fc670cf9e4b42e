"""The frame decoder in process: any bytes give a request or ``FrameDecodeError``, nothing else.

kio's native reader trusts array lengths (a huge one would abort the process), so every body
goes through ``protocol.guard`` first. These tests feed ``codec.peek_request_header``,
``decode_request_header`` and ``decode_request`` damaged encodings of every request version
kio knows, and plain random bytes, thousands of times faster than over a socket: a crash here
would take the test process down with it.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.fuzz_inputs import mutated, register, requests
from tidelog.broker.router import discover_handlers
from tidelog.protocol import codec
from tidelog.protocol.errors import FrameDecodeError

SCALE = float(os.environ.get("CHAOS_FUZZ_SCALE", "1"))
register()


def _known_pairs() -> list[tuple[int, int]]:
    specs, _ = discover_handlers()
    return [
        (key, version)
        for key, spec in sorted(specs.items())
        for version in range(spec.min_version, spec.max_version + 1)
    ]


PAIRS = _known_pairs()
TRIED = {"inputs": 0}


def _decode(frame: bytes) -> None:
    """What the router does with a frame, minus the handler."""
    try:
        api_key, version, _ = codec.peek_request_header(frame)
        header, offset = codec.decode_request_header(frame)
        assert (header.api_key, header.api_version) == (api_key, version)
        codec.decode_request(frame, api_key, version, offset)
    except FrameDecodeError:
        pass
    TRIED["inputs"] += 1


@settings(
    max_examples=max(1, int(500 * SCALE)),
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(data=st.data())
def test_decoder_survives_damaged_requests_of_every_version(data: st.DataObject) -> None:
    api_key, version = data.draw(st.sampled_from(PAIRS), label="api")
    frame = data.draw(requests(api_key, version), label="request")
    payload, _ = data.draw(mutated(frame), label="damage")
    # The decoder takes a frame without its size prefix, as bytes or a read-only view.
    body = payload[4:]
    _decode(body)
    _decode(memoryview(body).toreadonly())
    # The undamaged request decodes.
    codec.decode_request(frame[4:], api_key, version, codec.decode_request_header(frame[4:])[1])


@settings(
    max_examples=max(1, int(2000 * SCALE)),
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(
    api=st.sampled_from(PAIRS),
    correlation=st.integers(-(2**31), 2**31 - 1),
    body=st.binary(max_size=400),
)
def test_decoder_survives_random_bodies(
    api: tuple[int, int], correlation: int, body: bytes
) -> None:
    api_key, version = api
    header = codec.request_header_version(api_key, version)
    prefix = api_key.to_bytes(2, "big", signed=True) + version.to_bytes(2, "big", signed=True)
    prefix += correlation.to_bytes(4, "big", signed=True) + b"\xff\xff"  # null client id
    if header == 2:
        prefix += b"\x00"
    _decode(prefix + body)


@pytest.mark.parametrize("size", [0, 1, 5, 7, 8])
def test_short_frames(size: int) -> None:
    with pytest.raises(FrameDecodeError):
        codec.decode_request_header(bytes(size))


def test_inputs_were_tried() -> None:
    print(f"\ncodec fuzz: {TRIED['inputs']} frames decoded or refused in process")
    assert TRIED["inputs"] >= 2500
