"""protocol.fast.produce: the one-pass Produce parser reads what kio reads, for every version,
and a truncated or garbage frame only ever raises FrameDecodeError (or asks for the kio path)."""

from __future__ import annotations

import dataclasses
import struct
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.static.primitive import Records

from tests.protocol.lean_helpers import SETTINGS as _SETTINGS
from tests.protocol.lean_helpers import frame as _frame
from tests.protocol.lean_helpers import kio_decode as _kio
from tidelog.protocol.errors import FrameDecodeError
from tidelog.protocol.fast.answers import (
    ProducePartitionAnswer,
    encode_produce_body,
    encode_produce_one,
)
from tidelog.protocol.fast.produce import parse_produce_frame

st.register_type_strategy(Records, st.binary(max_size=80).map(Records))

VERSIONS = range(3, 13)


def _same(lean: Any, kio: Any) -> None:
    assert lean.transactional_id == kio.transactional_id
    assert lean.acks == kio.acks
    assert lean.timeout == kio.timeout
    assert len(lean.topic_data) == len(kio.topic_data)
    for lt, kt in zip(lean.topic_data, kio.topic_data, strict=True):
        assert lt.name == kt.name
        assert [(p.index, p.records) for p in lt.partition_data] == [
            (p.index, None if p.records is None else bytes(p.records)) for p in kt.partition_data
        ]


@pytest.mark.parametrize("version", VERSIONS)
def test_equals_kio_decode(version: int) -> None:
    cls = load_request_schema(0, version)

    @_SETTINGS
    @given(
        st.from_type(cls),
        st.integers(-(2**31), 2**31 - 1),
        st.none() | st.text(max_size=20),
        st.binary(max_size=8),
    )
    def check(request: Any, correlation_id: int, client_id: str | None, trailing: bytes) -> None:
        frame = _frame(request, correlation_id, client_id) + trailing
        parsed = parse_produce_frame(frame)
        assert parsed is not None
        kio_correlation, kio_client, kio_request = _kio(frame)
        assert parsed[0] == kio_correlation == correlation_id
        assert parsed[1] == kio_client
        _same(parsed[2], kio_request)
        # the router hands it a read-only memoryview slice
        again = parse_produce_frame(memoryview(b"\x00" + frame)[1:])
        assert again == parsed

    check()


def _one_batch_shape(request: Any, records: bytes) -> Any:
    """``request`` reshaped to what producers send most: no transactional id, one topic, one
    partition with records (the parser's two-unpack path)."""
    module = sys.modules[type(request).__module__]
    topic_type, partition_type = module.TopicProduceData, module.PartitionProduceData
    topic = request.topic_data[0] if request.topic_data else None
    name = topic.name if topic is not None else "t"
    index = topic.partition_data[0].index if topic and topic.partition_data else 0
    return dataclasses.replace(
        request,
        transactional_id=None,
        topic_data=(
            topic_type(
                name=name,
                partition_data=(partition_type(index=index, records=Records(records)),),
            ),
        ),
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_one_batch_requests_equal_kio_decode(version: int) -> None:
    """The common shape, with records lengths around the varint steps (1, 2, 3 bytes), trailing
    bytes, truncations and one damaged byte: read as kio reads it, or refused as kio refuses."""
    cls = load_request_schema(0, version)
    sizes = st.sampled_from([0, 1, 126, 127, 128, 16382, 16383, 16384, 20000]) | st.integers(0, 300)

    @_SETTINGS
    @given(st.from_type(cls), sizes, st.binary(max_size=8), st.data())
    def check(request: Any, size: int, trailing: bytes, data: st.DataObject) -> None:
        shaped = _one_batch_shape(request, bytes(range(256)) * (size // 256) + bytes(size % 256))
        frame = _frame(shaped, 5, "rdkafka") + trailing
        parsed = parse_produce_frame(frame)
        assert parsed is not None
        _same(parsed[2], _kio(frame)[2])
        assert parse_produce_frame(memoryview(b"\x00" + frame)[1:]) == parsed
        cut = data.draw(st.integers(0, len(frame) - len(trailing) - 1))
        with pytest.raises(FrameDecodeError):
            parse_produce_frame(frame[:cut])
        damaged = bytearray(frame)
        at = data.draw(st.integers(8, len(frame) - 1))
        damaged[at] = data.draw(st.integers(0, 255))
        try:
            again = parse_produce_frame(bytes(damaged))
        except FrameDecodeError:
            with pytest.raises(FrameDecodeError):
                _kio(bytes(damaged))
            return
        if again is not None:
            _same(again[2], _kio(bytes(damaged))[2])

    check()


@pytest.mark.parametrize("version", VERSIONS)
def test_truncated_frames_raise_frame_decode_error(version: int) -> None:
    cls = load_request_schema(0, version)

    @_SETTINGS
    @given(st.from_type(cls), st.none() | st.text(max_size=5), st.data())
    def check(request: Any, client_id: str | None, data: st.DataObject) -> None:
        frame = _frame(request, 7, client_id)
        cut = data.draw(st.integers(0, len(frame) - 1))
        with pytest.raises(FrameDecodeError):
            parse_produce_frame(frame[:cut])

    check()


@pytest.mark.parametrize("version", VERSIONS)
def test_garbage_raises_only_frame_decode_error(version: int) -> None:
    flexible = version >= 9

    @_SETTINGS
    @given(st.none() | st.text(max_size=5), st.binary(max_size=120))
    def check(client_id: str | None, body: bytes) -> None:
        raw = b"" if client_id is None else client_id.encode()
        header = struct.pack(">hhih", 0, version, 1, len(raw) if client_id is not None else -1)
        frame = header + raw + (b"\x00" if flexible else b"") + body
        try:
            parsed = parse_produce_frame(frame)
        except FrameDecodeError:
            # the generic path (the guard, then kio) refuses it as well
            with pytest.raises(FrameDecodeError):
                _kio(frame)
            return
        if parsed is not None:
            _same(parsed[2], _kio(frame)[2])

    check()


@pytest.mark.parametrize(
    "body",
    [
        b"\x00" + b"\xff\xff\xff\x7f" + struct.pack(">i", 1) + b"\xff\xff\xff\xff\x0f",
        b"\x00\x00\x01" + struct.pack(">i", 1000) + b"\x02\x02t\xff\xff\xff\xff\x0f",
    ],
)
def test_impossible_lengths_v9(body: bytes) -> None:
    frame = struct.pack(">hhih", 0, 9, 1, -1) + b"\x00" + body
    with pytest.raises(FrameDecodeError):
        parse_produce_frame(frame)


def test_unusual_frames_take_the_generic_path() -> None:
    # header tagged fields (v9+) and versions outside 3-12 are left to kio
    assert parse_produce_frame(struct.pack(">hhih", 0, 9, 1, -1) + b"\x01\x00\x00") is None
    assert parse_produce_frame(struct.pack(">hhih", 0, 2, 1, -1) + b"\x00" * 20) is None
    assert parse_produce_frame(struct.pack(">hhih", 1, 4, 1, -1) + b"\x00" * 20) is None


@pytest.mark.parametrize("version", VERSIONS)
def test_corrupted_frames_agree_with_kio(version: int) -> None:
    cls = load_request_schema(0, version)

    @_SETTINGS
    @given(st.from_type(cls), st.data())
    def check(request: Any, data: st.DataObject) -> None:
        frame = bytearray(_frame(request, 3, "c"))
        at = data.draw(st.integers(8, len(frame) - 1))
        frame[at] = data.draw(st.integers(0, 255))
        corrupted = bytes(frame)
        try:
            parsed = parse_produce_frame(corrupted)
        except FrameDecodeError:
            with pytest.raises(FrameDecodeError):
                _kio(corrupted)
            return
        if parsed is not None:
            _same(parsed[2], _kio(corrupted)[2])

    check()


@pytest.mark.parametrize("version", VERSIONS)
def test_encode_produce_one_equals_the_general_encoder(version: int) -> None:
    # encode_produce_body is checked byte for byte against kio in test_fast_answers.py
    @_SETTINGS
    @given(
        st.text(min_size=1, max_size=30),
        st.integers(0, 2**31 - 1),
        st.integers(-(2**15), 2**15 - 1),
        st.integers(-1, 2**63 - 1),
        st.integers(-1, 2**63 - 1),
        st.integers(-1, 2**63 - 1),
        st.none() | st.text(max_size=30),
    )
    def check(
        name: str, index: int, error: int, base: int, append: int, start: int, message: str | None
    ) -> None:
        message = message if version >= 8 else None
        one = encode_produce_one(version, name, index, error, base, append, start, message)
        answer = ProducePartitionAnswer(index, error, base, append, start, message)
        assert one == encode_produce_body(version, [(name, [answer])])

    check()
